"""SIGTERM (kill, timeout, systemd, job schedulers) ends ``hpt run`` as Ctrl-C does: the
summary is written, the resume command printed, the exit status is 143, and the embedded
llama.cpp server, in a process group of its own, is stopped rather than left running."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from hpt.cli import signals
from hpt.results.reader import read_records
from tests.backend_helpers import serving
from tests.run_faults import env, run_cmd, start, wait_until
from tests.servers.answer_key import KeyedResponder
from tests.servers.openai_compat import FakeOpenAI
from tests.test_cli import HPT
from tests.test_cli import hpt as run_hpt
from tests.test_embedded import _refused, _servers_of, _this_tests_servers


def test_sigterm_cancels_the_work_and_its_clean_up_runs_whole() -> None:
    cleaned: list[str] = []

    async def work() -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(60)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # a second one must not cut the clean-up
            await asyncio.sleep(0.05)
            cleaned.append("done")

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(signals.Terminated):
        signals.run(work())
    assert cleaned == ["done"]
    assert signal.getsignal(signal.SIGTERM) == before


def _records_at_least(out: Path, n: int) -> bool:
    samples = out / "samples.jsonl"
    return samples.exists() and samples.read_text().count("\n") >= n


def test_sigterm_writes_the_summary_and_says_how_to_resume(
    boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "three_shot_cot"), record_requests=False)
    fake.delay_s = 0.03
    out, n = tmp_path / "run", 60
    with serving(fake.app()) as srv:
        proc = start(run_cmd(srv.base_url, data_dir, out, n))
        wait_until(lambda: _records_at_least(out, 3), "three records")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 143, stderr
        assert stderr.strip() == (
            f"hpt: stopped by SIGTERM; finished samples are kept in {out}. "
            f"Continue with: hpt run --resume {out}"
        )
        kept = [r.key for r in read_records(out)]
        summary = json.loads((out / "summary.json").read_text())
        assert summary["complete"] is False and summary["cells"][0]["samples"] == len(kept)
        assert 3 <= len(kept) < n and not (out / ".lock").exists()
        resumed = run_hpt("run", "--resume", str(out), "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    keys = [r.key for r in read_records(out)]
    assert len(keys) == len(set(keys)) == n and keys[: len(kept)] == kept


@pytest.mark.embedded
def test_sigterm_stops_the_embedded_model_server(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [HPT, "run", "--dataset", "boolq", "--limit", "20", "--max-tokens", "64",
           "--data-dir", str(data_dir), "--out", str(out), "--no-progress"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    servers: dict[int, int] = {}

    def climbing() -> bool:  # the server answers and the run has begun (run.json is written)
        servers.update(_servers_of(proc.pid))
        answers = any(not _refused(port) for port in servers.values())
        return answers and (out / "run.json").exists()

    try:
        wait_until(climbing, "the run to climb on the embedded model", timeout=300)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
        left = _this_tests_servers()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in _this_tests_servers():  # orphans of a failed check: not left running
            os.killpg(pid, signal.SIGKILL)
    assert proc.returncode == 143, stderr
    assert f"Continue with: hpt run --resume {out}" in stderr and "Traceback" not in stderr
    assert json.loads((out / "summary.json").read_text())["complete"] is False
    assert left == set(), "the embedded server outlived hpt"
    assert all(_refused(port) for port in servers.values())


def test_sigterm_ends_other_long_commands_the_same_way(data_dir: Path, tmp_path: Path) -> None:
    """judge-strategies (like decompose and annotate) runs through signals.run: SIGTERM while
    its calls are in flight ends it with one line and 143, not a silent death."""
    fake = FakeOpenAI(lambda body: "The answer is True.")
    fake.delay_s = 30  # every call waits: SIGTERM comes while they are in flight
    with serving(fake.app()) as srv:
        proc = start([HPT, "judge-strategies", "--model", "openai:test-model", "--datasets",
                      "boolq", "--strategies", "role", "--per-dataset", "2", "--data-dir",
                      str(data_dir), "--out", str(tmp_path / "judge"), "--base-url",
                      srv.base_url])  # fmt: skip
        wait_until(lambda: bool(fake.requests), "a call in flight")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == signals.EXIT_TERMINATED == 143, err
    assert err.strip().splitlines() == ["hpt: stopped by SIGTERM; finished work is kept"]
