"""What the experiment trackers (W&B, MLflow) take from a run, the same for both: the spec as
parameters, the cells' figures as metrics named by their cell ("boolq/local/standard/hpi"),
the run's totals ("total/calls"), tags, and one row per cell and per sample for their tables.
Every number is hpt's own (``cell_metrics``, the CellReports, the records), never recomputed."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hpt import __version__
from hpt.exports.source import RunSource, cell_metrics
from hpt.results.records import Cell, SampleRecord

# run.json's dataset descriptions say how reports lay out tables, not how the run was made.
NOT_PARAMETERS = ("tasks",)
# Figures of the cells that add up over the run (a mean such as the HPI does not).
TOTALS = ("samples", "n", "errors", "unresolved", "calls", "tokens", "prompt_tokens",
          "completion_tokens")  # fmt: skip
TOTAL = "total"
SAMPLE_COLUMNS = ("sample_id", "draw", "cell", "dataset", "model", "mode", "resolved_level",
                  "hpi_score", "levels_tried", "calls", "prompt_tokens", "completion_tokens",
                  "target", "answer", "error")  # fmt: skip
# Both trackers take these characters in a metric name (MLflow's rule, on every platform;
# "/" only separates the parts of a name).
_UNSAFE = re.compile(r"[^\w.\- ]")


def _part(text: str) -> str:
    return _UNSAFE.sub("_", text) or "_"


def cell_key(cell: Cell) -> str:
    """A cell as a metric-name prefix: dataset[_threshold]/model/mode[/variant][/reasoning],
    e.g. "boolq/local/standard" or "iwslt_0.15/gpt-4o/adaptive"."""
    dataset = cell.dataset if cell.threshold is None else f"{cell.dataset}@{cell.threshold:g}"
    parts = [dataset, cell.model, cell.mode]
    parts += [p for p in (cell.variant, cell.reasoning_label) if p]
    return "/".join(_part(p) for p in parts)


def cell_keys(run: RunSource) -> dict[Cell, str]:
    """Every cell's key, each different (two labels that differ only in characters a name
    cannot hold get a number after the second)."""
    keys: dict[Cell, str] = {}
    taken: set[str] = set()
    for report in run.cells:
        key, n = cell_key(report.cell), 1
        while key in taken:
            n += 1
            key = f"{cell_key(report.cell)}_{n}"
        taken.add(key)
        keys[report.cell] = key
    return keys


def metrics(run: RunSource) -> dict[str, float]:
    """Each cell's figures as "<cell>/<name>", and the run's totals as "total/<name>" (the
    cost counts each call once: a call cells shared is in each one's cost, as in hpt report's
    total)."""
    keys = cell_keys(run)
    values: dict[str, float] = {}
    for report in run.cells:
        for name, value in cell_metrics(report).items():
            values[f"{keys[report.cell]}/{name}"] = value
    figures = [cell_metrics(r) for r in run.cells]
    for name in TOTALS:
        values[f"{TOTAL}/{name}"] = float(sum(f.get(name, 0.0) for f in figures))
    priced = [r for r in run.cells if r.cost_usd is not None]
    if priced:
        values[f"{TOTAL}/cost_usd"] = sum(
            (r.cost_usd or 0.0) - (r.shared_usd or 0.0) for r in priced
        )
    values[f"{TOTAL}/cells"] = float(len(run.cells))
    return values


def spec(run: RunSource) -> dict[str, Any]:
    """run.json without the dataset descriptions; a run saved without one is described by
    its cells, under run.json's own names."""
    if run.spec:
        return {k: v for k, v in run.spec.items() if k not in NOT_PARAMETERS}
    cells = [r.cell for r in run.cells]
    return {
        "dataset": list(dict.fromkeys(c.dataset for c in cells)),
        "model": list(dict.fromkeys(c.model for c in cells)),
        "mode": list(dict.fromkeys(c.mode for c in cells)),
        "strategies": run.info.strategies,
        "hpt_version": run.info.hpt_version,
    }


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def flat_params(data: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested settings as flat "a.b.c" -> text: a list of plain values joined by commas
    (datasets, models, strategies), the command as a shell line, a list holding objects as
    JSON; None and empty values left out (an unset option is not a parameter of the run)."""
    flat: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{_part(str(key))}"
        if value is None or value == [] or value == {}:
            continue
        if isinstance(value, dict):
            flat.update(flat_params(value, f"{name}."))
        elif (
            key == "command" and isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            flat[name] = shlex.join(value)  # as a shell would take it again
        elif isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
            flat[name] = ",".join(_text(v) for v in value)
        else:
            flat[name] = _text(value)
    return flat


def hpt_version(run: RunSource) -> str:
    """The hpt that made the run ("unknown" for a run.json without one)."""
    version = run.spec.get("hpt_version") or run.info.hpt_version
    return str(version) if version else "unknown"


def tags(run: RunSource) -> dict[str, str]:
    """What a tracker's tags say of the run: which hpt made it and exported it, and whether
    every sample was recorded."""
    return {
        "hpt.run": run.name,
        "hpt.version": hpt_version(run),
        "hpt.exported_by": __version__,
        "hpt.complete": "true" if run.complete else "false",
    }


def cell_rows(run: RunSource) -> tuple[list[str], list[list[Any]]]:
    """One row per cell: its key and labels, then every figure any cell has (None where a
    cell has not that one)."""
    keys = cell_keys(run)
    figures = [cell_metrics(r) for r in run.cells]
    names = list(dict.fromkeys(n for f in figures for n in f))
    columns = ["cell", "dataset", "model", "mode", *names]
    rows = [
        [keys[r.cell], r.cell.dataset_label, r.cell.model, r.cell.mode_label]
        + [f.get(n) for n in names]
        for r, f in zip(run.cells, figures, strict=True)
    ]
    return columns, rows


def _answer(record: SampleRecord) -> str | None:
    """The answer the climb ended on: the resolving attempt's, else the last one's."""
    for attempt in record.attempts:
        if attempt.resolved:
            return attempt.parsed
    return record.attempts[-1].parsed if record.attempts else None


def sample_rows(run: RunSource) -> Iterator[list[Any]]:
    """One row per record, in SAMPLE_COLUMNS' order, streamed."""
    keys = cell_keys(run)
    for r in run.records():
        cell = r.cell
        yield [r.sample_id, r.draw, keys.get(cell, cell_key(cell)), cell.dataset_label,
               r.model, cell.mode_label, r.resolved_level, r.hpi_score, len(r.attempts),
               r.calls, r.prompt_tokens, r.completion_tokens, r.target, _answer(r),
               r.error]  # fmt: skip


@contextmanager
def scoped_env(name: str, value: str | None) -> Iterator[None]:
    """``name`` set to ``value`` (None: left as it is) while an export runs, as it was
    afterwards: an export leaves the caller's environment unchanged."""
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
