"""GSM8K: grade-school maths word problems with a numeric answer."""

from __future__ import annotations

import re
from typing import Any

from hpt.tasks.base import DatasetError, Sample, Task
from hpt.tasks.parsing import normalize_number, parse_number
from hpt.tasks.sources import field, load_hub, read_jsonl, require_file

_CALCULATOR = re.compile(r"<<[^>]*>>")


class GSM8K(Task):
    name = "gsm8k"
    title = "GSM8K"
    hub_id = "openai/gsm8k"
    hub_config = "main"
    hub_split = "test"
    penalty = 2.14

    def _rows(self, split: str) -> list[tuple[str, dict[str, Any]]]:
        if self.data_dir is None:
            rows = load_hub(self.hub_id, self.hub_config, split)
            return [(f"{self.hub_id} {split} row {i}", r) for i, r in enumerate(rows)]
        path = require_file(self.data_dir, f"gsm8k/{split}.jsonl", self.name)
        return [(f"{path}:{n}", row) for n, row in read_jsonl(path)]

    def _samples(self, split: str) -> list[Sample]:
        samples = []
        for index, (where, row) in enumerate(self._rows(split)):
            solution = field(row, "answer", where)
            _, sep, final = solution.rpartition("####")
            target = normalize_number(final.strip()) if sep else None
            if target is None:
                raise DatasetError(f"{where}: answer has no '#### NUMBER' final line")
            # Drop the calculator annotations ("<<48/2=24>>"): they are tooling, not reasoning.
            shown = _CALCULATOR.sub("", solution)
            samples.append(
                Sample(
                    id=f"gsm8k-{split}-{index}",
                    fields={"question": field(row, "question", where)},
                    target=target,
                    shown_answer=shown,
                )
            )
        return samples

    def load_samples(self) -> list[Sample]:
        return self._samples("test")

    def load_exemplar_pool(self) -> list[Sample]:
        return self._samples("train")[:50]

    def parse(self, completion: str, sample: Sample) -> str | None:
        return parse_number(completion)
