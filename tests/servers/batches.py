"""What the test servers' batch APIs share: timing, faults, the records tests inspect, and
the work of one batch as the service goes through it.

A batch's life is computed from its creation time and ``BatchTiming``, lazily: whenever an
API call touches a batch, the requests due by then are answered (in input order, one every
``in_progress_s / n`` seconds) and its state follows. So nothing runs in the background and
a client polling late sees the same timeline as one polling often.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

R = TypeVar("R")

# (custom_id, request body) -> an HTTP status the request fails with inside the batch
# (500: transient, 400: permanent), or None to answer it.
RequestError = Callable[[str, dict[str, Any]], int | None]


@dataclass(frozen=True)
class BatchTiming:
    """Seconds each phase lasts. Anthropic's batches have no phases but ``in_progress`` to
    show: there, validating and finalizing are spent inside it."""

    validating_s: float = 0.02
    in_progress_s: float = 0.05  # the requests are answered evenly across it
    finalizing_s: float = 0.02
    cancelling_s: float = 0.02
    # The completion window: what is not answered this long after creation expires.
    window_s: float = 24 * 3600.0


@dataclass(frozen=True)
class Expire:
    """A batch that answers ``answered`` requests, then expires when its processing would
    have ended (the rest: OpenAI's ``batch_expired`` errors, Anthropic's ``expired``)."""

    answered: int = 0


# "fail": the batch fails validation (OpenAI's status "failed"; Anthropic validates at
# create and has no such status).
BatchFault = Expire | Literal["fail"]


@dataclass
class BatchRecord:
    id: str
    custom_ids: list[str]
    fault: BatchFault | None = None
    # (status, unix time) as the service moved the batch, as of the last API call on it.
    transitions: list[tuple[str, float]] = field(default_factory=list)

    @property
    def statuses(self) -> list[str]:
        return [s for s, _ in self.transitions]


@dataclass
class BatchLedger:
    """What a server did with batches, for tests to check."""

    batches: dict[str, BatchRecord] = field(default_factory=dict)  # in creation order
    # custom_id -> how many batches it was submitted in (create calls that succeeded).
    submitted: Counter[str] = field(default_factory=Counter)
    create_calls: int = 0  # batch-create requests received, faulted and refused ones too
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, record: BatchRecord) -> None:
        with self._lock:
            self.batches[record.id] = record
            self.submitted.update(record.custom_ids)


@dataclass
class BatchFaults:
    """Faults a server injects into batches. Each list is consumed one entry per batch
    created (``batch``) or per create request (``create``: an int status or a faults.py
    fault, answered instead of creating the batch)."""

    batch: list[BatchFault] = field(default_factory=list)
    create: list[int | str] = field(default_factory=list)
    # Per-request failures inside batches; the ledger's ``submitted`` count of a custom_id
    # already includes the batch being answered (fail the first time: ``== 1``).
    request_error: RequestError | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_batch(self) -> BatchFault | None:
        with self._lock:
            return self.batch.pop(0) if self.batch else None

    def next_create(self) -> int | str | None:
        with self._lock:
            return self.create.pop(0) if self.create else None


class Work(Generic[R]):
    """One batch's requests as the service works through them: when each is answered, when
    the batch ends and how (completed, expired, cancelled)."""

    def __init__(
        self,
        items: list[tuple[str, dict[str, Any]]],
        timing: BatchTiming,
        fault: BatchFault | None,
        created: float,
        answer: Callable[[str, dict[str, Any]], R],
    ) -> None:
        self.items = items
        self.timing = timing
        self.created = created
        self.start = created + timing.validating_s
        self.processed_by = self.start + timing.in_progress_s  # when all would be answered
        self.cap = len(items)
        self.deadline = created + timing.window_s
        if isinstance(fault, Expire):
            self.cap = min(fault.answered, len(items))
            self.deadline = min(self.deadline, self.processed_by)
        self.failed = fault == "fail"
        self.cancel_at: float | None = None
        self._answer = answer
        self.results: dict[str, R] = {}  # custom_id -> result, in answering order

    @property
    def expires(self) -> bool:
        """Whether it runs out of time before answering everything."""
        return self.cancel_at is None and (
            self.deadline < self.processed_by or self.cap < len(self.items)
        )

    @property
    def ended_at(self) -> float:
        if self.cancel_at is not None:
            return self.cancel_at + self.timing.cancelling_s
        if self.expires:
            return self.deadline
        return self.processed_by + self.timing.finalizing_s

    def answered_by(self, t: float) -> int:
        """How many requests are answered at time ``t``: request i at start + (i+1)*d/n."""
        if self.failed:
            return 0
        t = min(t, self.deadline, self.cancel_at if self.cancel_at is not None else t)
        n = len(self.items)
        if t < self.start or n == 0:
            return 0
        span = self.timing.in_progress_s
        done = n if span <= 0 else min(n, math.floor((t - self.start) / span * n + 1e-9))
        return min(done, self.cap)

    def advance(self, now: float) -> None:
        """Answer the requests due by ``now``, in input order."""
        for custom_id, body in self.items[len(self.results) : self.answered_by(now)]:
            self.results[custom_id] = self._answer(custom_id, body)

    def cancel(self, now: float) -> None:
        self.advance(now)
        self.cancel_at = now

    @property
    def unanswered(self) -> list[str]:
        return [cid for cid, _ in self.items if cid not in self.results]
