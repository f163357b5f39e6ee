"""One logical model served by several replicas: least-outstanding routing and health checks.

A replica whose connection fails leaves the rotation at once; a background task polls each
replica's ``/health`` and puts it back when it answers 200 (and takes out any that stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hpt.backends.base import Completion, GenerationParams, Message
from hpt.backends.errors import FatalBackendError, TransientError
from hpt.backends.managed import reported_notes, reported_params

log = logging.getLogger(__name__)


class Replica(Protocol):
    provider: str
    model: str
    endpoint: str

    @property
    def suggested_concurrency(self) -> int | None: ...

    async def start(self) -> None: ...

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion: ...

    async def healthy(self) -> bool: ...

    async def aclose(self) -> None: ...


@dataclass
class ReplicaState:
    replica: Replica
    outstanding: int = 0
    healthy: bool = True
    failures: int = 0
    served: int = 0


class ReplicaPool:
    """A ``Transport`` over replicas of the same model."""

    def __init__(self, replicas: Sequence[Replica], health_interval_s: float = 5.0) -> None:
        if not replicas:
            raise ValueError("a replica pool needs at least one endpoint")
        self.states = [ReplicaState(r) for r in replicas]
        self.provider = replicas[0].provider
        self.model = replicas[0].model
        self.endpoint = ",".join(sorted(r.endpoint for r in replicas))
        self._interval = health_interval_s
        self._turn = itertools.count()
        self._watcher: asyncio.Task[None] | None = None

    @property
    def suggested_concurrency(self) -> int | None:
        caps = [s.replica.suggested_concurrency for s in self.states]
        known = [c for c in caps if c]
        return sum(known) if known else None

    async def start(self) -> None:
        results = await asyncio.gather(
            *(s.replica.start() for s in self.states), return_exceptions=True
        )
        for state, result in zip(self.states, results, strict=True):
            if isinstance(result, BaseException):
                state.healthy = False
                log.warning("replica %s is down at start: %s", state.replica.endpoint, result)
        up = [s for s in self.states if s.healthy]
        if not up:
            first = next(r for r in results if isinstance(r, BaseException))
            raise FatalBackendError(f"no replica of the pool could be reached: {first}")
        models = {s.replica.model for s in up}
        if len(models) > 1:
            raise FatalBackendError(
                f"the replicas serve different models ({', '.join(sorted(models))}); "
                "a pool must serve one model"
            )
        self.model = up[0].replica.model
        self._watcher = asyncio.create_task(self._watch(), name="hpt-replica-health")

    def _pick(self) -> ReplicaState:
        up = [s for s in self.states if s.healthy]
        if not up:
            raise TransientError("every replica is out of rotation; waiting for one to recover")
        least = min(s.outstanding for s in up)
        tied = [s for s in up if s.outstanding == least]
        return tied[next(self._turn) % len(tied)]

    def sent_params(self, params: GenerationParams) -> dict[str, Any] | None:
        return reported_params(self.states[0].replica, params)

    def param_notes(self, params: GenerationParams) -> list[str]:
        return reported_notes(self.states[0].replica, params)

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion:
        state = self._pick()
        state.outstanding += 1
        try:
            completion = await state.replica.send(messages, params)
        except TransientError as exc:
            if exc.replica_down:
                self._mark_down(state, str(exc))
            raise
        finally:
            state.outstanding -= 1
        state.failures = 0
        state.served += 1
        return completion

    def _mark_down(self, state: ReplicaState, why: str) -> None:
        if state.healthy:
            log.warning("replica %s out of rotation: %s", state.replica.endpoint, why)
        state.healthy = False
        state.failures += 1

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            checks = await asyncio.gather(*(s.replica.healthy() for s in self.states))
            for state, ok in zip(self.states, checks, strict=True):
                if ok and not state.healthy:
                    if not await self._ready(state):
                        continue
                    log.warning("replica %s back in rotation", state.replica.endpoint)
                    state.healthy = True
                elif not ok and state.healthy:
                    self._mark_down(state, "/health failed")

    async def _ready(self, state: ReplicaState) -> bool:
        """A replica that was down at start still has to show it serves the pool's model."""
        if state.replica.model == self.model:
            return True
        try:
            await state.replica.start()
        except Exception as exc:
            log.warning("replica %s answers /health but not /info: %s", state.replica.endpoint, exc)
            return False
        if state.replica.model != self.model:
            log.warning(
                "replica %s serves %s, not %s; left out of the pool",
                state.replica.endpoint,
                state.replica.model,
                self.model,
            )
            return False
        return True

    async def aclose(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        await asyncio.gather(*(s.replica.aclose() for s in self.states))
