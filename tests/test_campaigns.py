"""Campaigns (dataset x model x mode matrices), the Python API inside a running event loop,
durable run directories: resume after a kill at any point, Ctrl-C, errored samples."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import hpt
from hpt.orchestrator import SilentObserver
from hpt.results.reader import read_records
from tests.backend_helpers import FAST_RETRY, serving
from tests.conftest import interruptible
from tests.servers.answer_key import KeyedResponder
from tests.servers.openai_compat import FakeOpenAI
from tests.test_cli import HPT
from tests.test_cli import hpt as run_hpt


def _two_models(base_url: str) -> dict[str, Any]:
    return {
        name: {"provider": "openai", "model": name, "endpoints": [base_url], "retry": FAST_RETRY}
        for name in ("alpha", "beta")
    }


def _keys(out: Path) -> list[tuple[Any, ...]]:
    return [r.key for r in read_records(out)]


async def test_matrix_runs_concurrently_inside_a_running_loop(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "zero_shot_cot"), model_ids=("alpha", "beta"))
    fake.delay_s = 0.01
    with serving(fake.app()) as srv:
        # A task of our own runs beside the evaluation: the API must not own the loop.
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        side = asyncio.create_task(ticker())

        seen: Counter[tuple[str, str, str, float | None]] = Counter()

        class Watcher(hpt.SilentObserver):  # as a script watches: by the tally's cell
            def recorded(self, record: Any, tally: Any) -> None:
                seen[tally.dataset, tally.model, tally.mode, tally.threshold] += 1
                assert (record.dataset, record.model) == (tally.cell.dataset, tally.cell.model)

        watcher = Watcher()
        result = await hpt.evaluate(
            datasets=["boolq", "csqa"], models=["alpha", "beta"], mode="standard",
            model_configs=_two_models(srv.base_url), limit=4, concurrency=3,
            strategies=["role", "zero_shot_cot", "three_shot_cot"],
            data_dir=data_dir, out=tmp_path / "campaign", observer=watcher,
        )  # fmt: skip
        assert seen == {(d, m, "standard", None): 4
                                for d in ("boolq", "csqa") for m in ("alpha", "beta")}  # fmt: skip
        side.cancel()
    assert ticks > 5 and result.complete
    cells = {(s.dataset, s.model, s.mode): s for s in result.summaries}
    assert set(cells) == {(d, m, "standard") for d in ("boolq", "csqa") for m in ("alpha", "beta")}
    for model in ("alpha", "beta"):
        boolq = cells["boolq", model, "standard"]
        assert (boolq.samples, boolq.hpi, boolq.level_counts[2]) == (4, 2.0, 4)
        assert cells["csqa", model, "standard"].samples == 4
    keys = _keys(tmp_path / "campaign")
    assert len(keys) == len(set(keys)) == 16
    # The cells run together, not one after another.
    first = {(k[0], k[1]) for k in keys[:6]}
    assert len(first) >= 2, first
    # Both models were asked, each under its own name.
    assert Counter(b["model"] for b in fake.requests).keys() == {"alpha", "beta"}
    saved = json.loads((tmp_path / "campaign" / "run.json").read_text())
    assert saved["dataset"] == ["boolq", "csqa"] and saved["model"] == ["alpha", "beta"]
    assert saved["hpt_version"] == hpt.__version__ and saved["python"]
    summary = json.loads((tmp_path / "campaign" / "summary.json").read_text())
    assert summary["complete"] is True and len(summary["cells"]) == 4


async def test_modes_and_thresholds_are_matrix_dimensions(
    monkeypatch: pytest.MonkeyPatch, data_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(lambda body: "Level 1")
    with serving(fake.app()) as srv:
        result = await hpt.evaluate(
            datasets=["samsum", "boolq"], models=["openai:test-model"],
            mode=["standard", "adaptive"], threshold=[0.15, 0.2], base_url=srv.base_url,
            limit=2, strategies=["role", "zero_shot_cot"], data_dir=data_dir,
            out=tmp_path / "m", retry=FAST_RETRY,
        )  # fmt: skip
    got = sorted((s.dataset, s.mode, s.threshold) for s in result.summaries)
    assert got == sorted(
        [("samsum", mode, t) for mode in ("standard", "adaptive") for t in (0.15, 0.2)]
        + [("boolq", mode, None) for mode in ("standard", "adaptive")]
    )
    assert all(s.samples == 2 for s in result.summaries)
    records = list(read_records(tmp_path / "m"))
    assert {r.threshold for r in records if r.dataset == "samsum"} == {0.15, 0.2}


def _slow_server(boolq_answers: dict[str, str]) -> FakeOpenAI:
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "three_shot_cot"), record_requests=False)
    fake.delay_s = 0.03
    return fake


def _run_cmd(base_url: str, data_dir: Path, out: Path, limit: int) -> list[str]:
    return [HPT, "run", "--dataset", "boolq", "--model", "openai:test-model", "--base-url",
            base_url, "--data-dir", str(data_dir), "--out", str(out), "--limit", str(limit),
            "--concurrency", "4", "--no-progress"]  # fmt: skip


def _env() -> dict[str, str]:
    env = {**os.environ, "OPENAI_API_KEY": "test-key"}
    env.pop("OPENAI_BASE_URL", None)
    return env


def _wait_for_records(out: Path, at_least: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    samples = out / "samples.jsonl"
    while time.monotonic() < deadline:
        if samples.exists() and samples.read_text().count("\n") >= at_least:
            return
        time.sleep(0.02)
    raise AssertionError(f"no {at_least} records in {out} after {timeout} s")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_resume_after_a_kill_at_a_random_point(
    seed: int, boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    n = 40
    out = tmp_path / "run"
    with serving(_slow_server(boolq_answers).app()) as srv:
        proc = subprocess.Popen(_run_cmd(srv.base_url, data_dir, out, n), env=_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            _wait_for_records(out, 1)
            time.sleep(random.Random(seed).uniform(0.0, 0.6))
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        before = _keys(out)
        assert 0 < len(before) < n and len(before) == len(set(before))
        if seed == 3:  # a write cut short by the kill: half a record, no newline
            with (out / "samples.jsonl").open("a") as fh:
                fh.write('{"sample_id": "torn", "dra')
        done = run_hpt("run", "--resume", str(out), "--no-progress")
    assert done.returncode == 0, done.stderr
    after = _keys(out)
    assert len(after) == len(set(after)) == n, "a sample was lost or repeated"
    assert after[: len(before)] == before, "finished records were rewritten or reordered"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["cells"][0]["samples"] == n and summary["cells"][0]["hpi"] == 3.0
    saved = json.loads((out / "run.json").read_text())
    assert len(saved["resumed_at"]) == 1 and saved["command"][:2] == ["hpt", "run"]


def test_ctrl_c_stops_cleanly_and_the_run_resumes(
    boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    n = 60
    out = tmp_path / "run"
    with serving(_slow_server(boolq_answers).app()) as srv:
        proc = subprocess.Popen(_run_cmd(srv.base_url, data_dir, out, n), env=_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=interruptible)  # fmt: skip
        _wait_for_records(out, 3)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 130, stderr
        assert f"hpt run --resume {out}" in stderr and "Traceback" not in stderr
        text = (out / "samples.jsonl").read_text()
        assert text.endswith("\n")
        kept = _keys(out)
        assert 3 <= len(kept) < n and len(kept) == len(set(kept))
        summary = json.loads((out / "summary.json").read_text())
        assert summary["complete"] is False and summary["cells"][0]["samples"] == len(kept)
        done = run_hpt("run", "--resume", str(out), "--no-progress")
    assert done.returncode == 0, done.stderr
    after = _keys(out)
    assert len(after) == len(set(after)) == n


async def test_cancelling_the_api_keeps_finished_work_and_resume_finishes(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    out = tmp_path / "api"
    two_recorded = asyncio.Event()

    class Watch(SilentObserver):
        def recorded(self, record: Any, tally: Any) -> None:
            if tally.samples >= 2:
                two_recorded.set()

    with serving(_slow_server(boolq_answers).app()) as srv:
        task = asyncio.create_task(hpt.evaluate(
            datasets="boolq", models="openai:test-model", base_url=srv.base_url, limit=30,
            concurrency=3, data_dir=data_dir, out=out, retry=FAST_RETRY, observer=Watch(),
        ))  # fmt: skip
        await asyncio.wait_for(two_recorded.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        partial = _keys(out)
        assert json.loads((out / "summary.json").read_text())["complete"] is False
        result = await hpt.resume(out)
    assert result.complete and result.summary.samples == 30
    keys = _keys(out)
    assert len(keys) == len(set(keys)) == 30 and keys[: len(partial)] == partial


async def test_resume_runs_errored_samples_again_unless_kept(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "role"), faults=[500] * 6)
    retry = {**FAST_RETRY, "max_attempts": 1}
    with serving(fake.app()) as srv:
        first = await hpt.evaluate(
            datasets="boolq", models="openai:test-model", base_url=srv.base_url, limit=8,
            concurrency=1, data_dir=data_dir, out=tmp_path / "e", retry=retry, cache=False,
        )  # fmt: skip
        errors = first.summary.errors
        assert errors >= 1
        kept = await hpt.resume(tmp_path / "e", retry_errors=False)
        assert kept.summary.errors == errors and fake.faults == []
        again = await hpt.resume(tmp_path / "e")
    assert again.summary.errors == 0 and again.summary.samples == 8
    assert again.summary.level_counts[1] == 8
    keys = _keys(tmp_path / "e")
    assert len(keys) == len(set(keys)) == 8


def test_resume_refuses_what_would_change_the_run(tmp_path: Path, data_dir: Path) -> None:
    missing = run_hpt("run", "--resume", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "is not a run directory" in missing.stderr
    out = tmp_path / "r"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"dataset": ["boolq"]}))
    changed = run_hpt("run", "--resume", str(out), "--dataset", "csqa", "--limit", "3")
    assert changed.returncode == 2
    assert "cannot take --dataset, --limit" in changed.stderr
    keep = run_hpt("run", "--dataset", "boolq", "--keep-errors")
    assert keep.returncode == 2 and "--keep-errors applies only with --resume" in keep.stderr


def test_an_existing_run_directory_points_to_resume(
    fake_openai: Any, data_dir: Path, tmp_path: Path
) -> None:
    _, server = fake_openai
    out = tmp_path / "run"
    args = ["run", "--dataset", "boolq", "--model", "openai:test-model", "--base-url",
            server.base_url, "--data-dir", str(data_dir), "--out", str(out), "--limit", "2"]  # fmt: skip
    assert run_hpt(*args).returncode == 0
    again = run_hpt(*args)
    assert again.returncode == 2 and f"hpt run --resume {out}" in again.stderr


async def test_a_cell_stopped_before_its_first_record_names_its_ladder(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    """summary.json names each cell's levels even when no record has come in yet."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "role"), record_requests=False)
    fake.delay_s = 1.0  # no reply comes before the cancel
    out = tmp_path / "api"
    climbing = asyncio.Event()

    class Watch(SilentObserver):
        def started(self, spec: Any, total: int, out: Path, done: int = 0) -> None:
            climbing.set()

    with serving(fake.app()) as srv:
        task = asyncio.create_task(hpt.evaluate(
            datasets="boolq", models="openai:test-model", base_url=srv.base_url, limit=2,
            strategies=["role", "zero_shot_cot"], data_dir=data_dir, out=out, retry=FAST_RETRY,
            observer=Watch(),
        ))  # fmt: skip
        await asyncio.wait_for(climbing.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(1.2)  # the server's handlers finish before it stops
    (cell,) = json.loads((out / "summary.json").read_text())["cells"]
    assert (cell["samples"], cell["strategies"]) == (0, ["role", "zero_shot_cot"])
