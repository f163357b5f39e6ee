"""HeadQA: Spanish healthcare specialisation exams in English, multiple choice; from the hub
only (see hpt.tasks.structured_sources)."""

from __future__ import annotations

from typing import Any

from hpt.tasks.base import DatasetError, Sample
from hpt.tasks.choice import ChoiceTask, choice_sample
from hpt.tasks.structured_sources import HubOnly


class HeadQA(HubOnly, ChoiceTask):
    """HEAD-QA (Vilares and Gómez-Rodríguez, 2019), English: Spanish healthcare
    specialisation exams, four or five options. Questions that need an image are left out
    (the model is shown text only)."""

    name = "headqa"
    title = "HeadQA"
    hub_id = "dvilares/head_qa"
    hub_config = "en"
    hub_split = "test"
    report_rank = 14
    exemplar_group = "category"

    def _sample(self, row: dict[str, Any], where: str) -> Sample | None:
        try:
            answers = sorted(row["answers"], key=lambda a: int(a["aid"]))
            texts = [str(a["atext"]) for a in answers]
            right = [i for i, a in enumerate(answers) if int(a["aid"]) == int(row["ra"])]
            question, qid = row["qtext"], int(row["qid"])
        except (KeyError, TypeError, ValueError):
            raise DatasetError(
                f"{where}: expected qid, qtext, ra and answers as a list of {{aid, atext}}"
            ) from None
        if row.get("image"):
            return None
        if len(right) != 1:
            raise DatasetError(f"{where}: ra {row['ra']!r} is not one answer's aid")
        exam = str(row.get("name") or row.get("year") or "exam")
        return choice_sample(
            self.name, f"{exam}-{qid}", str(question), texts, right[0], where,
            {"category": str(row.get("category", ""))},
        )  # fmt: skip

    def _load(self, role: str) -> list[Sample]:
        samples = [self._sample(r, w) for w, r in self.hub_rows(role)]
        return [s for s in samples if s is not None]

    def load_samples(self) -> list[Sample]:
        return self._load("test")

    def load_exemplar_pool(self) -> list[Sample]:
        return self._load("train")
