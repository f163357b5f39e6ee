"""Paired comparisons (hpt.reports.comparisons) as Markdown: the table, what its columns
mean, and ``comparisons.md``, the page ``hpt compare`` writes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hpt.reports.comparisons import Comparison
from hpt.reports.markdown import number, pipe_table
from hpt.reports.paired import ALPHA, EXACT_UP_TO, PERMUTATIONS, POWER, RESAMPLES, SEED


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def markdown_table(comparisons: Sequence[Comparison]) -> str:
    detect = next((c.detect for c in comparisons if c.detect is not None), None)
    header = ["dataset", "mode", "A", "B", "n", "HPI A", "HPI B", "HPI A − B [95% CI]",
              "p", "p Holm", "accuracy A − B", "McNemar p", "McNemar p Holm",
              "smallest detectable"]  # fmt: skip
    if detect is not None:
        header.append(f"n to detect {detect:g}")
    rows = []
    for c in comparisons:
        interval = (
            f" [{c.hpi_diff_low:+.3f}, {c.hpi_diff_high:+.3f}]"
            if c.hpi_diff_low is not None and c.hpi_diff_high is not None
            else ""
        )
        diff = "-" if c.hpi_diff is None else f"{c.hpi_diff:+.3f}{interval}"
        acc = "-" if c.accuracy_diff is None else f"{100 * c.accuracy_diff:+.1f} pts"
        row = [c.cell.label, c.mode, c.model_a, c.model_b, str(c.n), number(c.hpi_a, 3),
               number(c.hpi_b, 3), diff, _p(c.hpi_p), _p(c.p_holm), acc, _p(c.mcnemar_p),
               _p(c.mcnemar_p_holm), number(c.hpi_mde, 3)]  # fmt: skip
        if detect is not None:
            row.append("-" if c.n_to_detect is None else str(c.n_to_detect))
        rows.append(row)
    return pipe_table(header, rows)


def explanation() -> str:
    return (
        f"Paired over the samples both models scored. HPI A − B below 0: A resolved its "
        f"samples at lower levels. Brackets: 95% paired percentile bootstrap ({RESAMPLES} "
        f"resamples, seed {SEED}); p: two-sided paired permutation test (sign flips; exact up "
        f"to {EXACT_UP_TO} differing samples, else {PERMUTATIONS:,} seeded draws); McNemar: "
        f"exact, on the samples "
        f"only one model resolved; Holm: adjusted over every comparison in this table. "
        f"Smallest detectable: the HPI difference these samples find with {POWER:.0%} power "
        f"at α = {ALPHA:g} (paired, normal approximation)."
    )


def document(
    comparisons: Sequence[Comparison], sources: Sequence[Path], unshared: Sequence[str]
) -> str:
    """``comparisons.md``: the runs compared, the table, and the pairs that shared nothing."""
    return (
        "# Paired comparisons\n\nRuns: "
        + ", ".join(f"`{d}`" for d in sources)
        + f"\n\n{explanation()}\n\n{markdown_table(comparisons)}\n"
        + "".join(f"\n- {note}" for note in unshared)
    )
