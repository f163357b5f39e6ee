"""MMLU-Pro: up to ten-way multiple choice over 14 categories (Wang et al., 2024).

Data. Offline: ``mmlu_pro/test.jsonl`` (12032 rows; the shared copy stores ``options`` as a
JSON list and ``answer_index`` as a number, the README describes a Python-literal list in a
string and a string index: both are read). Hub: ``TIGER-Lab/MMLU-Pro``, split ``test``, and
its ``validation`` split (70 questions, 5 per category, with worked ``cot_content``) as
training data. Offline there is no validation split, so 5 questions per category (70) are
taken from test by a hash of (seed 42, id), like ``select``: that slice is training data
and is excluded from evaluation (``split_notes`` says so).
"""

from __future__ import annotations

import ast
from typing import Any, ClassVar

from hpt.tasks.base import CarvedSplit, DatasetError, Parts, Sample, seeded_slice
from hpt.tasks.choice import ChoiceTask, choice_sample
from hpt.tasks.sources import load_hub, read_jsonl, require_file
from hpt.tasks.structured_sources import TRAIN_SEED


class MMLUPro(CarvedSplit, ChoiceTask):
    name = "mmlu_pro"
    title = "MMLU-Pro"
    hub_id = "TIGER-Lab/MMLU-Pro"
    hub_split = "test"
    report_rank = 10
    exemplar_group = "category"
    TRAIN_PER_CATEGORY: ClassVar[int] = 5

    def _sample(self, row: dict[str, Any], where: str) -> Sample:
        try:
            options = row["options"]
            if isinstance(options, str):
                options = ast.literal_eval(options)
            answer = int(row["answer_index"])
            question, ident = row["question"], row["question_id"]
            category = row["category"]
        except KeyError as exc:
            raise DatasetError(f"{where}: missing field {exc.args[0]!r}") from None
        except (ValueError, SyntaxError, TypeError):
            raise DatasetError(
                f"{where}: expected options as a list of strings and an integer answer_index"
            ) from None
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            raise DatasetError(f"{where}: options should be a list of strings")
        if not isinstance(question, str) or not isinstance(category, str):
            raise DatasetError(f"{where}: question and category should be strings")
        sample = choice_sample(
            self.name, str(ident), question, options, answer, where,
            {"category": category, "src": str(row.get("src", ""))},
        )  # fmt: skip
        letter = row.get("answer")
        if letter is not None and letter != sample.target:
            raise DatasetError(f"{where}: answer {letter!r} disagrees with answer_index {answer}")
        cot = row.get("cot_content")
        if isinstance(cot, str) and cot.strip():
            self._explanations[sample.id] = cot.strip().removeprefix("A:").strip()
        return sample

    def _rows(self, split: str) -> list[tuple[str, dict[str, Any]]]:
        if self.data_dir is None:
            rows = load_hub(self.hub_id, self.hub_config, split)
            return [(f"{self.hub_id} {split} row {i}", r) for i, r in enumerate(rows)]
        path = require_file(self.data_dir, "mmlu_pro/test.jsonl", self.name)
        return [(f"{path}:{n}", row) for n, row in read_jsonl(path)]

    def _carve(self) -> Parts:
        test = [self._sample(r, w) for w, r in self._rows("test")]
        if self.data_dir is None:
            return [self._sample(r, w) for w, r in self._rows("validation")], test
        per = {s.meta["category"]: self.TRAIN_PER_CATEGORY for s in test}
        # A question the data holds twice stays on one side of the split.
        return seeded_slice(
            test,
            per,
            lambda s: s.meta["category"],
            TRAIN_SEED,
            lambda s: repr([s.fields["question"], s.fields["options"]]),
        )

    def _carve_note(self, training: list[Sample]) -> str | None:
        if self.data_dir is None:
            return None
        return (
            f"MMLU-Pro has no validation split offline: a seeded slice of {len(training)} test "
            f"questions ({self.TRAIN_PER_CATEGORY} per category, seed {TRAIN_SEED}, like the "
            f"hub's validation split)"
        )
