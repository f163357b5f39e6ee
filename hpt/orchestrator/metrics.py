"""HPI (HPT algorithm 1) and the other run metrics: pure functions over sample records."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from hpt.orchestrator.records import SampleRecord
from hpt.tasks import TASKS
from hpt.tasks.generation import GenerationTask


def hpi_score(resolved_level: int | None, m: int, penalty: float) -> float:
    """k for a sample first resolved at level k; m + HPI_dataset when no level resolved it."""
    if resolved_level is None:
        return m + penalty
    if not 1 <= resolved_level <= m:
        raise ValueError(f"resolved level {resolved_level} outside 1..{m}")
    return float(resolved_level)


class Summary(BaseModel):
    dataset: str
    model: str
    mode: str
    # Samples scored (resolved or unresolved); samples that ended in an error are not scored.
    n: int
    samples: int
    m: int
    penalty: float
    hpi: float | None
    accuracy: float | None
    level1_accuracy: float | None
    level_counts: dict[int, int]
    unresolved: int
    errors: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    # Of ``calls``, those answered from the response cache (no model call made).
    cached_calls: int = 0
    # Translation and summarisation: the dataset-level score over each scored sample's final
    # output (the resolving attempt, else the last) -- corpus BLEU for IWSLT, mean ROUGE-L F
    # for SAMSum, on a 0-1 scale -- as reported beside the HPI in the paper's table 3.
    text_metric: str | None = None
    text_score: float | None = None


class Tally:
    """Running totals; ``summary()`` at any point equals summarize() over the records so far."""

    def __init__(self, *, dataset: str, model: str, mode: str, m: int, penalty: float) -> None:
        self.dataset, self.model, self.mode, self.m, self.penalty = dataset, model, mode, m, penalty
        self.level_counts = dict.fromkeys(range(1, m + 1), 0)
        self.samples = self.unresolved = self.errors = 0
        self.score_sum = 0.0
        self.calls = self.cached_calls = self.prompt_tokens = self.completion_tokens = 0
        # (final output, reference, its score) per scored sample, for text metrics
        self.finals: list[tuple[str, str, float | None]] = []

    def add(self, record: SampleRecord) -> None:
        self.samples += 1
        self.calls += record.calls
        self.cached_calls += record.cached_calls
        self.prompt_tokens += record.prompt_tokens
        self.completion_tokens += record.completion_tokens
        if record.error is not None:
            self.errors += 1
            return
        if record.resolved_level is None:
            self.unresolved += 1
        else:
            self.level_counts[record.resolved_level] += 1
        self.score_sum += hpi_score(record.resolved_level, self.m, self.penalty)
        final = record.attempts[-1] if record.attempts else None
        if final is not None:
            self.finals.append((final.parsed or "", record.target, final.score))

    @property
    def n(self) -> int:
        return self.samples - self.errors

    @property
    def hpi(self) -> float | None:
        return self.score_sum / self.n if self.n else None

    def text_score(self) -> tuple[str | None, float | None]:
        task = TASKS.get(self.dataset)
        if task is None or not issubclass(task, GenerationTask) or not self.finals:
            return None, None
        outputs, references, scores = zip(*self.finals, strict=True)
        return task.corpus_metric, task.corpus_score(list(outputs), list(references), scores)

    def summary(self) -> Summary:
        n = self.n
        resolved = sum(self.level_counts.values())
        metric, score = self.text_score()
        return Summary(
            dataset=self.dataset,
            model=self.model,
            mode=self.mode,
            n=n,
            samples=self.samples,
            m=self.m,
            penalty=self.penalty,
            hpi=self.hpi,
            accuracy=resolved / n if n else None,
            level1_accuracy=self.level_counts.get(1, 0) / n if n else None,
            level_counts=dict(self.level_counts),
            unresolved=self.unresolved,
            errors=self.errors,
            calls=self.calls,
            cached_calls=self.cached_calls,
            text_metric=metric,
            text_score=score,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
        )


def summarize(
    records: Iterable[SampleRecord], *, dataset: str, model: str, mode: str, m: int, penalty: float
) -> Summary:
    tally = Tally(dataset=dataset, model=model, mode=mode, m=m, penalty=penalty)
    for record in records:
        tally.add(record)
    return tally.summary()
