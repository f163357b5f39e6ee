"""Running evaluations: the run spec and config files, the campaign runner and its API."""

from hpt.runs.api import evaluate, resume
from hpt.runs.runner import (
    RunObserver,
    RunResult,
    RunSummary,
    SilentObserver,
    run_evaluation,
)
from hpt.runs.spec import RunSpec

__all__ = [
    "RunObserver",
    "RunResult",
    "RunSpec",
    "RunSummary",
    "SilentObserver",
    "evaluate",
    "resume",
    "run_evaluation",
]
