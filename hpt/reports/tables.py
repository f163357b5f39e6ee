"""The report's tables (Markdown): the tables the datasets declare (the paper's tables 1-5),
adaptive HPF's (tables 6 and 7) and where samples were resolved (calls, tokens and cost:
``cost_tables``)."""

from __future__ import annotations

from typing import Any

from hpt.reports.cells import CellReport
from hpt.reports.efforts import Setting, setting, setting_label, setting_order, with_settings
from hpt.reports.markdown import interval, number, pipe_table
from hpt.reports.truncation import truncations
from hpt.results.info import Column, ReportTable, TaskInfo
from hpt.results.records import Cell
from hpt.results.tally import Summary

# No reasoning setting asked: the provider's default.
DEFAULT_SETTING: Setting = (None, None)


def model_names(reports: list[CellReport]) -> list[str]:
    """The reports' models, each once, in report order."""
    return list(dict.fromkeys(r.summary.model for r in reports))


def model_rows(reports: list[CellReport], shown: list[CellReport]) -> list[tuple[str, Setting]]:
    """A wide table's rows: every model of the report, in report order, once per reasoning
    setting its cells in the table (``shown``) were run at; once where it has none there."""
    rows = []
    for model in model_names(reports):
        found = {setting(r.cell) for r in shown if r.summary.model == model} or {DEFAULT_SETTING}
        rows += [(model, s) for s in sorted(found, key=setting_order)]
    return rows


def _setting_column(rows: list[tuple[str, Setting]]) -> bool:
    return any(s != DEFAULT_SETTING for _, s in rows)


def _at(value: Setting) -> dict[str, object]:
    """A reasoning setting as ``_pick`` matches it."""
    return {"reasoning_effort": value[0], "thinking_budget": value[1]}


def _pick(reports: list[CellReport], **match: object) -> CellReport | None:
    for r in reports:
        if all(getattr(r.summary, k) == v for k, v in match.items()):
            return r
    return None


def _thresholds(reports: list[CellReport], dataset: str, mode: str) -> list[float]:
    found = {
        r.summary.threshold
        for r in reports
        if r.summary.dataset == dataset and r.summary.mode == mode
    }
    return sorted(t for t in found if t is not None)


def _lookup(summary: Summary, path: str) -> float | int | None:
    """A dotted path into the summary: "depth_scores.2", "forward_discrepancy.overall.value"."""
    value: Any = summary
    for part in path.split("."):
        if value is None:
            return None
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _value(r: CellReport | None, column: Column) -> str:
    """One cell of a declared table: the value, scaled, with its interval where it has one."""
    if r is None:
        return "-"
    s = r.summary
    known: dict[str, tuple[float | int | None, tuple[float, float] | None]] = {
        "hpi": (s.hpi, r.hpi_ci),
        "accuracy": (s.accuracy, r.accuracy_ci),
        "pass_at_1": (r.pass_at_1, r.accuracy_ci),
    }
    value, ci = known.get(column.value) or (_lookup(s, column.value),
                                            r.intervals.get(column.value))  # fmt: skip
    if column.percent:
        value = None if value is None else 100 * value
        ci = (100 * ci[0], 100 * ci[1]) if ci else None
    if isinstance(value, int):  # a count
        return str(value)
    text = number(value) + (interval(ci) if column.interval else "")
    if column.value == "hpi" and s.chance_hpi is not None:
        text += f" (chance {s.chance_hpi:.2f})"
    return text


def _label(column: Column, info: TaskInfo) -> str:
    return column.label.replace("{metric}", info.corpus_metric or info.metric)


def declared_tables(reports: list[CellReport], mode: str = "standard") -> list[ReportTable]:
    """The tables the reported datasets declare, in their declared order."""
    found: dict[str, ReportTable] = {}
    for r in reports:
        if r.summary.mode == mode:
            for table in r.info.tables:
                found.setdefault(table.key, table)
    return sorted(found.values(), key=lambda t: t.order)


