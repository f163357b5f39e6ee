"""BoolQ: yes/no questions about a Wikipedia passage."""

from __future__ import annotations

from typing import Any

from hpt.results.penalties import TABLE_4
from hpt.tasks.base import DatasetError, Sample, Task
from hpt.tasks.readers import parse_bool
from hpt.tasks.sources import field, load_hub, read_jsonl, require_file


class BoolQ(Task):
    name = "boolq"
    title = "BoolQ"
    hub_id = "google/boolq"
    hub_split = "validation"
    penalty = 1.71
    penalty_source = TABLE_4
    report_rank = 3
    guess_options = 2

    def _all(self) -> list[Sample]:
        if self.data_dir is None:
            return [
                self._from_hub(i, r)
                for i, r in enumerate(load_hub(self.hub_id, None, "validation"))
            ]
        path = require_file(self.data_dir, "boolq/validation.jsonl", self.name)
        return [self._from_file(n - 1, row, f"{path}:{n}") for n, row in read_jsonl(path)]

    def _make(self, index: int, passage: str, question: str, answer: bool) -> Sample:
        target = "True" if answer else "False"
        return Sample(
            id=f"boolq-validation-{index}",
            fields={"passage": passage, "question": question},
            target=target,
        )

    def _from_file(self, index: int, row: dict[str, Any], where: str) -> Sample:
        # The offline copy is reformatted: prompt = "passage: TITLE -- PASSAGE\nquestion: {}".
        prompt = field(row, "prompt", where)
        question = field(row, "subject", where)
        target = field(field(row, "target_new", where, dict), "str", where)
        if not prompt.startswith("passage: ") or target not in ("True", "False"):
            raise DatasetError(
                f"{where}: not a BoolQ row (prompt 'passage: ...', target True/False)"
            )
        passage = prompt.removeprefix("passage: ").rsplit("\nquestion:", 1)[0]
        # The hub's passage has no title; drop it so both sources give the same prompt.
        _title, sep, body = passage.partition(" -- ")
        return self._make(index, body if sep else passage, question, target == "True")

    def _from_hub(self, index: int, row: dict[str, Any]) -> Sample:
        where = f"{self.hub_id} row {index}"
        return self._make(
            index,
            field(row, "passage", where),
            field(row, "question", where),
            field(row, "answer", where, bool),
        )

    def load_samples(self) -> list[Sample]:
        exemplars = set(self.exemplar_ids())
        return [s for s in self._all() if s.id not in exemplars]

    def load_exemplar_pool(self) -> list[Sample]:
        wanted = set(self.exemplar_ids())
        return [s for s in self._all() if s.id in wanted]

    def parse(self, completion: str, sample: Sample) -> str | None:
        # What the model copies from the passage or the question is not its verdict.
        echo = [v for k in ("passage", "question") if isinstance(v := sample.fields.get(k), str)]
        return parse_bool(completion, echo=echo)
