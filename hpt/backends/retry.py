"""Bounded retries with exponential backoff and jitter, plus per-backend call limits."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from asyncio_throttle.throttler import Throttler
from pydantic import BaseModel, Field
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

T = TypeVar("T")


class RetryPolicy(BaseModel):
    max_attempts: int = Field(6, ge=1)
    initial_wait_s: float = Field(0.5, ge=0.0)
    max_wait_s: float = Field(30.0, ge=0.0)
    # Total time budget for one call including waits, so a dead endpoint cannot stall a run.
    max_total_s: float = Field(300.0, gt=0.0)


async def call_with_retries(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    is_transient: Callable[[BaseException], bool],
) -> T:
    """Run ``fn``; retry only errors ``is_transient`` accepts; re-raise the last one."""
    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_attempts) | stop_after_delay(policy.max_total_s),
        wait=wait_random_exponential(multiplier=policy.initial_wait_s, max=policy.max_wait_s),
        retry=retry_if_exception(is_transient),
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            return await fn()
    raise AssertionError("unreachable: tenacity either returns or re-raises")


class CallLimiter:
    """Caps concurrent calls and, optionally, requests per minute for one backend."""

    def __init__(self, max_concurrency: int | None = None, requests_per_minute: int | None = None):
        self._sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
        self._throttle = (
            Throttler(rate_limit=requests_per_minute, period=60.0) if requests_per_minute else None
        )

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if self._sem is not None:
                await stack.enter_async_context(self._sem)
            if self._throttle is not None:
                await stack.enter_async_context(self._throttle)
            yield
