"""Tasks whose answers are free text, resolved by a reference-based score and a threshold."""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from hpt.tasks.base import Check, Sample, Task

_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:summary|french|translation|traduction)(?:\*\*)?\s*:\s*(?:\*\*)?\s*",
    re.IGNORECASE,
)
_PAIRS = {'"': '"', "'": "'", "«": "»", "“": "”"}


def clean_output(completion: str) -> str:
    """The answer text: a leading "Summary:"/"French:" label and one pair of wrapping quotes
    removed; nothing else is touched."""
    text = _LABEL.sub("", completion.strip(), count=1).strip()
    if len(text) >= 2 and _PAIRS.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    return text


class GenerationTask(Task):
    """Resolved when ``score(output, reference) >= threshold`` (both on a 0-1 scale)."""

    default_threshold: ClassVar[float]
    metric_name: ClassVar[str]
    metric_description: ClassVar[str]
    corpus_metric: ClassVar[str]
    threshold: float

    def __init__(self, data_dir: object = None, threshold: float | None = None) -> None:
        super().__init__(data_dir)  # type: ignore[arg-type]
        self.threshold = self.default_threshold if threshold is None else threshold

    @abstractmethod
    def score(self, output: str, reference: str) -> float: ...

    @classmethod
    def corpus_score(
        cls, outputs: Sequence[str], references: Sequence[str], scores: Sequence[float | None]
    ) -> float:
        """The dataset-level score; by default the mean of the sentence scores."""
        known = [s for s in scores if s is not None]
        return sum(known) / len(known) if known else 0.0

    def parse(self, completion: str, sample: Sample) -> str | None:
        text = clean_output(completion)
        return text or None

    def check(self, sample: Sample, completion: str) -> Check:
        output = self.parse(completion, sample)
        if output is None:
            return Check(parsed=None, resolved=False, score=0.0, detail="empty output")
        value = self.score(output, sample.target)
        verdict = ">=" if value >= self.threshold else "<"
        return Check(
            parsed=output,
            resolved=value >= self.threshold,
            score=value,
            detail=f"{self.metric_name} {value:.3f} {verdict} {self.threshold:g}",
        )
