"""The scoring rules: what a scored sample contributes to the HPI (HPT algorithm 1; adaptive
HPF, appendix E), the pass@k estimator, and the named corpus scores a text task's summary
carries. Runs and reports both use these; a task names its corpus rule instead of
computing it, so a run directory can be summarised without the task's code."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import comb

from hpt.results.records import Attempt, SampleRecord
from hpt.results.textmetrics import corpus_bleu


def unjudged(attempts: Sequence[Attempt]) -> bool:
    """Whether a judge was asked at some level of the climb and gave no valid score (after its
    retries). Whether that level resolved the sample is then unknown, and with it where the
    climb ended, so the climb measured nothing: it is not scored, not m + penalty, not 0."""
    return any(a.verdict is not None and a.verdict.score is None for a in attempts)


def scored(record: SampleRecord) -> bool:
    """Whether a record counts in its cell's HPI, accuracy and means: neither an error nor a
    climb a judge left undecided (``unjudged``). Recomputed from the attempts, so records
    saved before hpt set ``hpi_score`` to null for those are read the same way."""
    return record.error is None and not unjudged(record.attempts)


def hpi_score(resolved_level: int | None, m: int, penalty: float) -> float:
    """k for a sample first resolved at level k; m + HPI_dataset when no level resolved it."""
    if resolved_level is None:
        return m + penalty
    if not 1 <= resolved_level <= m:
        raise ValueError(f"resolved level {resolved_level} outside 1..{m}")
    return float(resolved_level)


def adaptive_score(level: int | None, iteration: int | None, m: int, penalty: float) -> float:
    """x + i for a sample resolved at iteration i with level x; m + HPI_dataset otherwise."""
    if level is None or iteration is None:
        return m + penalty
    return float(level + iteration)


def sample_score(
    mode: str, resolved_level: int | None, iteration: int | None, m: int, penalty: float
) -> float:
    """A scored sample's contribution to the HPI: the level (standard) or level + selector
    iteration (adaptive, appendix E); m + HPI_dataset when unresolved."""
    if mode == "adaptive":
        return adaptive_score(resolved_level, iteration, m, penalty)
    return hpi_score(resolved_level, m, penalty)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator (Chen et al., 2021): n draws, c of them correct."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} draws, not {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def report_ks(n: int) -> list[int]:
    return list(range(1, n + 1)) if n <= 10 else sorted({1, 5, 10, n})


# A corpus score over each scored sample's final output: (outputs, references, the
# attempts' own 0-1 scores) -> a 0-1 score.
CorpusRule = Callable[[Sequence[str], Sequence[str], Sequence[float | None]], float]


def mean_of_scores(
    outputs: Sequence[str], references: Sequence[str], scores: Sequence[float | None]
) -> float:
    known = [s for s in scores if s is not None]
    return sum(known) / len(known) if known else 0.0


def corpus_bleu_rule(
    outputs: Sequence[str], references: Sequence[str], scores: Sequence[float | None]
) -> float:
    return corpus_bleu(outputs, references)


CORPUS_RULES: dict[str, CorpusRule] = {"mean": mean_of_scores, "corpus_bleu": corpus_bleu_rule}


def register_corpus_rule(name: str, rule: CorpusRule) -> None:
    """Make ``name`` usable as a task's ``corpus_rule`` (a plugin's own corpus metric)."""
    CORPUS_RULES[name] = rule
