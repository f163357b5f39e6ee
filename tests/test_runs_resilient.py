"""Whole runs against faulty servers, and the response cache across runs.

Every run must account for every sample exactly once: resolved, unresolved or error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpt.orchestrator import RunSpec, run_evaluation
from hpt.results.reader import read_records
from tests.backend_helpers import FAST_RETRY, serving
from tests.servers.answer_key import KeyedResponder
from tests.servers.anthropic_api import FakeAnthropic
from tests.servers.openai_compat import FakeOpenAI
from tests.servers.tgi import FakeTGI

N = 12


def _records(out: Path) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json") for r in read_records(out)]


def _accounted(out: Path, spec: RunSpec) -> list[dict[str, Any]]:
    recs = _records(out)
    ids = [r["sample_id"] for r in recs]
    assert len(ids) == len(set(ids)) == N, "a sample was lost or duplicated"
    summary = json.loads((out / "summary.json").read_text())["cells"][0]
    assert summary["samples"] == N
    assert sum(summary["level_counts"].values()) + summary["unresolved"] + summary["errors"] == N
    return recs


def _spec(tmp_path: Path, data_dir: Path, model: str, name: str, **extra: Any) -> RunSpec:
    return RunSpec.model_validate(
        {"dataset": "boolq", "model": model, "limit": N, "concurrency": 4, "data_dir": data_dir,
         "out": tmp_path / name, "retry": FAST_RETRY, **extra}
    )  # fmt: skip


@pytest.mark.parametrize(
    "faults",
    [
        ["429:0.2", "429:0.2", 500, 502, 503],
        ["drop", "drop", "malformed", 500, "malformed"],
        ["slow:3", "slow:3"],  # longer than the 1 s client timeout below
    ],
    ids=["rate-limits-and-5xx", "dropped-and-malformed", "timeouts"],
)
@pytest.mark.parametrize("client", ["sdk", "aiohttp"])
async def test_openai_run_survives_faults(
    faults: list[Any], client: str, monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str],
    data_dir: Path, tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "zero_shot_cot"), faults=list(faults))
    with serving(fake.app()) as srv:
        spec = _spec(tmp_path, data_dir, "fast", "run", models={
            "fast": {"provider": "openai", "model": "test-model", "endpoints": [srv.base_url],
                     "timeout_s": 1.0, "retry": FAST_RETRY, "client": client}})  # fmt: skip
        spec = spec.model_copy(update={"retry": None})
        await run_evaluation(spec)
    recs = _accounted(tmp_path / "run", spec)
    assert all(r["resolved_level"] == 2 and r["error"] is None for r in recs)
    assert fake.faults == []  # every fault was met and survived


async def test_persistent_failure_is_an_error_record_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "role"), faults=[500] * 1000)
    with serving(fake.app()) as srv:
        spec = _spec(tmp_path, data_dir, "openai:test-model", "run", base_url=srv.base_url,
                     retry={**FAST_RETRY, "max_attempts": 2})  # fmt: skip
        await run_evaluation(spec)
    recs = _accounted(tmp_path / "run", spec)
    assert all(r["error"] and "gave up after 2 attempts" in r["error"] for r in recs)


async def test_tgi_pool_run_with_overload_and_a_replica_dying(
    boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    responder = KeyedResponder(boolq_answers, "three_shot_cot")
    a = FakeTGI(responder=responder, delay_s=0.01)
    b = FakeTGI(responder=responder, delay_s=0.01)
    a.faults.extend([429, 424, 500])
    with serving(a.app()) as sa:
        sb = serving(b.app())
        srv_b = sb.__enter__()

        class KillB:
            seen = 0

            def __call__(self, body: dict[str, Any]) -> str:
                self.seen += 1
                if self.seen == 10:  # replica b dies while the run is under way
                    import threading

                    threading.Thread(target=sb.__exit__, args=(None, None, None)).start()
                return responder(body)

        b.responder = KillB()
        spec = _spec(tmp_path, data_dir, f"tgi:{sa.root_url},{srv_b.root_url}", "run")
        await run_evaluation(spec)
    recs = _accounted(tmp_path / "run", spec)
    assert all(r["resolved_level"] == 3 for r in recs), [r["error"] for r in recs]
    assert a.violations == [] and b.violations == []


async def test_anthropic_run(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")
    fake = FakeAnthropic(KeyedResponder(boolq_answers, "three_shot_cot"), faults=[429, 529])
    with serving(fake.app()) as srv:
        spec = _spec(tmp_path, data_dir, "anthropic:claude-test-1", "run", base_url=srv.root_url)
        await run_evaluation(spec)
    recs = _accounted(tmp_path / "run", spec)
    assert all(r["resolved_level"] == 3 for r in recs)
    assert "test-anthropic-key" not in (tmp_path / "run" / "run.json").read_text()


def _without_volatile(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in recs:
        r.pop("wall_s")
        for a in r["attempts"]:
            for c in a["calls"]:
                c.pop("cached")
    return sorted(recs, key=lambda r: r["sample_id"])


async def test_second_identical_run_is_served_from_the_cache(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "three_shot_cot"))
    with serving(fake.app()) as srv:
        first = _spec(tmp_path, data_dir, "openai:test-model", "first", base_url=srv.base_url)
        await run_evaluation(first)
        calls_first = len(fake.requests)
        assert calls_first == 3 * N
        await run_evaluation(first.model_copy(update={"out": tmp_path / "second"}))
        assert len(fake.requests) == calls_first  # zero model calls the second time
        recs2 = _records(tmp_path / "second")
        assert all(c["cached"] for r in recs2 for a in r["attempts"] for c in a["calls"])
        summary = json.loads((tmp_path / "second" / "summary.json").read_text())["cells"][0]
        assert summary["cached_calls"] == summary["calls"] == calls_first
        assert _without_volatile(_records(tmp_path / "first")) == _without_volatile(recs2)

        # A new epoch, a changed parameter, or --no-cache asks the model again.
        await run_evaluation(first.model_copy(update={"out": tmp_path / "e1", "epoch": 1}))
        assert len(fake.requests) == 2 * calls_first
        params = first.params.model_copy(update={"temperature": 0.5})
        await run_evaluation(first.model_copy(update={"out": tmp_path / "t", "params": params}))
        assert len(fake.requests) == 3 * calls_first
        await run_evaluation(first.model_copy(update={"out": tmp_path / "nc", "cache": False}))
        assert len(fake.requests) == 4 * calls_first


async def test_errors_are_not_cached(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "role"), faults=[500] * 2 * N)
    with serving(fake.app()) as srv:
        spec = _spec(tmp_path, data_dir, "openai:test-model", "bad", base_url=srv.base_url,
                     retry={**FAST_RETRY, "max_attempts": 2})  # fmt: skip
        await run_evaluation(spec)
        assert all(r["error"] for r in _records(tmp_path / "bad"))
        await run_evaluation(spec.model_copy(update={"out": tmp_path / "good"}))
    assert all(r["resolved_level"] == 1 for r in _records(tmp_path / "good"))
