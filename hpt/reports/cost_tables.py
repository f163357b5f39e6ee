"""The report's tables of calls, tokens and cost (Markdown): per cell, per level, and the
prices they were costed at. Columns for provider caches, batches, costs and savings appear
only where some cell has them, so a report of a run without them reads as before."""

from __future__ import annotations

from hpt.reports.cells import CellReport
from hpt.reports.markdown import number, pipe_table
from hpt.reports.spending import SELECTOR, LevelCost
from hpt.results.costs import ModelPrice

COST_NOTE = (
    "Cost: USD of the calls sent, each token class at its price (fresh input, provider cache "
    "reads and writes, output with its reasoning tokens), calls answered through a provider's "
    "Batch API at batch prices. *Saved*: what the calls hpt's response cache answered (no model "
    "call made) would have cost. *USD / resolved*: the cost over the samples resolved. "
    "*Cached input*: the share of input tokens the provider read from its prompt cache."
)
# Said where some cell's calls were answered by an identical call in flight.
SHARED_NOTE = (
    "Threshold cells ask each identical call once: a call one request answered for several "
    "cells is in each cell's cost (not saved), and counted once in the total."
)


def cost_note(reports: list[CellReport]) -> str:
    """What the cost table's figures are; shared calls are explained where some cell has them."""
    shared = any(r.shared_usd for r in reports)
    return f"{COST_NOTE} {SHARED_NOTE}" if shared else COST_NOTE


def costed(reports: list[CellReport]) -> bool:
    """Whether the report shows costs: some called model has a per-token price (a report
    with none, or with only self-hosted models, reads as one without prices)."""
    return any(r.prices or r.unpriced for r in reports)


def _usd(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _share(share: float | None) -> str:
    return number(None if share is None else 100 * share, 1)


def table_usage(reports: list[CellReport]) -> str:
    """Calls, tokens and, with prices, cost per cell (per resolved sample, and saved)."""
    priced = costed(reports)
    saved = priced and any(r.saved_usd for r in reports)
    # Reasoning models: of the completion tokens, those spent thinking, where counted.
    reasoning = any(r.summary.reasoning_tokens is not None for r in reports)
    cached = any(r.summary.cache_read_tokens is not None for r in reports)
    batched = any(r.summary.batched_calls for r in reports)
    header = ["dataset", "model", "mode", "samples", "calls (not sent)",
              *(["batched"] if batched else []), "prompt tokens",
              *(["cached input %"] if cached else []), "completion tokens",
              *(["reasoning tokens"] if reasoning else []),
              *(["cost USD", "USD / resolved"] if priced else []),
              *(["saved USD"] if saved else [])]  # fmt: skip
    rows = []
    for r in reports:
        s = r.summary
        row = [r.cell.dataset_label, s.model, r.cell.mode_label, str(s.samples),
               f"{s.calls} ({s.cached_calls})"]  # fmt: skip
        row += [str(s.batched_calls)] if batched else []
        row.append(str(s.prompt_tokens))
        row += [_share(s.cached_input_share)] if cached else []
        row.append(str(s.completion_tokens))
        if reasoning:
            row.append("-" if s.reasoning_tokens is None else str(s.reasoning_tokens))
        if priced:
            # A resolved sample may cost a small fraction of a cent.
            row += [_usd(r.cost_usd), _usd(r.cost_per_resolved, 6)]
        row += [_usd(r.saved_usd)] if saved else []
        rows.append(row)
    if priced:
        # Each call once: a call shared by cells is in each one's cost.
        once = sum((r.cost_usd or 0.0) - (r.shared_usd or 0.0) for r in reports)
        total = [f"{once:.4f}", ""]
        total += [f"{sum(r.saved_usd or 0.0 for r in reports):.4f}"] if saved else []
        rows.append(["**total**"] + [""] * (len(header) - 1 - len(total)) + total)
    return pipe_table(header, rows)


def _level_name(level: LevelCost, report: CellReport) -> tuple[str, str]:
    """A level's row label and its strategy (the selector has none)."""
    if level.where == SELECTOR:
        return SELECTOR, ""
    k = int(level.where)
    ladder = report.summary.strategies or list(report.ladder)
    return f"L{k}", ladder[k - 1] if k <= len(ladder) else ""


def table_level_costs(reports: list[CellReport]) -> str | None:
    """Calls, tokens, cached input and cost per level of each cell (adaptive HPF's selector
    turns apart); None where nothing was priced and no provider reported cache reads."""
    levels = [lv for r in reports for lv in r.levels]
    priced = costed(reports)
    cached = any(lv.cache_read_tokens is not None for lv in levels)
    if not priced and not cached:
        return None
    saved = priced and any(lv.saved_usd for lv in levels)
    batched = any(lv.batched_calls for lv in levels)
    header = ["dataset", "model", "mode", "level", "strategy", "calls (not sent)",
              *(["batched"] if batched else []), "prompt tokens",
              *(["cached input %"] if cached else []), "completion tokens",
              *(["cost USD"] if priced else []), *(["saved USD"] if saved else [])]  # fmt: skip
    rows = []
    for r in reports:
        for lv in r.levels:
            row = [r.cell.dataset_label, r.summary.model, r.cell.mode_label,
                   *_level_name(lv, r), f"{lv.calls} ({lv.cached_calls})"]  # fmt: skip
            row += [str(lv.batched_calls)] if batched else []
            row.append(str(lv.prompt_tokens))
            row += [_share(lv.cached_input_share)] if cached else []
            row.append(str(lv.completion_tokens))
            row += [_usd(lv.cost_usd)] if priced else []
            row += [_usd(lv.saved_usd)] if saved else []
            rows.append(row)
    return pipe_table(header, rows)


def describe(price: ModelPrice) -> str:
    """A model's prices as the report lists them: "input 2.5, output 10, cache read 1.25"."""
    named = (("input", price.input), ("output", price.output),
             ("cache read", price.cache_read), ("cache write", price.cache_write),
             ("batch input", price.batch_input), ("batch output", price.batch_output),
             ("batch cache read", price.batch_cache_read),
             ("batch cache write", price.batch_cache_write))  # fmt: skip
    return ", ".join(f"{name} {value:g}" for name, value in named if value is not None)


def price_notes(reports: list[CellReport]) -> list[str]:
    """The prices the report costed calls at, with their sources, and the called models
    without a price (why, and how to give one)."""
    # A label priced differently by two runs' recorded prices is listed with each.
    notes = {
        f"`{label}`: {describe(price)} USD per million tokens ({price.source})": None
        for r in reports
        for label, price in r.prices.items()
    }
    for r in reports:
        notes.update({f"No cost for cells calling `{label}`: {why}": None
                      for label, why in r.unpriced.items()})  # fmt: skip
    return list(notes)
