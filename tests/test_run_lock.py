"""One writer per run directory: two ``hpt run`` processes on one ``--out``, a ``--resume`` of
a run still going, a lock left by a killed run, and a read-only run directory.

The model server holds every answer until the test opens its gate, so "while the first run
is going" is a state the test waits for, not a time it guesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpt.results.lock import LOCK, RunLock
from hpt.results.reader import read_records
from hpt.results.rundir import RunDirError
from tests.backend_helpers import serving
from tests.run_faults import (
    GatedOpenAI,
    env,
    mounted_tmpfs,  # noqa: F401 (the fixture "mounted")
    one_error_line,
    run_cmd,
    start,
    wait_until,
)
from tests.servers.answer_key import KeyedResponder
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_cli import hpt as run_hpt


def complete_and_whole(out: Path, n: int) -> None:
    """``n`` records, each sample once, every line whole; nothing left behind."""
    text = (out / "samples.jsonl").read_text()
    assert text.endswith("\n") and len(text.splitlines()) == n
    keys = [r.key for r in read_records(out)]
    assert len(keys) == len(set(keys)) == n
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["cells"][0]["samples"] == n
    assert sorted(p.name for p in out.iterdir()) == ["run.json", "samples.jsonl", "summary.json"]


@pytest.fixture
def gated(boolq_answers: dict[str, str]) -> Iterator[tuple[GatedOpenAI, ServerThread]]:
    fake = GatedOpenAI(KeyedResponder(boolq_answers, "three_shot_cot"), record_requests=False)
    with serving(fake.app()) as server:
        try:
            yield fake, server
        finally:
            fake.gate.set()


def test_two_runs_into_one_directory_one_refuses_naming_the_other(
    gated: tuple[GatedOpenAI, ServerThread], data_dir: Path, tmp_path: Path
) -> None:
    fake, server = gated
    out, n = tmp_path / "run", 12
    both = [start(run_cmd(server.base_url, data_dir, out, n)) for _ in range(2)]
    try:
        # Whichever locked the directory waits on the gate; the other must refuse meanwhile.
        wait_until(lambda: any(p.poll() is not None for p in both), "one run to refuse")
        loser = next(p for p in both if p.poll() is not None)
        winner = both[1] if loser is both[0] else both[0]
        _, stderr = loser.communicate(timeout=60)
        assert loser.returncode == 2, stderr
        one_error_line(stderr, str(out), f"pid {winner.pid}")
        assert winner.poll() is None and fake.arrived > 0
    finally:
        fake.gate.set()
        outcome = {p.pid: (p.communicate(timeout=120)[1], p.returncode) for p in both}
    stderr, code = outcome[winner.pid]
    assert code == 0, stderr
    complete_and_whole(out, n)


def test_resuming_a_run_still_going_refuses(
    gated: tuple[GatedOpenAI, ServerThread], data_dir: Path, tmp_path: Path
) -> None:
    fake, server = gated
    out, n = tmp_path / "run", 12
    running = start(run_cmd(server.base_url, data_dir, out, n))
    try:
        wait_until(lambda: fake.arrived > 0, "the run's first call")
        resumed = run_hpt("run", "--resume", str(out), "--no-progress")
        assert resumed.returncode == 2, resumed.stderr
        one_error_line(resumed.stderr, str(out), f"pid {running.pid}")
    finally:
        fake.gate.set()
        _, stderr = running.communicate(timeout=120)
    assert running.returncode == 0, stderr
    complete_and_whole(out, n)  # no sample written twice


def test_a_lock_left_by_a_killed_run_does_not_block_its_resume(
    gated: tuple[GatedOpenAI, ServerThread], data_dir: Path, tmp_path: Path
) -> None:
    fake, server = gated
    out, n = tmp_path / "run", 12
    killed = start(run_cmd(server.base_url, data_dir, out, n))
    wait_until(lambda: fake.arrived > 0, "the run's first call")
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=30)
    assert (out / LOCK).read_text().strip() == str(killed.pid)  # left behind, naming the dead
    fake.gate.set()
    resumed = run_hpt("run", "--resume", str(out), "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    complete_and_whole(out, n)


def test_lock_refuses_a_second_holder_until_released(tmp_path: Path) -> None:
    out = tmp_path / "runs" / "run"
    held = RunLock.take(out)
    assert (out / LOCK).read_text().strip() == str(os.getpid())
    with pytest.raises(RunDirError, match=f"pid {os.getpid()}"):
        RunLock.take(out)
    held.release()
    assert list(tmp_path.iterdir()) == []  # made for the run, nothing written: removed again
    out.mkdir(parents=True)
    (out / "keep").write_text("x")
    again = RunLock.take(out)
    again.release()
    assert sorted(p.name for p in out.iterdir()) == ["keep"]  # a directory it did not make stays


def test_resuming_a_read_only_run_directory_is_one_line(
    fake_openai: tuple[FakeOpenAI, ServerThread], mounted: Path, data_dir: Path
) -> None:
    _, server = fake_openai
    out = mounted / "run"
    done = subprocess.run(run_cmd(server.base_url, data_dir, out, 3), env=env(), capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    subprocess.run(["mount", "-o", "remount,ro", str(mounted)], check=True)
    resumed = run_hpt("run", "--resume", str(out), "--no-progress")
    assert resumed.returncode == 2, resumed.stderr
    one_error_line(resumed.stderr, str(out), "Read-only file system", "copy it")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("name", [LOCK, "samples.jsonl", "run.json.tmp", "summary.json"])
def test_a_received_run_directory_cannot_write_through_links(tmp_path: Path, name: str) -> None:
    """A run directory from someone else may hold links to the user's files; taking the lock
    refuses them (and the lock itself is never opened through a link), so nothing outside
    the run is truncated or written."""
    run = tmp_path / "received"
    run.mkdir()
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    (run / name).symlink_to(precious)
    with pytest.raises(RunDirError, match="symbolic link"):
        RunLock.take(run)
    assert precious.read_text() == "keep me\n"


def test_json_files_are_never_written_through_a_leftover_link(tmp_path: Path) -> None:
    from hpt.results.runfile import RunSummary
    from hpt.results.store import RunStore

    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    (tmp_path / "summary.json.tmp").symlink_to(precious)
    RunStore(tmp_path).write_json("summary.json", RunSummary(complete=True, cells=[]))
    assert precious.read_text() == "keep me\n"
    assert json.loads((tmp_path / "summary.json").read_text())["complete"] is True
    assert not (tmp_path / "summary.json.tmp").exists()


async def test_cancelling_twice_still_waits_for_the_writer() -> None:
    """The run's end closes the records and releases the lock only after the writer: a second
    Ctrl-C (or an API caller cancelling twice) must not cut that wait short."""
    import asyncio

    from hpt.orchestrator.scheduling import outlast_cancellation as _outlast_cancellation

    finished: list[bool] = []

    async def writer() -> None:
        await asyncio.sleep(0.2)
        finished.append(True)

    task = asyncio.create_task(writer())
    outer = asyncio.create_task(_outlast_cancellation(task))
    for _ in range(2):
        await asyncio.sleep(0.01)
        outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert finished == [True]
