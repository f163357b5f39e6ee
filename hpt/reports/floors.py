"""The report's sections that put a cell's numbers in context: what a random guesser would
have scored on the same samples (chance levels and the skill score), and how many samples a
next run needs to tell two models apart."""

from __future__ import annotations

from hpt.reports.comparisons import independent_mde, independent_samples_needed
from hpt.reports.tables import CellReport, _f, _table

BELOW = "below chance"
AT = "within chance"


def verdict(r: CellReport) -> str:
    """Below chance: even the best end of the HPI's interval is worse than a guesser's HPI;
    within chance: the interval reaches it."""
    s = r.summary
    if s.chance_hpi is None or s.hpi is None:
        return ""
    low, high = r.hpi_ci or (s.hpi, s.hpi)
    if low > s.chance_hpi:
        return BELOW
    if high >= s.chance_hpi:
        return AT
    return ""


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def table_chance(reports: list[CellReport]) -> str | None:
    """Each cell against a uniform random guesser on its samples and ladder; None when no
    cell has a chance level (open-ended tasks, adaptive mode)."""
    rows = []
    for r in reports:
        s = r.summary
        if s.chance_hpi is None:
            continue
        at = f" @{s.threshold:g}" if s.threshold is not None else ""
        rows.append([s.dataset + at, s.model, _f(s.hpi), _f(s.chance_hpi), _f(s.hpi_skill),
                     _pct(s.accuracy), _pct(s.chance_accuracy), _pct(s.level1_accuracy),
                     _pct(s.chance_level1_accuracy), verdict(r)])  # fmt: skip
    if not rows:
        return None
    header = ["dataset", "model", "HPI", "chance HPI", "skill", "accuracy %", "chance %",
              "level-1 %", "chance level-1 %", ""]  # fmt: skip
    return _table(header, rows)


CHANCE_NOTE = (
    "A uniform random guesser on the same samples and ladder: each level an independent guess "
    "among a sample's options. Skill puts that guesser at 0 and resolving every sample at level "
    "1 at 1; below 0 is worse than guessing. *Below chance*: the HPI's whole interval is worse "
    "than the guesser's; *within chance*: the interval reaches it. Open-ended tasks and "
    "adaptive cells have no chance level."
)


def table_sizing(reports: list[CellReport], detect: float | None = None) -> str:
    """Per cell: the smallest HPI difference a paired comparison on this many samples would
    detect against a model whose per-sample scores were uncorrelated with this one's (the
    cautious case), and the samples a named difference needs."""
    header = ["dataset", "model", "mode", "n", "HPI σ", "smallest detectable"]
    if detect is not None:
        header.append(f"n to detect {detect:g}")
    rows = []
    for r in reports:
        s = r.summary
        at = f" @{s.threshold:g}" if s.threshold is not None else ""
        sd = r.hpi_sd
        row = [s.dataset + at, s.model, s.mode, str(s.n), _f(sd, 3),
               _f(independent_mde(sd, s.n) if sd is not None else None, 3)]  # fmt: skip
        if detect is not None:
            needed = independent_samples_needed(sd, detect) if sd else None
            row.append("-" if needed is None else str(needed))
        rows.append(row)
    return _table(header, rows)


SIZING_NOTE = (
    "How far apart two models' HPIs must be for a paired comparison on this many samples to "
    "find the difference with 80% power (two-sided, α = 0.05), if the other model's per-sample "
    "scores were uncorrelated with this one's. Models usually find the same samples hard, "
    "which makes a paired test stronger than this: the paired comparisons give the figure "
    "measured on both models' samples. `--detect D` adds the samples a difference of D needs."
)
