"""Rate-limit headers, adaptive concurrency, per-minute budgets and retries."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from hpt.backends.errors import TransientError
from hpt.backends.limits import (
    AdaptiveConcurrency,
    BackendLimits,
    BackendStats,
    Limiter,
    TokenBucket,
)
from hpt.backends.ratelimit_headers import MAX_HONOURED_WAIT_S, wait_from_headers
from hpt.backends.retry import GaveUp, RetryPolicy, call_with_retries

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": format_datetime(datetime.fromtimestamp(NOW + 7, UTC), usegmt=True)}, 7.0),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m30.5s"}, 90.5),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms",
          "x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "9s"}, 0.02),
        ({"anthropic-ratelimit-requests-remaining": "0",
          "anthropic-ratelimit-requests-reset": datetime.fromtimestamp(NOW + 4, UTC).isoformat()}, 4.0),
        ({"retry-after": "86400"}, MAX_HONOURED_WAIT_S),
        ({"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "1s"}, None),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)  # fmt: skip
def test_wait_from_headers(headers: dict[str, str], wait: float | None) -> None:
    got = wait_from_headers(headers, now=NOW)
    assert got == (pytest.approx(wait) if wait is not None else None)


async def test_adaptive_concurrency_halves_on_overload_and_grows_back() -> None:
    sem = AdaptiveConcurrency(16)
    for _ in range(16):
        await sem.acquire()
    sem.on_overload()  # one 429 among many calls is noise
    assert sem.limit == 16
    sem.on_overload()  # a second in the same window is overload: halve
    assert sem.limit == 8
    sem.on_overload()
    sem.on_overload()  # same burst, within the cooldown: counted once
    assert sem.limit == 8
    waiter = asyncio.create_task(sem.acquire())
    for _ in range(9):  # down to 7 in flight: still at the cap of 8 after the waiter joins
        sem.release()
    await asyncio.sleep(0)
    assert waiter.done() and sem.in_flight == 8
    for _ in range(8):
        sem.release()
    for _ in range(8):  # a window with overloads in it does not grow the cap
        sem.on_success()
    assert sem.limit == 8
    for _ in range(8):  # a clean window adds one
        sem.on_success()
    assert sem.limit == 9
    for _ in range(200):
        sem.on_success()
    assert sem.limit == 16  # never past the configured cap


def test_sporadic_overloads_do_not_collapse_the_cap() -> None:
    sem = AdaptiveConcurrency(128)
    sem.in_flight = 128
    for i in range(20 * 128):  # 5% of answers are 429s, spread evenly
        if i % 20 == 0:
            sem.on_overload()
        else:
            sem.on_success()
    assert sem.limit == 128


async def test_cancelled_waiter_does_not_leak_a_slot() -> None:
    sem = AdaptiveConcurrency(1)
    await sem.acquire()
    waiter = asyncio.create_task(sem.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    sem.release()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert sem.in_flight == 0
    await asyncio.wait_for(sem.acquire(), 1)


async def test_limiter_caps_concurrency_and_honours_a_pause() -> None:
    stats = BackendStats()
    limiter = Limiter(BackendLimits(max_concurrency=3), stats)
    peak = 0

    async def call() -> None:
        nonlocal peak
        await limiter.acquire(10)
        peak = max(peak, stats.in_flight)
        await asyncio.sleep(0.01)
        limiter.release(10, 20, ok=True)

    await asyncio.gather(*(call() for _ in range(12)))
    assert peak == 3
    limiter.pause(0.3)
    started = time.monotonic()
    await call()
    assert time.monotonic() - started >= 0.29 and stats.rate_limit_wait_s >= 0.29


async def test_uncapped_limiter_still_backs_off() -> None:
    stats = BackendStats()
    limiter = Limiter(BackendLimits(), stats)
    for _ in range(10):
        await limiter.acquire(1)
    limiter.on_overload()
    assert stats.concurrency == 10  # capped where it stood
    limiter.on_overload()
    assert stats.concurrency == 5
    for _ in range(10):
        limiter.release(1, 1, ok=True)


async def test_requests_per_minute() -> None:
    limiter = Limiter(BackendLimits(requests_per_minute=3), BackendStats())
    for _ in range(3):
        await limiter.acquire(1)
        limiter.release(1, 1, ok=True)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(limiter.acquire(1), 0.3)


async def test_token_bucket_settles_real_usage() -> None:
    bucket = TokenBucket(per_minute=600)  # 10 tokens/s
    await bucket.take(100)
    bucket.settle(estimated=100, actual=595)  # the call used far more than guessed: 5 left
    started = time.monotonic()
    await bucket.take(10)  # must wait for 5 more tokens
    assert time.monotonic() - started >= 0.45


async def test_retries_use_the_servers_wait_and_give_up_within_budget() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise TransientError("busy", retry_after_s=0.2)
        return "ok"

    seen: list[float] = []
    policy = RetryPolicy(initial_wait_s=0.001, max_wait_s=0.01)
    started = time.monotonic()
    assert await call_with_retries(flaky, policy, lambda e, w: seen.append(w)) == "ok"
    assert time.monotonic() - started >= 0.4 and seen == [0.2, 0.2]

    async def dead() -> str:
        raise TransientError("down")

    with pytest.raises(GaveUp) as err:
        await call_with_retries(dead, RetryPolicy(max_attempts=4, initial_wait_s=0.001))
    assert err.value.attempts == 4 and "down" in str(err.value)
