"""A run directory as every export reads it: the spec as saved, the cells' figures exactly as
``hpt report`` has them (``hpt.reports.cells.collect``), the records streamed one at a time,
and the report's tables and plots on request. Exports never recompute a number their own way."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from hpt.errors import validation_message
from hpt.reports.cells import CellReport, Describe, collect
from hpt.results.costs import PriceBook
from hpt.results.reader import RunInfo, read_records, read_run_info, require_run_dirs
from hpt.results.records import SampleRecord
from hpt.results.rundir import SPEC, SUMMARY, RunDirError
from hpt.results.runfile import RunSummary


class Exported(BaseModel):
    """What an export wrote: its format, the file or folder (or, pushed, where it went) and
    how many sample records it holds."""

    format: str
    path: Path
    samples: int
    # Where it was pushed (a Hub repo, a W&B project, a tracking URI); None: nothing left
    # the machine.
    target: str | None = None


@dataclass
class RunSource:
    """One run directory, read once for its figures; its records are streamed on demand."""

    directory: Path
    name: str  # the run directory's name
    spec: dict[str, Any]  # run.json as saved; {} when there is none
    info: RunInfo
    cells: list[CellReport]  # as hpt report has them, in Cell.order
    complete: bool  # summary.json's ``complete``; False when there is none
    describe: Describe | None = field(default=None, repr=False)

    def records(self) -> Iterator[SampleRecord]:
        """The records of samples.jsonl, one at a time, each (sample, draw) of a cell once
        (duplicates are noted on stderr, as every reader does)."""
        return iter(read_records(self.directory))

    def write_report(self, folder: Path) -> list[Path]:
        """``hpt report``'s tables and plots for this run, into ``folder``; the paths."""
        from hpt.reports import api  # matplotlib for the plots: only when asked

        return api.report([self.directory], out=folder, describe=self.describe).paths


def open_run(directory: Path, describe: Describe | None = None) -> RunSource:
    """Read a run directory's spec, summary and cells. ``describe`` names datasets a run
    saved by an older hpt does not describe (the CLI passes the installed tasks'). A
    directory without samples.jsonl, or without a record, is a RunDirError."""
    directory = Path(directory)
    require_run_dirs(directory)
    cells = collect([directory], PriceBook.load(), describe=describe)
    if not cells:
        raise RunDirError(f"no records in {directory}; nothing to export")
    return RunSource(
        directory=directory,
        name=directory.resolve().name,
        spec=_read_spec(directory),
        info=read_run_info(directory),
        cells=cells,
        complete=_read_complete(directory),
        describe=describe,
    )


def _read_spec(directory: Path) -> dict[str, Any]:
    path = directory / SPEC
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        # read_run_info has already read it; this only fails on a file changed since.
        raise RunDirError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: not a run description (a JSON object)")
    return data


def _read_complete(directory: Path) -> bool:
    path = directory / SUMMARY
    try:
        return RunSummary.model_validate_json(path.read_bytes()).complete
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise RunDirError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValidationError as exc:
        problem = validation_message(exc, whole="(file)")
        raise RunDirError(f"{path}: not a run summary ({problem})") from None


def cell_metrics(report: CellReport) -> dict[str, float]:
    """A cell's figures under the names every format uses (hpi, hpi_ci_low, hpi_ci_high,
    chance_hpi, accuracy, level1_accuracy, n, samples, errors, unresolved, calls, tokens,
    prompt_tokens, completion_tokens, cost_usd, text_score, depth_score_D), taken as they are
    from the CellReport; a figure the cell does not have is left out, never written as 0."""
    s = report.summary
    values: dict[str, float | int | None] = {
        "hpi": s.hpi,
        "hpi_ci_low": report.hpi_ci[0] if report.hpi_ci else None,
        "hpi_ci_high": report.hpi_ci[1] if report.hpi_ci else None,
        "chance_hpi": s.chance_hpi,
        "accuracy": s.accuracy,
        "level1_accuracy": s.level1_accuracy,
        "n": s.n,
        "samples": s.samples,
        "errors": s.errors,
        "unresolved": s.unresolved,
        "calls": s.calls,
        "tokens": s.prompt_tokens + s.completion_tokens,
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.completion_tokens,
        "cost_usd": report.cost_usd,
        "text_score": s.text_score,
    }
    for depth, score in sorted((s.depth_scores or {}).items()):
        values[f"depth_score_{depth}"] = score
    return {k: float(v) for k, v in values.items() if v is not None}
