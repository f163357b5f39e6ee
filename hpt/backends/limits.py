"""Per-backend limits: adaptive concurrency, requests and tokens per minute, server pauses."""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass

from asyncio_throttle.throttler import Throttler
from pydantic import BaseModel, ConfigDict, Field


class RateLimitFields(BaseModel):
    """The caps a model's config, a run and ``BackendLimits`` all set, declared once.

    None: no cap of our own (a TGI server's /info value is used where there is one).
    """

    max_concurrency: int | None = Field(None, ge=1)
    requests_per_minute: int | None = Field(None, ge=1)
    tokens_per_minute: int | None = Field(None, ge=1)


class BackendLimits(RateLimitFields):
    """What one logical model may be asked for at once and per minute."""

    model_config = ConfigDict(extra="forbid")

    # On 429/overload the cap halves (never below this) and then grows back by one for
    # each window of successful calls.
    min_concurrency: int = Field(1, ge=1)
    adaptive: bool = True


@dataclass
class BackendStats:
    """Live counters for one backend, read by the progress display."""

    calls: int = 0  # requests sent over the network
    cache_hits: int = 0
    shared: int = 0  # answered by an identical request already in flight
    retries: int = 0
    rate_limited: int = 0  # 429 / overloaded answers
    rate_limit_wait_s: float = 0.0  # time spent held back by Retry-After and limits
    errors: int = 0  # calls that failed for good
    in_flight: int = 0
    concurrency: int | None = None  # the current cap, if any
    # Batch mode (hpt.backends.batching): requests queued for the next batch (and the batches
    # they will make), batches submitted and not yet collected, batches collected or failed
    # (those of earlier processes of the run included), each with its requests.
    batches_waiting: int = 0
    batch_requests_waiting: int = 0
    batches_in_progress: int = 0
    batch_requests_in_progress: int = 0
    batches_done: int = 0
    batch_requests_done: int = 0

    @property
    def batching(self) -> bool:
        """Whether any batch exists (or is forming)."""
        return bool(self.batch_requests_waiting or self.batches_in_progress or self.batches_done)


