"""``report.md``, the page ``hpt report`` writes: every table of the report in order, with
what each means."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from hpt.reports import efforts, floors
from hpt.reports.cells import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CellReport
from hpt.reports.comparisons import Comparison
from hpt.reports.comparisons_markdown import explanation, markdown_table
from hpt.reports.cost_tables import (
    cost_note,
    costed,
    price_notes,
    table_level_costs,
    table_usage,
)
from hpt.reports.tables import (
    declared_table,
    declared_tables,
    table_adaptive_hpi,
    table_adaptive_scores,
    table_levels,
)

# Over every dataset, whatever table it declares: adaptive HPF (the paper's tables 6 and 7).
ADAPTIVE_SECTIONS = (
    ("Table 6 · Adaptive HPF: HPI", table_adaptive_hpi),
    ("Table 7 · Adaptive HPF: performance", table_adaptive_scores),
)
EFFORTS_TITLE = "Against reasoning effort: HPI, accuracy, tokens and cost"
LEVELS_NOTE = (
    "Each level's calls, its judge's and extractor's included, as the records keep them; "
    "adaptive HPF's selector turns apart. A level's calls are those of the samples that "
    "reached it."
)


def markdown(
    reports: list[CellReport],
    sources: list[Path],
    comparisons: list[Comparison] | None = None,
    detect: float | None = None,
    unpaired: Sequence[str] = (),
) -> str:
    """``report.md``: the tables, the paired comparisons, sizing, levels, usage and notes."""
    out = io.StringIO()
    out.write("# HPT report\n\n")
    out.write("Runs: " + ", ".join(f"`{s}`" for s in sources) + "\n\n")
    out.write(
        f"Brackets are 95% percentile-bootstrap intervals over samples "
        f"({BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED}). Samples that ended in an "
        f"error, or that a judge left without a valid score, are not scored.\n"
    )
    for table in declared_tables(reports):
        body = declared_table(reports, table)
        if body:
            out.write(f"\n## {table.title}\n\n{body}\n")
    for title, make in ADAPTIVE_SECTIONS:
        body = make(reports)
        if body:
            out.write(f"\n## {title}\n\n{body}\n")
    against = efforts.table_efforts(reports)
    if against:
        out.write(f"\n## {EFFORTS_TITLE}\n\n{efforts.EFFORTS_NOTE}\n\n{against}\n")
        cut = efforts.budget_notes(reports)
        out.write("".join(f"\n- {note}" for note in cut) + ("\n" if cut else ""))
    chance = floors.table_chance(reports)
    if chance:
        out.write(f"\n## Chance levels\n\n{floors.CHANCE_NOTE}\n\n{chance}\n")
    if comparisons or unpaired:
        out.write(f"\n## Paired comparisons\n\n{explanation()}\n\n")
        if comparisons:
            out.write(markdown_table(comparisons) + "\n")
        out.write("".join(f"\n- {note}" for note in unpaired) + ("\n" if unpaired else ""))
    out.write(f"\n## Sizing the next run\n\n{floors.SIZING_NOTE}\n\n")
    out.write(floors.table_sizing(reports, detect) + "\n")
    out.write(f"\n## Resolved per level\n\n{table_levels(reports)}\n")
    priced = costed(reports)
    out.write("\n## Calls, tokens and cost\n\n" + (f"{cost_note(reports)}\n\n" if priced else ""))
    out.write(f"{table_usage(reports)}\n")
    prices = price_notes(reports) if priced else []
    out.write("".join(f"\n- {note}" for note in prices) + ("\n" if prices else ""))
    by_level = table_level_costs(reports)
    if by_level:
        out.write(f"\n## Calls, cached input and cost per level\n\n{LEVELS_NOTE}\n\n{by_level}\n")
    notes = {(r.info.title or r.info.name, n): None for r in reports for n in r.info.notes}
    for r in reports:
        if r.duplicates:
            notes[r.info.title or r.info.name, duplicates_note(r)] = None
    if notes:
        out.write("\n## Notes on the data\n\n")
        out.write("".join(f"- {title}: {note}\n" for title, note in notes))
    return out.getvalue()


def duplicates_note(report: CellReport) -> str:
    n = report.duplicates
    return (
        f"{report.source} holds {n} duplicate record{'s' if n != 1 else ''} of the same sample "
        f"and draw in {report.cell.title}; each (sample, draw) was counted once, its first "
        f"record kept"
    )
