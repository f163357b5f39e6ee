"""Reasoning settings in reports. Cells that differ only by their reasoning effort or thinking
budget (``Cell.reasoning_effort``, ``Cell.thinking_budget``) are different cells in every
table; where a model x dataset ran at several settings, one table sets them side by side:
HPI, accuracy, truncations, tokens and cost against the setting."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hpt.reports.cells import CellReport
from hpt.reports.markdown import interval, number, pipe_table
from hpt.reports.truncation import (
    TRUNCATION_WARNING_SHARE,
    budget_note,
    heavily_cut,
    truncations,
)
from hpt.results.records import Cell

# A cell's reasoning settings: (effort, thinking budget); None is the provider's default.
Setting = tuple[str | None, int | None]


def apart(cell: Cell) -> Cell:
    """The cell without its reasoning settings: what its efforts and budgets share."""
    return dataclasses.replace(cell, reasoning_effort=None, thinking_budget=None)


def setting(cell: Cell) -> Setting:
    return cell.reasoning_effort, cell.thinking_budget


def _bare(value: Setting) -> Cell:
    # A cell with nothing but the setting: Cell's own rules then speak of the setting alone.
    return Cell("", "", "", reasoning_effort=value[0], thinking_budget=value[1])


def setting_order(value: Setting) -> tuple[object, ...]:
    """Where a setting stands among others: efforts from least to most, then budgets."""
    return _bare(value).reasoning_rank()


def setting_label(value: Setting) -> str:
    """A "reasoning" column's entry: "effort high", "thinking 4096", or "default"."""
    return _bare(value).reasoning_label or "default"


def with_settings(reports: Sequence[CellReport]) -> bool:
    """Some cell asked for a reasoning setting: the tables then name each row's."""
    return any(r.cell.reasoning_label for r in reports)


def effort_groups(reports: Sequence[CellReport]) -> list[list[CellReport]]:
    """The cells run at several reasoning settings, grouped by what else they share (in
    report order), each group's from least to most."""
    groups: dict[Cell, list[CellReport]] = {}
    for r in reports:
        groups.setdefault(apart(r.cell), []).append(r)
    return [
        sorted(group, key=lambda r: setting_order(setting(r.cell)))
        for group in groups.values()
        if len({setting(r.cell) for r in group}) > 1
    ]


def table_efforts(reports: Sequence[CellReport]) -> str | None:
    """HPI, accuracy, truncations, tokens and cost against effort and budget, one row per
    cell of each group ``effort_groups`` finds; None when no model x dataset ran at several."""
    shown = [r for group in effort_groups(reports) for r in group]
    if not shown:
        return None
    efforts = any(r.cell.reasoning_effort is not None for r in shown)
    budgets = any(r.cell.thinking_budget is not None for r in shown)
    priced = any(r.cost_usd is not None for r in shown)
    header = ["dataset", "model", "mode", *(["effort"] if efforts else []),
              *(["thinking budget"] if budgets else []), "HPI", "accuracy %", "truncated",
              "completion tokens", "reasoning tokens", "completion tokens / sample",
              *(["cost USD"] if priced else [])]  # fmt: skip
    rows = []
    for r in shown:
        s, shared = r.summary, apart(r.cell)
        row = [shared.dataset_label, s.model, shared.mode_label]
        if efforts:
            row.append(s.reasoning_effort or "default")
        if budgets:
            row.append("default" if s.thinking_budget is None else str(s.thinking_budget))
        accuracy = None if s.accuracy is None else 100 * s.accuracy
        ci = (100 * r.accuracy_ci[0], 100 * r.accuracy_ci[1]) if r.accuracy_ci else None
        per_sample = s.completion_tokens / s.samples if s.samples else None
        row += [number(s.hpi) + interval(r.hpi_ci), number(accuracy) + interval(ci),
                truncations(s, by_level=False), str(s.completion_tokens),
                "-" if s.reasoning_tokens is None else str(s.reasoning_tokens),
                number(per_sample, 0)]  # fmt: skip
        if priced:
            row.append("-" if r.cost_usd is None else f"{r.cost_usd:.4f}")
        rows.append(row)
    return pipe_table(header, rows)


def budget_notes(reports: Sequence[CellReport]) -> list[str]:
    """One line for each cell of the effort table cut off often enough at the token limit
    (``heavily_cut``) that its HPI measures the budget as much as the model."""
    return [budget_note(r.summary) for group in effort_groups(reports) for r in group
            if heavily_cut(r.summary)]  # fmt: skip


EFFORTS_NOTE = (
    "Cells that differ only by their reasoning effort (`--reasoning-effort`) or thinking budget "
    "(`--thinking-budget`), from least to most; *default*: the provider's own. Truncated: "
    "attempts (and adaptive HPF's selector turns) cut off at the token limit, of those made; "
    "each cut attempt is unresolved because of it (per level under *Resolved per level*), and "
    f"a cell with {TRUNCATION_WARNING_SHARE:.0%} or more cut is named under the table. "
    "Reasoning tokens are the part of the completion tokens spent thinking, where the provider "
    "counted them ('-': it did not); they are billed as output, so the cost counts them once, "
    "inside the completion tokens."
)
