"""What a run tells whoever watches it (the progress bar, a script)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from hpt.backends import BackendStats
from hpt.orchestrator.spec import RunSpec
from hpt.results.records import SampleRecord
from hpt.results.runfile import RunSummary
from hpt.results.tally import Tally


class RunObserver(Protocol):
    def watch(self, backends: Mapping[str, BackendStats]) -> None:
        """Live counters of each backend (retries, waits, concurrency), before the start."""
        ...

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        """``total`` samples in the run, ``done`` of them recorded before (a resumed run)."""
        ...

    def recorded(self, record: SampleRecord, tally: Tally) -> None: ...
    def finished(self, result: RunSummary) -> None: ...


class SilentObserver:
    """Observes nothing; subclass it to watch only part of a run."""

    def watch(self, backends: Mapping[str, BackendStats]) -> None:
        pass

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        pass

    def recorded(self, record: SampleRecord, tally: Tally) -> None:
        pass

    def finished(self, result: RunSummary) -> None:
        pass
