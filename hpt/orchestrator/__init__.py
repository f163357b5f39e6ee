"""Runs: specs, concurrency, progress, the run store, metrics and the CLI."""

from hpt.orchestrator.metrics import Summary, Tally, hpi_score, summarize
from hpt.orchestrator.records import SampleRecord
from hpt.orchestrator.runner import RunObserver, RunResult, SilentObserver, run_evaluation
from hpt.orchestrator.spec import RunSpec
from hpt.orchestrator.store import read_records

__all__ = [
    "RunObserver",
    "RunResult",
    "RunSpec",
    "SampleRecord",
    "SilentObserver",
    "Summary",
    "Tally",
    "hpi_score",
    "read_records",
    "run_evaluation",
    "summarize",
]
