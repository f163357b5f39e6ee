"""The run's provider batches on disk, so a run killed while batches are out can follow them
on ``--resume`` and never submits a request twice.

``RUN/batches.json`` (the journal) lists every batch the run submitted: its local id (hpt's
own name, known before the provider's id), the provider's id, the backend, the cache keys of
its requests (with what the budget needs to reserve them again), its state and counts. It is
rewritten whole on every change (a temporary file, fsync'ed, renamed over the old one), so a
crash leaves the previous version or the new one. ``RUN/batches/LOCAL_ID.jsonl`` holds a
collected batch's outcome per request (the completion, or why it failed), written before the
journal says the batch is collected.

One journal per run directory is shared by every backend of the process (``open_journal``):
two writers of one file would lose each other's entries."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ValidationError

from hpt.backends.batch_api import RequestFailed
from hpt.errors import HptError, StorageError, validation_message
from hpt.types import Completion

JOURNAL = "batches.json"
RESULTS = "batches"

SUBMITTING = "submitting"  # written before the submission: the provider's id is not known yet
SUBMITTED = "submitted"
COLLECTED = "collected"
FAILED = "failed"
# A batch in either is over: its requests are answered (or were never sent).
DONE_STATES = frozenset({COLLECTED, FAILED})


class JournalRequest(BaseModel):
    key: str  # the request's response-cache key, sent as its custom_id
    # What the budget reserves for it (hpt.backends.gate), again when a later process follows it.
    prompt_bound: int
    max_tokens: int
    attempt: int = 1  # the how-manieth batch this request is in


class JournalBatch(BaseModel):
    local_id: str
    id: str | None = None  # the provider's batch id; None while submitting
    provider: str
    backend: str  # the backend's label ("openai:gpt-4o")
    model: str
    endpoint: str
    # submitting / submitted / the provider's own word ("validating", "in_progress", ...) /
    # collected / failed
    state: str
    counts: dict[str, int] = {}
    error: str | None = None
    created: datetime
    ended: datetime | None = None
    requests: list[JournalRequest]

    @property
    def done(self) -> bool:
        return self.state in DONE_STATES


class _JournalFile(BaseModel):
    batches: list[JournalBatch]


class SavedResult(BaseModel):
    """One line of a collected batch's results file."""

    custom_id: str
    completion: Completion | None = None
    error: str | None = None
    transient: bool = False

    @classmethod
    def of(cls, custom_id: str, outcome: Completion | RequestFailed) -> SavedResult:
        if isinstance(outcome, Completion):
            return cls(custom_id=custom_id, completion=outcome)
        return cls(custom_id=custom_id, error=outcome.message, transient=outcome.transient)

    def outcome(self) -> Completion | RequestFailed:
        if self.completion is not None:
            return self.completion
        return RequestFailed(self.error or "no result", self.transient)


class BatchJournalError(HptError):
    """The journal (or a results file) cannot be read: the run cannot tell which of its
    requests are out in provider batches."""


