"""Workers start START_PACE_S apart (hpt/orchestrator/scheduling.py), so the first calls of a run do not
leave in one burst that would come back as one burst, wave after wave."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from aiohttp import web

from hpt.orchestrator import RunSpec, SilentObserver, run_evaluation, scheduling
from tests.servers.openai_compat import FakeOpenAI, ServerThread

ARRIVALS: list[float] = []


class Clocked(FakeOpenAI):
    """Notes when each chat request arrives, before the server's delay."""

    async def _chat(self, request: web.Request) -> web.Response:
        ARRIVALS.append(time.monotonic())  # the run's loop clock too, across threads
        return await super()._chat(request)


class Started(SilentObserver):
    at = 0.0

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        self.at = time.monotonic()


def test_workers_start_paced(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Wide enough that a run without pacing (all eight calls within a few milliseconds of
    # the start) cannot pass by accident; each answer takes longer than the whole ramp, so
    # the first eight calls are the eight workers' first.
    pace = 0.05
    monkeypatch.setattr(scheduling, "START_PACE_S", pace)
    ARRIVALS.clear()
    fake = Clocked(responder=lambda body: "The answer is True.", delay_s=8 * pace)
    server = ServerThread(fake.app()).start()
    observer = Started()
    try:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        spec = RunSpec(dataset="boolq", model="openai:test-model", base_url=server.base_url,
                       strategies=["role"], limit=8, concurrency=8, data_dir=data_dir,
                       out=tmp_path / "run", cache=False)  # fmt: skip
        result = asyncio.run(run_evaluation(spec, observer))
    finally:
        server.stop()
    assert result.summaries[0].samples == 8 and len(ARRIVALS) == 8
    # Worker k sleeps k * pace before its first call, so at most k calls can arrive before
    # then: the k-th earliest arrival is no sooner.
    for k, arrived in enumerate(sorted(ARRIVALS)):
        assert arrived - observer.at >= k * pace, (k, arrived - observer.at)
