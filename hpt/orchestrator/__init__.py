"""Running evaluations: the run spec and config files, the campaign runner and its API."""

from hpt.orchestrator.api import evaluate, resume
from hpt.orchestrator.runner import (
    RunObserver,
    RunResult,
    RunSummary,
    SilentObserver,
    run_evaluation,
)
from hpt.orchestrator.spec import RunSpec

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