def _write_whole(path: Path, data: bytes, what: str) -> None:
    """Whole or not at all, and on disk before it replaces the previous file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.unlink(missing_ok=True)  # a leftover, or a link: the new file is our own
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with open(fd, "wb") as fh:
            view = memoryview(data)
            while view:
                view = view[fh.write(view) :]
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise StorageError(what, path, exc) from None


def _unreadable(path: Path, why: str) -> BatchJournalError:
    return BatchJournalError(
        f"{path} {why}; it lists the provider batches this run submitted: restore it, or move "
        f"it away to ask their requests again (they may then be paid twice)"
    )


def _read_journal(path: Path) -> list[JournalBatch]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise _unreadable(path, f"cannot be read ({exc.strerror})") from None
    try:
        return _JournalFile.model_validate_json(data).batches
    except ValidationError as exc:
        raise _unreadable(path, f"is damaged ({validation_message(exc)})") from None


def _read_results(path: Path) -> dict[str, SavedResult]:
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return {}  # never collected, or removed: its requests are asked again
    except OSError as exc:
        raise _unreadable(path, f"cannot be read ({exc.strerror})") from None
    try:
        saved = [SavedResult.model_validate_json(line) for line in lines if line.strip()]
    except ValidationError as exc:
        raise _unreadable(path, f"is damaged ({validation_message(exc)})") from None
    return {s.custom_id: s for s in saved}


class BatchJournal:
    """The journal of one run directory; use ``open_journal``."""

    def __init__(self, directory: Path, batches: list[JournalBatch]) -> None:
        self.path = directory / JOURNAL
        self.results_dir = directory / RESULTS
        self.batches = {b.local_id: b for b in batches}
        # Each batch's JSON, re-made only when that batch changes: the file is rewritten on
        # every change, and a long run's journal holds many batches of many keys.
        self._blobs = {b.local_id: b.model_dump_json().encode() for b in batches}
        self._lock = asyncio.Lock()
        # Held by the thread writing the file: a save cancelled while its thread writes
        # leaves that thread running, and the next save's thread waits for it (both use the
        # same temporary file).
        self._writing = threading.Lock()
        self._version = 0  # changes made
        self._written = 0  # changes on disk
        self._claimed: set[str] = set()

    def claim(self, local_id: str) -> bool:
        """Whether the caller is the first to follow this batch (one backend per batch)."""
        if local_id in self._claimed:
            return False
        self._claimed.add(local_id)
        return True

    async def save(self, batch: JournalBatch) -> None:
        """Record ``batch`` as it is now; returns once the file says so. Writes that queue up
        behind one in progress are made as one."""
        self.batches[batch.local_id] = batch
        self._blobs[batch.local_id] = batch.model_dump_json().encode()
        self._version += 1
        mine = self._version
        async with self._lock:
            if self._written >= mine:
                return  # a later write already carried this change
            version = self._version
            data = b'{"batches": [\n' + b",\n".join(self._blobs.values()) + b"\n]}\n"
            await asyncio.to_thread(self._write, data, version)

    def _write(self, data: bytes, version: int) -> None:
        with self._writing:
            if version <= self._written:
                return  # a newer state is on disk already: never written over
            _write_whole(self.path, data, "the batch journal")
            self._written = version

    def results_path(self, local_id: str) -> Path:
        return self.results_dir / f"{local_id}.jsonl"

    async def write_results(self, local_id: str, results: list[SavedResult]) -> None:
        data = b"".join(r.model_dump_json().encode() + b"\n" for r in results)
        path = self.results_path(local_id)
        await asyncio.to_thread(_write_whole, path, data, "a batch's results")

    async def read_results(self, local_id: str) -> dict[str, SavedResult]:
        return await asyncio.to_thread(_read_results, self.results_path(local_id))


@dataclass
class _Shared:
    loading: asyncio.Future[BatchJournal]
    users: int = 0
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)


_SHARED: dict[Path, _Shared] = {}


def _where(directory: Path) -> Path:
    """One name per run directory, however it was written."""
    return directory.absolute()


async def open_journal(directory: Path) -> BatchJournal:
    """The journal of ``directory``, read once and shared by every backend of the process
    until each has called ``close_journal``."""
    path = _where(directory)
    shared = _SHARED.get(path)
    if shared is None or shared.loop is not asyncio.get_running_loop():
        loading = asyncio.ensure_future(
            asyncio.to_thread(lambda: BatchJournal(path, _read_journal(path / JOURNAL)))
        )
        shared = _SHARED[path] = _Shared(loading)
    shared.users += 1
    try:
        return await asyncio.shield(shared.loading)
    except BaseException:
        _release(path, shared)
        raise


def close_journal(journal: BatchJournal) -> None:
    path = journal.path.parent
    shared = _SHARED.get(path)
    if shared is not None:
        _release(path, shared)


def _release(path: Path, shared: _Shared) -> None:
    shared.users -= 1
    if shared.users <= 0 and _SHARED.get(path) is shared:
        del _SHARED[path]
