"""What the trace viewer knows of a run while it reads the records: the cells, one compact
index row per sample for the table, and each cell's running ``Tally`` -- the same tally
``summary.json`` and ``hpt report`` are made of, so the summary the page opens on is hpt's
own numbers, never recomputed in the browser. The static page and the live server both fill
one ``ViewIndex`` record by record.

An index row is ``[row, cell, sample_id, draw, resolved_level, error?, hpi_score, calls,
tokens]``; a DepthQA record's row adds ``judge_score, depth`` (and its node id when that is
not its sample id), so that a node's neighbours in the question graph are coloured by their
scores without decoding their records."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from hpt.results.reader import RunInfo, read_run_info
from hpt.results.records import Cell, DepthRecord, SampleRecord
from hpt.results.rundir import RunDirError
from hpt.results.tally import Tally

# The summary figures the page shows per cell, as Summary names them.
SUMMARY_FIELDS = {
    "samples", "n", "m", "hpi", "chance_hpi", "hpi_skill", "accuracy", "level1_accuracy",
    "level_counts", "unresolved", "errors", "judge_missing", "calls", "prompt_tokens",
    "completion_tokens",
}  # fmt: skip


class CellCost(Protocol):
    """A cell's running cost: what the CLI gives the viewer (pricing is the reports room's,
    which the viewer does not import), the same figure ``hpt report`` gives the cell."""

    def add(self, record: SampleRecord) -> None: ...

    def usd(self) -> float | None:
        """The cell's cost so far; None where a called model has no price."""
        ...


# A new cell's cost meter, given the run directory it is read from.
CostMeter = Callable[[Path], CellCost]


class ViewIndex:
    """Cells, index rows and tallies of the records added so far. Each (sample, draw) of a
    cell counts once, the first seen (as ``read_records`` keeps it); a cell found in two run
    directories is refused, as reports refuse it."""

    def __init__(self, cost: CostMeter | None = None) -> None:
        self._cost = cost
        self.costs: list[CellCost | None] = []
        self.cells: dict[Cell, int] = {}
        self.cell_info: list[dict[str, Any]] = []
        self.rows: list[list[Any]] = []
        self.tallies: list[Tally] = []
        self._source: list[Path] = []
        self._seen: list[set[tuple[str, int]]] = []
        self._infos: dict[Path, RunInfo] = {}

    def add(self, record: SampleRecord, directory: Path) -> list[Any] | None:
        """The record's new index row; None for a (sample, draw) its cell already holds."""
        cell = record.cell
        k = self.cells.get(cell)
        if k is None:
            info = self._infos.get(directory)
            if info is None:
                info = self._infos[directory] = read_run_info(directory)
            k = self.cells[cell] = len(self.cell_info)
            # The labels as hpt spells them everywhere (Cell), not rebuilt in the page.
            self.cell_info.append(
                {"model": cell.model, "mode": cell.mode, "variant": cell.variant, "m": record.m,
                 "dataset_label": cell.dataset_label, "mode_label": cell.mode_label,
                 "title": cell.title, "reasoning": cell.reasoning_label or None}
            )  # fmt: skip
            self.tallies.append(Tally.of(record, info.task(record.dataset)))
            self.costs.append(self._cost(directory) if self._cost is not None else None)
            self._source.append(directory)
            self._seen.append(set())
        elif self._source[k] != directory:
            raise RunDirError(
                f"{cell.title} is in both {self._source[k]} and {directory}; view them separately"
            )
        key = (record.sample_id, record.draw)
        if key in self._seen[k]:
            return None
        self._seen[k].add(key)
        self.tallies[k].add(record)
        cost = self.costs[k]
        if cost is not None:
            cost.add(record)
        row = _row(len(self.rows), k, record)
        self.rows.append(row)
        return row

    def summary(self) -> list[dict[str, Any]]:
        """Each cell's figures from its tally, in the order the cells were met."""
        out = []
        for info, tally, cost in zip(self.cell_info, self.tallies, self.costs, strict=True):
            figures = tally.summary().model_dump(mode="json", include=SUMMARY_FIELDS)
            usd = cost.usd() if cost is not None else None
            out.append({"title": info["title"], **figures, "cost_usd": usd})
        return out

    def settings(self) -> list[str]:
        return settings(self.cells)


def settings(cells: Iterable[Cell]) -> list[str]:
    """The reasoning settings the cells asked ("effort high", ...), each once, from least to
    most."""
    ordered = sorted(cells, key=Cell.reasoning_rank)
    return [label for label in dict.fromkeys(c.reasoning_label for c in ordered) if label]


def _row(n: int, cell: int, record: SampleRecord) -> list[Any]:
    row: list[Any] = [n, cell, record.sample_id, record.draw, record.resolved_level,
                      int(record.error is not None), record.hpi_score, record.calls,
                      record.prompt_tokens + record.completion_tokens]  # fmt: skip
    if isinstance(record, DepthRecord):
        row += [record.judge_score, record.depth]
        if record.node_id != record.sample_id:
            row.append(record.node_id)
    return row
