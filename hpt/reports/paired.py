"""Statistics of two models scored on the same samples: the paired bootstrap interval of the
mean difference, the sign-flip permutation test, McNemar's exact test, Holm's adjustment
across comparisons, and the power arithmetic that sizes the next run.

Pure functions over per-sample values; seeded, so a report is the same every time."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from statistics import NormalDist

import numpy as np

RESAMPLES = 2000
PERMUTATIONS = 10_000
SEED = 0
# Up to this many non-zero differences the permutation test enumerates every sign pattern
# (2^16: an 8 MB table); beyond, it draws PERMUTATIONS of them.
EXACT_UP_TO = 16
ALPHA = 0.05
POWER = 0.8


def paired_bootstrap_ci(
    diffs: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED
) -> tuple[float, float] | None:
    """95% percentile bootstrap interval of the mean of paired differences: samples are drawn
    with replacement as pairs, so what the two models share cancels. Each resample is one
    multinomial draw over the distinct differences, which is the same bootstrap in memory
    that does not grow with n."""
    n = len(diffs)
    if n == 0:
        return None
    counts = Counter(float(d) for d in diffs)
    mean = sum(diffs) / n
    if len(counts) == 1:
        return mean, mean
    distinct = sorted(counts)  # the same differences in any order give the same interval
    values = np.array(distinct, dtype=float)
    probs = np.array([counts[v] for v in distinct], dtype=float) / n
    draws = np.random.default_rng(seed).multinomial(n, probs, size=resamples)
    means = draws @ values / n
    low, high = np.percentile(means, [2.5, 97.5])
    return min(float(low), mean), max(float(high), mean)


def permutation_p(
    diffs: Sequence[float],
    *,
    rounds: int = PERMUTATIONS,
    seed: int = SEED,
    exact_up_to: int = EXACT_UP_TO,
) -> float | None:
    """Two-sided paired permutation p-value for a mean difference of 0: under the null each
    pair's two scores could have come from either model, so each difference keeps or flips
    its sign. Exact (every sign pattern) for up to ``exact_up_to`` non-zero differences,
    else ``rounds`` random patterns, counted as (1 + hits) / (1 + rounds) so the estimate is
    never 0."""
    if len(diffs) == 0:
        return None
    values = np.array(sorted(d for d in diffs if d != 0), dtype=float)  # any order: one p
    if np.isnan(values).any():
        raise ValueError("a paired difference is NaN")
    if len(values) == 0:
        return 1.0
    observed = abs(values.sum())
    # Sums equal to the observed one up to float rounding (relative to the data's scale)
    # count as at least as extreme.
    tolerance = 1e-9 * float(np.abs(values).sum())
    if len(values) <= exact_up_to:
        patterns = ((np.arange(2 ** len(values))[:, None] >> np.arange(len(values))) & 1) * 2 - 1
        sums = np.abs(patterns @ values)
        return float(np.mean(sums >= observed - tolerance))
    rng = np.random.default_rng(seed)
    hits = 0
    step = max(1, 2_000_000 // len(values))  # bounded memory: rows of signs per block
    for start in range(0, rounds, step):
        rows = min(step, rounds - start)
        signs = rng.integers(0, 2, size=(rows, len(values)), dtype=np.int8) * 2 - 1
        hits += int(np.sum(np.abs(signs @ values) >= observed - tolerance))
    return (1 + hits) / (1 + rounds)


def mcnemar_exact(b: int, c: int) -> float:
    """McNemar's exact two-sided test: ``b`` pairs only the first model resolved, ``c`` only
    the second. Under the null the b + c discordant pairs split as a fair coin."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts cannot be negative")
    n = b + c
    if n == 0:
        return 1.0
    # Exact integers (C(n, i) built term by term), divided once: no overflow at large n.
    term = tail = 1
    for i in range(min(b, c)):
        term = term * (n - i) // (i + 1)
        tail += term
    return min(1.0, float(Fraction(2 * tail, 2**n)))


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment; None (no test) stays None and does not count."""
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    if any(math.isnan(p) for p, _ in present):
        raise ValueError("a p-value is NaN")
    k = len(present)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (k - rank) * p))
        adjusted[i] = running
    return adjusted


def _z(alpha: float, power: float) -> float:
    unit = NormalDist()
    return unit.inv_cdf(1 - alpha / 2) + unit.inv_cdf(power)


def detectable_difference(
    sd: float, n: int, *, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The smallest mean difference a two-sided paired test at ``alpha`` finds with
    ``power``, for n pairs whose differences have standard deviation ``sd`` (the normal
    approximation: (z_{1-alpha/2} + z_power) * sd / sqrt(n))."""
    if n < 2 or sd == 0:
        return None  # no spread seen: no estimate (0 would read as "any difference")
    return _z(alpha, power) * sd / math.sqrt(n)


def samples_needed(
    sd: float, delta: float, *, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """The pairs a two-sided paired test at ``alpha`` needs to find a mean difference of
    ``delta`` with ``power``, given differences of standard deviation ``sd``."""
    if delta <= 0:
        raise ValueError(f"the difference to detect must be positive, not {delta}")
    if sd == 0:
        return None  # no spread seen: no estimate
    # Shaved by a hair before rounding up: float noise must not turn an exact n into n + 1.
    return max(2, math.ceil((_z(alpha, power) * sd / delta) ** 2 * (1 - 1e-12)))


def sd(values: Sequence[float]) -> float | None:
    """The sample standard deviation (n - 1), None below two values."""
    return statistics.stdev(values) if len(values) >= 2 else None
