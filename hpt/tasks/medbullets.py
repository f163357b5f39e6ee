"""MedBullets: USMLE Step 2/3 style questions, multiple choice; from the hub only (see
hpt.tasks.structured_sources)."""

from __future__ import annotations

from typing import Any, ClassVar

from hpt.tasks.base import CarvedSplit, DatasetError, Parts, Sample, seeded_slice
from hpt.tasks.choice import LETTERS, ChoiceTask, choice_sample
from hpt.tasks.structured_sources import TRAIN_SEED, HubOnly


class MedBullets(CarvedSplit, HubOnly, ChoiceTask):
    """MedBullets (Chen et al., 2024): 308 USMLE Step 2/3 style questions, four options
    (the ``op4`` release HELM uses; an empty fifth option is dropped). There is no train
    split: 10% of the questions (31, seed 42) are training data, excluded from evaluation."""

    name = "medbullets"
    title = "MedBullets"
    hub_id = "mkieffer/Medbullets"
    hub_split = "op4_test"
    hub_train_split = None
    report_rank = 15
    TRAIN_FRACTION: ClassVar[float] = 0.1

    def _sample(self, row: dict[str, Any], where: str, index: int) -> Sample:
        options = row.get("options")
        if isinstance(options, dict):  # the hub's {A: .., E: ..}
            texts = [options.get(k) for k in LETTERS[:5]]
        else:  # the release CSV's opa .. ope
            texts = [row.get(f"op{c}") for c in "abcde"]
        texts = [t for t in texts if isinstance(t, str) and t.strip()]
        kept = [t.strip() for t in texts if isinstance(t, str)]
        answer = row.get("answer_idx", row.get("answer"))
        question = row.get("question")
        if not isinstance(question, str) or not isinstance(answer, str) or len(texts) < 2:
            raise DatasetError(
                f"{where}: expected question, options A-E (or opa-ope) and an answer letter"
            )
        letter = answer.strip().upper()
        if len(letter) != 1 or letter not in LETTERS[: len(texts)]:
            raise DatasetError(f"{where}: answer {answer!r} is not one of the option letters")
        ident = str(row.get("idx") or row.get("id") or index)
        explanation = row.get("explanation")
        sample = choice_sample(
            self.name, ident, question.strip(), kept,
            LETTERS.index(letter), where,
        )  # fmt: skip
        if isinstance(explanation, str) and explanation.strip():
            self._explanations[sample.id] = explanation.strip()
        return sample

    def _carve(self) -> Parts:
        rows = self.hub_rows("test")
        samples = [self._sample(r, w, i) for i, (w, r) in enumerate(rows)]
        size = max(3, round(len(samples) * self.TRAIN_FRACTION))
        return seeded_slice(samples, {"": size}, lambda s: "", TRAIN_SEED,
                            lambda s: str(s.fields["question"]))  # fmt: skip

    def _carve_note(self, training: list[Sample]) -> str | None:
        return (
            f"MedBullets has no train split: a seeded slice of {len(training)} questions "
            f"({int(self.TRAIN_FRACTION * 100)}%, seed {TRAIN_SEED})"
        )
