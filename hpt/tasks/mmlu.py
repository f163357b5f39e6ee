"""MMLU: four-way multiple choice over 57 subjects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hpt.results.penalties import TABLE_4
from hpt.tasks.base import DatasetError, ReasonedTask, Sample
from hpt.tasks.readers import read_sample_choice
from hpt.tasks.sources import load_hub, read_csv_rows

LABELS = "ABCD"


class MMLU(ReasonedTask):
    name = "mmlu"
    title = "MMLU"
    hub_id = "cais/mmlu"
    hub_config = "all"
    hub_split = "test"
    penalty = 3.03
    penalty_source = TABLE_4
    report_rank = 1

    def _make(
        self, subject: str, split: str, index: int, question: str, options: list[str], answer: str
    ) -> Sample:
        return Sample(
            id=f"mmlu-{subject}-{split}-{index}",
            fields={"question": question, "options": list(zip(LABELS, options, strict=True))},
            target=answer,
            meta={"subject": subject},
        )

    def _from_files(self, split: str) -> list[Sample]:
        assert self.data_dir is not None
        folder = self.data_dir / "mmlu" / split
        files = sorted(folder.glob(f"*_{split}.csv")) if folder.is_dir() else []
        if not files:
            raise DatasetError(
                f"mmlu: expected {folder}/SUBJECT_{split}.csv files in the data directory; copy "
                "the MMLU release files there or unset --data-dir/HPT_DATA_DIR to use the hub"
            )
        samples = []
        for path in files:
            subject = path.name.removesuffix(f"_{split}.csv")
            for n, row in read_csv_rows(path, 6):
                if row[5] not in LABELS:
                    raise DatasetError(f"{path}:{n}: answer {row[5]!r} is not one of A-D")
                samples.append(self._make(subject, split, n - 1, row[0], row[1:5], row[5]))
        return samples

    def _from_hub(self, split: str) -> list[Sample]:
        counters: dict[str, int] = {}
        samples = []
        for i, row in enumerate(load_hub(self.hub_id, self.hub_config, split)):
            samples.append(self._hub_row(row, split, counters, f"{self.hub_id} {split} row {i}"))
        return samples

    def _hub_row(
        self, row: dict[str, Any], split: str, counters: dict[str, int], where: str
    ) -> Sample:
        try:
            subject, choices, answer = str(row["subject"]), list(row["choices"]), int(row["answer"])
        except (KeyError, TypeError, ValueError):
            raise DatasetError(
                f"{where}: expected subject, choices and an integer answer"
            ) from None
        if len(choices) != 4 or not 0 <= answer < 4:
            raise DatasetError(f"{where}: expected four choices and an answer index 0-3")
        index = counters.get(subject, 0)
        counters[subject] = index + 1
        return self._make(
            subject, split, index, str(row["question"]), [str(c) for c in choices], LABELS[answer]
        )

    def _load(self, split: str) -> list[Sample]:
        return self._from_hub(split) if self.data_dir is None else self._from_files(split)

    def load_samples(self) -> list[Sample]:
        return self._load("test")

    def load_exemplar_pool(self) -> list[Sample]:
        return self._load("dev")

    def exemplars_for(self, sample: Sample, pool: Sequence[Sample]) -> list[Sample]:
        subject = sample.meta.get("subject")
        same = [s for s in pool if s.meta.get("subject") == subject][:3]
        if len(same) < 3:
            raise DatasetError(f"mmlu: fewer than three dev exemplars for subject {subject!r}")
        return same

    def parse_why(self, completion: str, sample: Sample) -> tuple[str | None, str | None]:
        return read_sample_choice(completion, sample.fields, LABELS)