def declared_table(
    reports: list[CellReport], table: ReportTable, mode: str = "standard"
) -> str | None:
    """One declared table over the cells of ``mode`` whose datasets joined it."""
    mine = [
        r for r in reports
        if r.summary.mode == mode and any(t.key == table.key for t in r.info.tables)
    ]  # fmt: skip
    if not mine:
        return None
    infos: dict[str, TaskInfo] = {}
    for r in mine:
        infos.setdefault(r.summary.dataset, r.info)
    # The declared rank first (the paper's column order), then first appearance.
    datasets = sorted(infos, key=lambda d: infos[d].rank)
    if table.layout == "cells":
        several = len(datasets) > 1
        variants = any(r.summary.variant is not None for r in mine)
        settings = with_settings(mine)
        header = (["dataset"] if several else []) + ["model"] + (["variant"] if variants else [])
        header += (["reasoning"] if settings else []) + [
            _label(c, infos[datasets[0]]) for c in table.columns
        ]
        rows = []
        for r in sorted(mine, key=lambda r: infos[r.summary.dataset].rank):
            s = r.summary
            row = ([r.cell.dataset_label] if several else []) + [s.model]
            row += [s.variant or "ladder"] if variants else []
            row += [setting_label(setting(r.cell))] if settings else []
            rows.append(row + [_value(r, c) for c in table.columns])
        return pipe_table(header, rows)
    groups: list[tuple[str, float | None]] = []
    for d in datasets:
        thresholds: list[float | None] = [None]
        if table.per_threshold:
            thresholds = list(_thresholds(mine, d, mode)) or [None]
        groups += [(d, t) for t in thresholds]
    lines = model_rows(reports, mine)
    settings = _setting_column(lines)
    header = ["model"] + (["reasoning"] if settings else [])
    for d, t in groups:
        header += [f"{d} {_label(c, infos[d])}{Cell.at(t)}" for c in table.columns]
    rows = []
    for model, value in lines:
        row = [model] + ([setting_label(value)] if settings else [])
        for d, t in groups:
            match: dict[str, object] = {"dataset": d, "model": model, "mode": mode, **_at(value)}
            if table.per_threshold:
                match["threshold"] = t
            found = _pick(mine, **match)
            row += [_value(found, c) for c in table.columns]
        rows.append(row)
    return pipe_table(header, rows)


def table_adaptive_hpi(reports: list[CellReport]) -> str | None:
    """Table 6: adaptive HPF's HPI per model x dataset (with thresholds)."""
    columns: list[tuple[str, float | None]] = []
    for r in reports:
        s = r.summary
        if s.mode == "adaptive" and (s.dataset, s.threshold) not in columns:
            columns.append((s.dataset, s.threshold))
    if not columns:
        return None
    lines = model_rows(reports, [r for r in reports if r.summary.mode == "adaptive"])
    settings = _setting_column(lines)
    header = ["model"] + (["reasoning"] if settings else []) + [d + Cell.at(t) for d, t in columns]
    rows = []
    for model, value in lines:
        row = [model] + ([setting_label(value)] if settings else [])
        for d, t in columns:
            at = _at(value)
            cell = _pick(reports, dataset=d, model=model, mode="adaptive", threshold=t, **at)
            row.append(
                number(cell.summary.hpi if cell else None, 3)
                + interval(cell.hpi_ci if cell else None)
            )
        rows.append(row)
    return pipe_table(header, rows)


def table_adaptive_scores(reports: list[CellReport]) -> str | None:
    """Table 7: adaptive HPF's performance: accuracy, or the text metric per threshold."""
    adaptive = [r for r in reports if r.summary.mode == "adaptive"]
    if not adaptive:
        return None
    models = model_names(adaptive)
    settings = with_settings(adaptive)
    keys = list(dict.fromkeys((r.summary.dataset, r.summary.threshold) for r in adaptive))
    found = {setting(r.cell) for r in adaptive}
    rows = []
    for d, t in keys:
        for at in sorted(found, key=setting_order):
            any_r = _pick(adaptive, dataset=d, threshold=t, **_at(at))
            if any_r is None:
                continue
            metric = any_r.summary.text_metric or any_r.info.metric
            row = [d, metric, "-" if t is None else f"{t:g}"]
            row += [setting_label(at)] if settings else []
            for model in models:
                r = _pick(adaptive, dataset=d, model=model, threshold=t, **_at(at))
                s = r.summary if r else None
                value = s.text_score if s and s.text_metric else (s.accuracy if s else None)
                row.append(number(value, 4))
            rows.append(row)
    header = ["dataset", "metric", "threshold", *(["reasoning"] if settings else []), *models]
    return pipe_table(header, rows)


def table_levels(reports: list[CellReport]) -> str:
    """Where samples were resolved: counts per level, unresolved and errors, per cell."""
    m = max(r.summary.m for r in reports)
    # Judged tasks: the climbs the judge left without a score, in no other column.
    judged = any(r.summary.judge_missing is not None for r in reports)
    # Reasoning models: the attempts (and selector turns) cut off at the token limit, of those
    # made, where there were any.
    cut = any(r.summary.cut_off[0] for r in reports)
    header = ["dataset", "model", "mode", *[f"L{k}" for k in range(1, m + 1)]]
    header += ["unresolved", "errors", *(["judge missing"] if judged else []),
               "selector hallucination %", *(["truncated"] if cut else [])]  # fmt: skip
    rows = []
    for r in reports:
        s = r.summary
        levels = [str(s.level_counts.get(k, 0)) if k <= s.m else "" for k in range(1, m + 1)]
        missing = [str(s.judge_missing or 0)] if judged else []
        rate = None if s.hallucination_rate is None else 100 * s.hallucination_rate
        truncated = [truncations(s)] if cut else []
        rows.append([r.cell.dataset_label, s.model, r.cell.mode_label, *levels,
                     str(s.unresolved), str(s.errors), *missing, number(rate, 1),
                     *truncated])  # fmt: skip
    return pipe_table(header, rows)
