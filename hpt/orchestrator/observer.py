"""What a run tells whoever watches it (the progress bar, a script)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from hpt.backends import BackendStats
from hpt.orchestrator.spec import RunSpec
from hpt.results.records import Attempt, SampleRecord
from hpt.results.runfile import RunSummary
from hpt.results.tally import Tally

if TYPE_CHECKING:
    from hpt.orchestrator.budget import Spend


class RunObserver(Protocol):
    def watch(self, backends: Mapping[str, BackendStats]) -> None:
        """Live counters of each backend (retries, waits, concurrency), before the start."""
        ...

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        """``total`` samples in the run, ``done`` of them recorded before (a resumed run)."""
        ...

    def recorded(self, record: SampleRecord, tally: Tally) -> None: ...
    def finished(self, result: RunSummary) -> None: ...


@runtime_checkable
class SpendWatcher(Protocol):
    """An observer that also shows what a run with a budget spends (its own protocol: an
    observer written before budgets still observes)."""

    def watch_spend(self, spend: Spend, budget_usd: float | None, max_calls: int | None) -> None:
        """The run's live ledger (``spent_usd``, ``calls``, ``by_model``; updated as calls
        land) and its bounds, before the start; only for a run with a budget."""
        ...


@runtime_checkable
class AttemptWatcher(Protocol):
    """An observer that also hears each attempt as it finishes, before its sample's record
    exists: a slow climb (the embedded model, a long ladder) shows its levels going by (its
    own protocol: an observer written before still observes, and a run whose observer does
    not hear attempts sets no listener on its climbs)."""

    def attempted(self, tally: Tally, attempt: Attempt) -> None:
        """``attempt`` (one level of a ladder, or one selector turn's level in adaptive mode)
        finished in the cell of ``tally``; its sample may still climb on."""
        ...


@dataclass
class WorkerStats:
    """One worker of a run spread over several (``--ray``), live: where it runs, what it is
    doing and what it has sent back."""

    name: str
    node: str = ""
    # "starting", "running", "idle", "dead" (replaced), "stopped"
    state: str = "starting"
    samples: int = 0  # records it has sent back
    in_flight: int = 0  # samples handed to it and not yet back
    calls: int = 0  # model calls of the records it sent back
    restarts: int = 0  # times a worker in this place died and was replaced


@runtime_checkable
class WorkerWatcher(Protocol):
    """An observer that also shows each worker of a run spread over several (its own
    protocol: an observer written before workers still observes)."""

    def watch_workers(self, workers: Mapping[str, WorkerStats]) -> None:
        """The run's workers by name, live, before the start; only for a run with workers."""
        ...


class SilentObserver:
    """Observes nothing; subclass it to watch only part of a run."""

    # No ``attempted`` (AttemptWatcher): a run that hears no attempts sets no listener.

    def watch(self, backends: Mapping[str, BackendStats]) -> None:
        pass

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        pass

    def recorded(self, record: SampleRecord, tally: Tally) -> None:
        pass

    def finished(self, result: RunSummary) -> None:
        pass

    def watch_spend(self, spend: Spend, budget_usd: float | None, max_calls: int | None) -> None:
        pass

    def watch_workers(self, workers: Mapping[str, WorkerStats]) -> None:
        pass
