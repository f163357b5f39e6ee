"""DSPy's LM calls through an hpt backend (hpt.structured.engine), against the
OpenAI-compatible test server on loopback: recorded, cached by hpt, counted per phase,
safe from DSPy's worker threads, and one cache entry per rollout_id."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from hpt.backends import GenerationParams, ResponseCache
from hpt.backends.managed import ManagedBackend
from hpt.results.records import Call
from hpt.structured.engine import (
    EVALUATION,
    OPTIMISATION,
    EngineBinding,
    Meter,
    backend_error_in,
    import_dspy,
    make_lm,
)
from tests.backend_helpers import backend
from tests.servers.openai_compat import FakeOpenAI, ServerThread

pytestmark = pytest.mark.dspy

REPLY = "[[ ## answer ## ]]\n42\n\n[[ ## completed ## ]]"


@pytest.fixture
def server() -> Iterator[tuple[FakeOpenAI, ServerThread]]:
    fake = FakeOpenAI(responder=lambda body: REPLY)
    thread = ServerThread(fake.app()).start()
    yield fake, thread
    thread.stop()


async def _open(
    srv: ServerThread, cache_path: Path, **extra: Any
) -> tuple[Any, ResponseCache, ManagedBackend]:
    cache = ResponseCache(cache_path)
    await cache.open()
    ctx = backend(cache, provider="openai", model="test-model", endpoints=[srv.base_url], **extra)
    b = await ctx.__aenter__()
    return ctx, cache, b


class Opened:
    def __init__(self, srv: ServerThread, path: Path, **extra: Any) -> None:
        self.srv, self.path, self.extra = srv, path, extra

    async def __aenter__(self) -> ManagedBackend:
        self.ctx, self.cache, b = await _open(self.srv, self.path, **self.extra)
        return b

    async def __aexit__(self, *exc: Any) -> None:
        await self.ctx.__aexit__(None, None, None)
        await self.cache.aclose()


def binding(b: ManagedBackend, phase: Any = EVALUATION, **extra: Any) -> EngineBinding:
    return EngineBinding(b, asyncio.get_running_loop(), GenerationParams(temperature=0.0),
                         "sample-1", phase, extra.pop("meter", Meter()), **extra)  # fmt: skip


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def test_predict_goes_through_hpt_recorded_cached_and_counted(server, tmp_path) -> None:
    fake, srv = server
    dspy = import_dspy()

    async def main() -> tuple[list[Call], Meter]:
        calls: list[Call] = []
        meter = Meter()
        async with Opened(srv, tmp_path / "c.sqlite3") as b:
            lm = make_lm(binding(b, calls=calls, meter=meter))
            program = dspy.Predict("question -> answer")
            with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
                first = await program.acall(question="What is 6 x 7?")
                again = await program.acall(question="What is 6 x 7?")
            assert first.answer == again.answer == "42"
        return calls, meter

    calls, meter = asyncio.run(main())
    assert fake.served == 1  # the second call was hpt's cache, not the server
    assert [c.cached for c in calls] == [False, True]
    assert calls[0].model == "openai:test" and calls[0].completion == REPLY
    assert "[[ ## question ## ]]" in calls[0].messages[-1].content
    assert calls[0].usage.prompt_tokens > 0 and calls[0].usage.completion_tokens > 0
    usage = meter.usage(EVALUATION)
    assert usage.calls == 2 and usage.cached_calls == 1
    assert usage.prompt_tokens == 2 * calls[0].usage.prompt_tokens
    assert meter.usage(OPTIMISATION).calls == 0
    # DSPy's own cache was off: the request reached hpt's temperature, not a DSPy default.
    assert fake.requests[0]["temperature"] == 0.0


def test_worker_threads_complete_while_the_loop_stays_responsive(server, tmp_path) -> None:
    fake, srv = server
    fake.delay_s = 0.05
    dspy = import_dspy()
    n = 16

    async def main() -> tuple[list[str], list[float]]:
        ticks: list[float] = []
        stop = asyncio.Event()

        async def heartbeat() -> None:
            while not stop.is_set():
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.01)

        async with Opened(srv, tmp_path / "c.sqlite3") as b:
            meter = Meter()
            lm = make_lm(binding(b, OPTIMISATION, meter=meter))
            program = dspy.Predict("question -> answer")

            def one(i: int) -> str:
                with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
                    return str(program(question=f"question {i}").answer)

            def many() -> list[str]:
                with ThreadPoolExecutor(max_workers=8) as pool:
                    return list(pool.map(one, range(n)))

            beat = asyncio.create_task(heartbeat())
            answers = await asyncio.to_thread(many)
            stop.set()
            await beat
            assert meter.usage(OPTIMISATION).calls == n
        return answers, ticks

    answers, ticks = asyncio.run(main())
    assert answers == ["42"] * n and fake.served == n
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) >= 5 and max(gaps) < 0.5  # the loop never blocked on DSPy's threads


def test_sync_call_on_the_loop_thread_refuses_instead_of_deadlocking(server, tmp_path) -> None:
    _, srv = server
    dspy = import_dspy()

    async def main() -> BaseException:
        async with Opened(srv, tmp_path / "c.sqlite3") as b:
            lm = make_lm(binding(b))
            with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
                try:
                    dspy.Predict("question -> answer")(question="q")
                except Exception as exc:
                    return exc
        raise AssertionError("the sync call on the loop thread did not refuse")

    exc = asyncio.run(asyncio.wait_for(main(), timeout=30))
    assert "event loop's own thread" in str(exc) and "asyncio.to_thread" in str(exc)


def test_rollout_ids_stay_distinct_and_repeat_from_the_cache(server, tmp_path) -> None:
    fake, srv = server
    dspy = import_dspy()

    async def main() -> list[Call]:
        calls: list[Call] = []
        async with Opened(srv, tmp_path / "c.sqlite3") as b:
            lm = make_lm(binding(b, OPTIMISATION, calls=calls))
            program = dspy.Predict("question -> answer")

            def propose() -> None:
                for rollout in (1, 2, 1):
                    rolled = lm.copy(rollout_id=rollout, temperature=1.0)
                    with dspy.context(lm=rolled, adapter=dspy.ChatAdapter()):
                        program(question="same prompt")

            await asyncio.to_thread(propose)
        return calls

    calls = asyncio.run(main())
    assert fake.served == 2  # rollouts 1 and 2 each reached the server; 1 again was cached
    assert [c.cached for c in calls] == [False, False, True]
    assert [c.purpose for c in calls] == ["dspy (rollout 1)", "dspy (rollout 2)",
                                          "dspy (rollout 1)"]  # fmt: skip
    first, second = fake.requests
    assert first["messages"] == second["messages"] and first["temperature"] == 1.0
    assert "rollout_id" not in first  # DSPy's execution control never reaches the wire


def test_backend_failures_surface_as_hpt_errors(server, tmp_path) -> None:
    fake, srv = server
    fake.faults = [500] * 50
    dspy = import_dspy()

    async def main() -> BaseException:
        retry = {"max_attempts": 2, "initial_wait_s": 0.01, "max_wait_s": 0.02,
                 "max_total_s": 5}  # fmt: skip
        async with Opened(srv, tmp_path / "c.sqlite3", retry=retry) as b:
            lm = make_lm(binding(b))
            with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
                try:
                    await dspy.Predict("question -> answer").acall(question="q")
                except Exception as exc:
                    return exc
        raise AssertionError("no error")

    exc = asyncio.run(main())
    assert backend_error_in(exc) is not None
