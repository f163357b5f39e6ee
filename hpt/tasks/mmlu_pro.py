"""MMLU-Pro: up to ten-way multiple choice over 14 categories (Wang et al., 2024).

Also the pieces the other multiple-choice tasks of the structured-prompting paper share
(``ChoiceTask``, ``csv_dict_rows``): gpqa.py and medqa.py import them.

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
import csv
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from hpt.results.penalties import borrowed
from hpt.tasks.base import CarvedSplit, DatasetError, Parts, ReasonedTask, Sample, seeded_slice
from hpt.tasks.parsing import read_sample_choice
from hpt.tasks.sources import load_hub, read_jsonl, require_file

LETTERS = "ABCDEFGHIJ"
TRAIN_SEED = 42


def csv_dict_rows(
    lines: Iterable[str], where: str, required: Iterable[str]
) -> Iterator[tuple[str, dict[str, str]]]:
    """(place, row) for each record of a CSV file with a header; a missing column is a
    DatasetError naming the file. The place is "FILE:LINE" (the record's last line)."""
    reader = csv.DictReader(lines)
    try:
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise DatasetError(f"{where}:1: expected the columns {missing} in the header")
        for row in reader:
            if None in row or any(v is None for v in row.values()):
                raise DatasetError(
                    f"{where}:{reader.line_num}: expected {len(reader.fieldnames or [])} columns"
                )
            yield f"{where}:{reader.line_num}", row
    except csv.Error as exc:
        raise DatasetError(f"{where}:{reader.line_num}: not valid CSV ({exc})") from None


class ChoiceTask(ReasonedTask):
    """A multiple-choice task: fields ``question`` and ``options`` ((letter, text) pairs),
    target the correct letter."""

    # HPT's table 4 gives no penalty for these datasets (MMLU-Pro, GPQA, HeadQA,
    # MedBullets): MMLU's (3.03), the closest kind, stands in until `hpt annotate` measures
    # one, and says so.
    penalty = 3.03
    penalty_source = borrowed("MMLU")
    # Meta key whose value groups exemplars with the sample (MMLU's subject); None: any.
    exemplar_group: ClassVar[str | None] = None

    def __init__(self, data_dir: Path | None = None) -> None:
        super().__init__(data_dir)
        # Worked explanations the data itself carries (MMLU-Pro's cot_content, GPQA's
        # Explanation), by sample id, for three-shot exemplars.
        self._explanations: dict[str, str] = {}

    def parse_why(self, completion: str, sample: Sample) -> tuple[str | None, str | None]:
        options = sample.fields.get("options")
        n = len(options) if isinstance(options, list) else len(LETTERS)
        return read_sample_choice(completion, sample.fields, LETTERS[:n])

    def explanation(self, exemplar: Sample) -> str | None:
        return self._explanations.get(exemplar.id) or super().explanation(exemplar)

    def exemplars_for(self, sample: Sample, pool: Sequence[Sample]) -> list[Sample]:
        """Three exemplars from the training pool: those of the sample's own group first
        (pool order), topped up with others."""
        key = self.exemplar_group
        mine = sample.meta.get(key) if key else None
        same = [s for s in pool if key and s.meta.get(key) == mine][:3]
        taken = {s.id for s in same}
        chosen = same + [s for s in pool[:6] if s.id not in taken][: 3 - len(same)]
        if len(chosen) < 3:
            raise DatasetError(f"{self.name}: fewer than three training exemplars")
        return chosen


def choice_sample(
    task: str, ident: str, question: str, options: Sequence[str], answer: int, where: str,
    meta: dict[str, str] | None = None,
) -> Sample:  # fmt: skip
    if not 1 <= len(options) <= len(LETTERS):
        raise DatasetError(f"{where}: expected 1-{len(LETTERS)} options, found {len(options)}")
    if not 0 <= answer < len(options):
        raise DatasetError(f"{where}: answer index {answer} is not among {len(options)} options")
    return Sample(
        id=f"{task}-{ident}",
        fields={"question": question, "options": list(zip(LETTERS, options, strict=False))},
        target=LETTERS[answer],
        meta=meta or {},
    )


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
