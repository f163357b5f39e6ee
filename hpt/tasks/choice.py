"""Multiple-choice tasks: ``ChoiceTask``, the base of MMLU-Pro, GPQA, HeadQA and MedBullets
(fields ``question`` and ``options``, target the correct letter), and ``choice_sample``, which
builds their samples."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from hpt.results.penalties import borrowed
from hpt.tasks.base import DatasetError, ReasonedTask, Sample
from hpt.tasks.readers import read_sample_choice

LETTERS = "ABCDEFGHIJ"


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
