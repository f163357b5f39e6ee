"""Intervals of the ceiling report (hpt.reports.ceiling): the Wilson score interval of a
run's accuracy, when an HPI gets a bootstrap interval, and the words that say why a figure has
none."""

from __future__ import annotations

import math
import statistics

CONFIDENCE = 0.95
# The two-sided normal quantile of CONFIDENCE (1.96).
Z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
# Below this many scored samples a percentile bootstrap of a mean (the HPT view's HPI) runs
# noticeably narrow (by ~20% at 10: it ignores the t correction and the n-1), so none is shown.
MIN_BOOTSTRAP_N = 10
INTERVALS = (
    f"{CONFIDENCE:.0%} Wilson score intervals of k resolved out of n scored samples, for run "
    f"results only (defined at 0/n and n/n as well, where a bootstrap or Wald interval "
    f"collapses to a point); none for published (CSV) rows, whose samples hpt does not see, "
    f"nor for cells whose samples were drawn more than once (their climbs are not "
    f"independent). The HPT view's HPI: a {CONFIDENCE:.0%} percentile bootstrap over samples, "
    f"given with at least {MIN_BOOTSTRAP_N} scored samples whose scores differ"
)
NO_SAMPLES = "a published result: hpt does not see the samples behind it"
REPEATED_DRAWS = "samples drawn more than once (--samples-per-task): not independent"


def wilson_interval(k: int, n: int) -> tuple[float, float]:
    """The Wilson score interval (CONFIDENCE) of k successes in n trials, as fractions."""
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"no proportion in {k} of {n}")
    p = k / n
    z2 = Z * Z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # 0/n and n/n: the bound that equals p must be p exactly, not p +- rounding.
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


def hpi_interval_missing(n: int, distinct_scores: int, independent: bool) -> str | None:
    """Why an HPI (a mean of per-sample scores) gets no bootstrap interval, or None when it
    gets one."""
    if not independent:
        return REPEATED_DRAWS
    if n < MIN_BOOTSTRAP_N:
        return f"{n} scored sample(s): a bootstrap needs at least {MIN_BOOTSTRAP_N}"
    if distinct_scores < 2:
        return "every sample scored the same: a bootstrap collapses to that point"
    return None