class AdaptiveConcurrency:
    """A semaphore whose size shrinks under overload and grows back (AIMD).

    Calls are judged in windows of about ``limit`` outcomes. Overload answers reaching
    ``OVERLOAD_SHARE`` of a window (and at least two) halve the cap, at most once per
    ``cooldown_s``; a window without any adds one. A lone 429 among many successes is noise
    and only costs its own retry (and the server's Retry-After, which the limiter honours).
    """

    OVERLOAD_SHARE = 0.1

    def __init__(self, limit: int, minimum: int = 1, cooldown_s: float = 1.0) -> None:
        self.max_limit = limit
        self.minimum = min(minimum, limit)
        self.limit = limit
        self.in_flight = 0
        self.cooldown_s = cooldown_s
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._window = 0
        self._overloads = 0
        self._last_cut = -cooldown_s

    async def acquire(self) -> None:
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # granted just as we were cancelled: hand it on
            raise

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            fut = self._waiters.popleft()
            if not fut.done():
                self.in_flight += 1
                fut.set_result(None)

    def _close_window(self) -> None:
        self._window = 0
        self._overloads = 0

    def on_success(self) -> None:
        self._window += 1
        if self._window < self.limit:
            return
        if self._overloads == 0 and self.limit < self.max_limit:
            self.limit += 1
            self._wake()
        self._close_window()

    def on_overload(self) -> None:
        self._window += 1
        self._overloads += 1
        threshold = max(2, math.ceil(self.OVERLOAD_SHARE * self.limit))
        now = time.monotonic()
        if self._overloads >= threshold and now - self._last_cut >= self.cooldown_s:
            self._last_cut = now
            self.limit = max(self.minimum, min(self.limit, max(self.in_flight, 1)) // 2)
            self._close_window()
        elif self._window >= self.limit:
            self._close_window()


class TokenBucket:
    """Tokens per minute. Takes an estimate up front and settles the real count afterwards.

    The level may go negative when a call used more than estimated; later calls then wait.
    """

    def __init__(self, per_minute: int) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = now

    async def take(self, tokens: int) -> float:
        """Wait until ``tokens`` fit; return the seconds waited."""
        want = min(float(tokens), self.capacity)
        waited = 0.0
        async with self._lock:  # first come, first served
            self._refill()
            while self.level < want:
                delay = (want - self.level) / self.rate
                await asyncio.sleep(delay)
                waited += delay
                self._refill()
            self.level -= want
        return waited

    def settle(self, estimated: int, actual: int) -> None:
        self._refill()
        self.level -= float(actual) - min(float(estimated), self.capacity)


class Limiter:
    """Everything that holds a call back before it is sent, for one backend."""

    def __init__(self, limits: BackendLimits, stats: BackendStats, default_cap: int | None = None):
        cap = limits.max_concurrency or default_cap
        self.limits = limits
        self.stats = stats
        self.concurrency = AdaptiveConcurrency(cap, limits.min_concurrency) if cap else None
        # No cap configured: still adapt, starting from what is in flight when the first
        # overload arrives.
        self._open_cap = AdaptiveConcurrency(1 << 20, limits.min_concurrency) if not cap else None
        self._rpm = (
            Throttler(rate_limit=limits.requests_per_minute, period=60.0, retry_interval=0.05)
            if limits.requests_per_minute
            else None
        )
        self._tpm = TokenBucket(limits.tokens_per_minute) if limits.tokens_per_minute else None
        self._paused_until = 0.0
        stats.concurrency = self.concurrency.limit if self.concurrency else None

    def cap(self, limit: int) -> None:
        """Hold this backend to ``limit`` calls in flight at most (before its first call)."""
        if self.concurrency is None or self.concurrency.max_limit > limit:
            self.concurrency = AdaptiveConcurrency(limit, self.limits.min_concurrency)
            self._open_cap = None
            self.stats.concurrency = self.concurrency.limit

    @property
    def _sem(self) -> AdaptiveConcurrency:
        sem = self.concurrency or self._open_cap
        assert sem is not None
        return sem

    def pause(self, seconds: float) -> None:
        """Hold every new call for ``seconds`` (a server's Retry-After)."""
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    async def acquire(self, estimated_tokens: int) -> None:
        started = time.monotonic()
        await self._sem.acquire()
        try:
            # The deadline can move later while we sleep (another 429), so look again.
            while (delay := self._paused_until - time.monotonic()) > 0:  # noqa: ASYNC110
                await asyncio.sleep(delay)
            if self._rpm is not None:
                await self._rpm.acquire()  # type: ignore[no-untyped-call]
            if self._tpm is not None:
                await self._tpm.take(estimated_tokens)
        except BaseException:
            self._sem.release()
            raise
        waited = time.monotonic() - started
        if waited > 0.001:
            self.stats.rate_limit_wait_s += waited
        self.stats.in_flight = self._sem.in_flight

    def release(self, estimated_tokens: int, actual_tokens: int | None, ok: bool) -> None:
        self._sem.release()
        if self._tpm is not None and actual_tokens is not None:
            self._tpm.settle(estimated_tokens, actual_tokens)
        if ok and self.limits.adaptive:
            self._sem.on_success()
        self._publish()

    def on_overload(self) -> None:
        if not self.limits.adaptive:
            return
        sem = self._sem
        if sem is self._open_cap and sem.limit == sem.max_limit:
            sem.limit = max(sem.in_flight, 1)
            sem.max_limit = sem.limit  # grow back to where we were, no further
        sem.on_overload()
        self._publish()

    def _publish(self) -> None:
        sem = self._sem
        self.stats.in_flight = sem.in_flight
        self.stats.concurrency = None if sem.limit >= 1 << 20 else sem.limit
