"""The report's sections that put a cell's numbers in context: what a random guesser would
have scored on the same samples (chance levels and the skill score), and how many samples a
next run needs to tell two models apart."""

from __future__ import annotations

from hpt.reports.cells import CellReport
from hpt.reports.comparisons import independent_mde, independent_samples_needed
from hpt.reports.markdown import number, pipe_table


def verdict(r: CellReport) -> str:
    """Where the HPI or the HPF accuracy is below chance (even the best end of its interval
    is worse than a guesser's) or within chance (the interval reaches it)."""
    s = r.summary
    said = []
    if s.chance_hpi is not None and s.hpi is not None:
        low, high = r.hpi_ci or (s.hpi, s.hpi)  # lower is better
        if low > s.chance_hpi:
            said.append("HPI below chance")
        elif high >= s.chance_hpi:
            said.append("HPI within chance")
    if s.chance_accuracy is not None and s.accuracy is not None:
        low, high = r.accuracy_ci or (s.accuracy, s.accuracy)
        if high < s.chance_accuracy:
            said.append("accuracy below chance")
        elif low <= s.chance_accuracy:
            said.append("accuracy within chance")
    return "; ".join(said)


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
        rows.append([r.cell.label, s.model, number(s.hpi), number(s.chance_hpi),
                     number(s.hpi_skill), _pct(s.accuracy), _pct(s.chance_accuracy),
                     _pct(s.level1_accuracy), _pct(s.chance_level1_accuracy),
                     verdict(r)])  # fmt: skip
    if not rows:
        return None
    header = ["dataset", "model", "HPI", "chance HPI", "skill", "accuracy %", "chance %",
              "level-1 %", "chance level-1 %", ""]  # fmt: skip
    return pipe_table(header, rows)


CHANCE_NOTE = (
    "A uniform random guesser on the same samples and ladder: each level an independent guess "
    "among a sample's options. Skill puts that guesser at 0 and resolving every sample at level "
    "1 at 1; below 0 is worse than guessing. *Below chance*: the figure's whole interval is "
    "worse than the guesser's; *within chance*: the interval reaches it. A model can beat "
    "chance on the HPI (it resolves early what it resolves) and still fall below it on "
    "accuracy (a guesser with a try at every level resolves most samples). Open-ended tasks and "
    "adaptive cells have no chance level."
)


def table_sizing(reports: list[CellReport], detect: float | None = None) -> str:
    """Per cell: the smallest HPI difference a paired comparison on its samples would detect
    against a model whose per-sample scores spread like this one's and were uncorrelated
    with them, and the samples a named difference needs."""
    header = ["dataset", "model", "mode", "samples", "HPI σ", "smallest detectable"]
    if detect is not None:
        header.append(f"n to detect {detect:g}")
    rows = []
    for r in reports:
        s = r.summary
        sd, n = r.sample_sd, r.distinct_samples
        row = [r.cell.label, s.model, s.mode, str(n), number(sd, 3),
               number(independent_mde(sd, n) if sd is not None else None, 3)]  # fmt: skip
        if detect is not None:
            needed = independent_samples_needed(sd, detect) if sd else None
            row.append("-" if needed is None else str(needed))
        rows.append(row)
    return pipe_table(header, rows)


SIZING_NOTE = (
    "How far apart two models' HPIs must be for a paired comparison on this many samples to "
    "find the difference with 80% power (two-sided, α = 0.05), if the other model's per-sample "
    "scores spread like this one's and were uncorrelated with them. Models usually find the "
    "same samples hard, which makes a paired test stronger than this; a partner whose scores "
    "spread more makes it weaker. Where two models ran, the paired comparisons give the figure "
    "measured on both. A sample's repeated draws count once, averaged. `--detect D` adds the "
    "samples a difference of D needs."
)
