"""``cells.csv``: one row per cell, every figure of the report, for scripts."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from hpt.reports.cells import CellReport

# Columns added later go at the end: scripts may read the file by position.
CSV_COLUMNS = (
    "dataset", "threshold", "model", "mode", "samples", "scored", "errors", "hpi", "hpi_low",
    "hpi_high", "chance_hpi", "hpi_skill", "accuracy", "accuracy_low", "accuracy_high",
    "chance_accuracy", "level1_accuracy", "chance_level1_accuracy", "pass_at_1",
    "text_metric", "text_score", "unresolved", "level_counts", "calls", "cached_calls",
    "prompt_tokens", "completion_tokens", "cost_usd", "hallucination_rate", "source",
    "variant", "judge_missing", "reasoning_effort", "thinking_budget", "reasoning_tokens",
    "truncated", "attempts", "selector_truncated", "batched_calls", "cache_read_tokens",
    "cache_write_tokens", "cached_input_share", "cost_per_resolved_usd", "saved_usd",
)  # fmt: skip


def csv_rows(reports: list[CellReport]) -> Iterator[dict[str, object]]:
    for r in reports:
        s = r.summary
        yield {
            "dataset": s.dataset, "threshold": s.threshold, "model": s.model, "mode": s.mode,
            "variant": s.variant, "samples": s.samples, "scored": s.n, "errors": s.errors,
            "judge_missing": s.judge_missing, "hpi": s.hpi,
            "hpi_low": r.hpi_ci[0] if r.hpi_ci else None,
            "hpi_high": r.hpi_ci[1] if r.hpi_ci else None,
            "chance_hpi": s.chance_hpi, "hpi_skill": s.hpi_skill, "accuracy": s.accuracy,
            "accuracy_low": r.accuracy_ci[0] if r.accuracy_ci else None,
            "accuracy_high": r.accuracy_ci[1] if r.accuracy_ci else None,
            "chance_accuracy": s.chance_accuracy, "level1_accuracy": s.level1_accuracy,
            "chance_level1_accuracy": s.chance_level1_accuracy, "pass_at_1": r.pass_at_1,
            "text_metric": s.text_metric, "text_score": s.text_score, "unresolved": s.unresolved,
            "level_counts": " ".join(f"{k}:{v}" for k, v in s.level_counts.items()),
            "calls": s.calls, "cached_calls": s.cached_calls, "prompt_tokens": s.prompt_tokens,
            "completion_tokens": s.completion_tokens, "cost_usd": r.cost_usd,
            "hallucination_rate": s.hallucination_rate, "source": r.source,
            "reasoning_effort": s.reasoning_effort, "thinking_budget": s.thinking_budget,
            "reasoning_tokens": s.reasoning_tokens,
            # Attempts cut off at the token limit, per level as level_counts writes them.
            "truncated": " ".join(f"{k}:{v}" for k, v in sorted(s.truncated.items())),
            # What the truncations are a share of (with the selector's turns, adaptive HPF).
            "attempts": s.attempts, "selector_truncated": s.selector_truncated,
            # Provider caches and batches; cost_usd is what was sent, saved_usd the list price
            # of what hpt's response cache answered.
            "batched_calls": s.batched_calls, "cache_read_tokens": s.cache_read_tokens,
            "cache_write_tokens": s.cache_write_tokens,
            "cached_input_share": s.cached_input_share,
            "cost_per_resolved_usd": r.cost_per_resolved, "saved_usd": r.saved_usd,
        }  # fmt: skip


def write_csv(reports: list[CellReport], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in csv_rows(reports):
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
