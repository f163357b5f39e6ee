"""CommonsenseQA: five-way multiple choice."""

from __future__ import annotations

from typing import Any

from hpt.results.penalties import TABLE_4
from hpt.tasks.base import DatasetError, ReasonedTask, Sample
from hpt.tasks.readers import read_sample_choice
from hpt.tasks.sources import field, load_hub, read_jsonl, require_file

LABELS = "ABCDE"


class CommonsenseQA(ReasonedTask):
    name = "csqa"
    title = "CommonsenseQA"
    hub_id = "tau/commonsense_qa"
    hub_split = "validation"
    penalty = 2.52
    penalty_source = TABLE_4
    report_rank = 4

    def _make(
        self, sid: str, stem: str, labels: list[str], texts: list[str], key: str, where: str
    ) -> Sample:
        if labels != list(LABELS) or len(texts) != 5 or key not in LABELS:
            raise DatasetError(f"{where}: expected choices A-E and an answerKey among them")
        return Sample(
            id=sid,
            fields={"question": stem, "options": list(zip(labels, texts, strict=True))},
            target=key,
        )

    def _from_file(self, row: dict[str, Any], where: str) -> Sample:
        q = field(row, "question", where, dict)
        choices = field(q, "choices", where, list)
        try:
            labels = [c["label"] for c in choices]
            texts = [c["text"] for c in choices]
        except (TypeError, KeyError):
            raise DatasetError(f"{where}: each choice needs 'label' and 'text'") from None
        return self._make(
            field(row, "id", where),
            field(q, "stem", where),
            labels,
            texts,
            field(row, "answerKey", where),
            where,
        )

    def _from_hub(self, row: dict[str, Any], where: str) -> Sample:
        choices = field(row, "choices", where, dict)
        return self._make(
            field(row, "id", where),
            field(row, "question", where),
            list(choices.get("label", [])),
            list(choices.get("text", [])),
            field(row, "answerKey", where),
            where,
        )

    def _load(self, split: str, filename: str) -> list[Sample]:
        if self.data_dir is None:
            rows = load_hub(self.hub_id, None, split)
            return [self._from_hub(r, f"{self.hub_id} {split} row {i}") for i, r in enumerate(rows)]
        path = require_file(self.data_dir, f"csqa/{filename}", self.name)
        return [self._from_file(row, f"{path}:{n}") for n, row in read_jsonl(path)]

    def load_samples(self) -> list[Sample]:
        return self._load("validation", "dev_rand_split.jsonl")

    def load_exemplar_pool(self) -> list[Sample]:
        wanted = set(self.exemplar_ids())
        return [s for s in self._load("train", "train_rand_split.jsonl") if s.id in wanted]

    def parse_why(self, completion: str, sample: Sample) -> tuple[str | None, str | None]:
        return read_sample_choice(completion, sample.fields, LABELS)
