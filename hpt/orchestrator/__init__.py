"""Running evaluations: the run spec and config files, the campaign runner and its API."""

from hpt.orchestrator.api import evaluate, resume
from hpt.orchestrator.observer import RunObserver, SilentObserver
from hpt.orchestrator.runner import RunResult, run_evaluation
from hpt.orchestrator.spec import RunSpec
from hpt.results.runfile import RunSummary

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
