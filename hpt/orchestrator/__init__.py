"""Runs: specs, concurrency, progress, the run store, metrics and the CLI."""

from hpt.orchestrator.api import evaluate, resume
from hpt.orchestrator.metrics import Summary, Tally, hpi_score, summarize, summarize_cells
from hpt.orchestrator.records import Cell, SampleRecord
from hpt.orchestrator.runner import (
    RunObserver,
    RunResult,
    RunSummary,
    SilentObserver,
    run_evaluation,
)
from hpt.orchestrator.spec import RunSpec
from hpt.orchestrator.store import read_records

__all__ = [
    "Cell",
    "RunObserver",
    "RunResult",
    "RunSpec",
    "RunSummary",
    "SampleRecord",
    "SilentObserver",
    "Summary",
    "Tally",
    "evaluate",
    "hpi_score",
    "read_records",
    "resume",
    "run_evaluation",
    "summarize",
    "summarize_cells",
]
