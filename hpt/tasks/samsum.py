"""SAMSum: summarise a chat dialogue; resolved when ROUGE-L F reaches the threshold (0.20)."""

from __future__ import annotations

from hpt.tasks.base import Sample
from hpt.tasks.generation import GenerationTask
from hpt.tasks.sources import field, load_hub, read_csv_rows, require_file
from hpt.tasks.textmetrics import ROUGE_L, rouge_l


class SAMSum(GenerationTask):
    name = "samsum"
    title = "SAMSum"
    hub_id = "knkarthick/samsum"
    hub_split = "test"
    penalty = 2.23
    default_threshold = 0.20
    metric_name = "ROUGE-L F"
    metric_description = ROUGE_L
    corpus_metric = "mean ROUGE-L F"

    def _load(self, split: str, filename: str) -> list[Sample]:
        if self.data_dir is None:
            rows = [
                (f"{self.hub_id} {split} row {i}", r)
                for i, r in enumerate(load_hub(self.hub_id, None, split))
            ]
        else:
            path = require_file(self.data_dir, f"samsum/{filename}", self.name)
            lines = read_csv_rows(path, 3)
            next(lines, None)  # the header: id,summary,dialogue
            rows = [
                (f"{path}:{n}", {"id": r[0], "summary": r[1], "dialogue": r[2]}) for n, r in lines
            ]
        return [
            Sample(
                id=f"samsum-{split}-{field(row, 'id', where)}",
                # The files keep the original CRLF line ends; prompts get plain newlines.
                fields={"dialogue": field(row, "dialogue", where).replace("\r\n", "\n")},
                target=field(row, "summary", where),
            )
            for where, row in rows
        ]

    def load_samples(self) -> list[Sample]:
        return self._load("test", "test.csv")

    def load_exemplar_pool(self) -> list[Sample]:
        return self._load("validation", "val.csv")[:3]

    def exemplar_ids(self) -> list[str]:
        return [s.id for s in self.load_exemplar_pool()]

    def score(self, output: str, reference: str) -> float:
        return rouge_l(output, reference)
