"""A write that fails stops the run at once: no further model calls, one line saying what
failed, what was kept and how to continue, nothing half-written left behind.

Faults are injected into the records file and the JSON writes (the unit level and whole runs
in this process), and met for real on a small tmpfs filled up by the run (the command line)."""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

import hpt
from hpt.backends.cache import ResponseCache
from hpt.errors import StorageError
from hpt.orchestrator.runner import RunStopped, run_evaluation
from hpt.results.records import SampleRecord
from hpt.results.runfile import RunSummary
from hpt.results.store import RunStore
from tests.backend_helpers import FAST_RETRY, serving
from tests.run_faults import env, mounted_tmpfs, one_error_line, run_cmd  # noqa: F401
from tests.run_fixtures import make_record
from tests.servers.answer_key import KeyedResponder
from tests.servers.openai_compat import FakeOpenAI
from tests.test_dspy_methods import Scripted, toy  # noqa: F401 (toy: a fixture)
from tests.test_dspy_methods import spec as dspy_run_spec

CONCURRENCY = 4


class FillsUp:
    """The records file on a disk that fills up: ``room`` bytes are written, then a write
    takes what still fits and the next fails with ENOSPC (as on a real full disk)."""

    def __init__(self, real: IO[bytes], room: int, on_full: Any = None) -> None:
        self.real, self.room, self.on_full = real, room, on_full

    def write(self, data: Any) -> int:
        if self.room <= 0:
            if self.on_full is not None:
                self.on_full()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = self.real.write(bytes(data[: self.room]))
        self.room -= written
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _lines(out: Path) -> list[str]:
    return (out / "samples.jsonl").read_text().splitlines(keepends=True)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.suffix in (".tmp", ".resume"))


# The store


async def test_a_batch_cut_short_is_cut_off_and_raises(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.create()
    first = [make_record(f"s{i}", level=1) for i in range(2)]
    await store.append(first)
    assert store._fh is not None
    store._fh = FillsUp(store._fh, room=100)  # type: ignore[assignment]
    with pytest.raises(StorageError) as raised:
        await store.append([make_record("s2", level=2), make_record("s3", level=2)])
    assert raised.value.what == "a record" and raised.value.cause.errno == errno.ENOSPC
    assert "No space left on device" in str(raised.value)
    # The 100 bytes that did fit are gone again: the file holds whole records only.
    kept = [SampleRecord.model_validate_json(line) for line in _lines(tmp_path)]
    assert [r.sample_id for r in kept] == ["s0", "s1"] and store.appended == 2


def test_a_json_file_that_cannot_be_replaced_is_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RunStore(tmp_path)
    old = RunSummary(complete=False, cells=[])
    store.write_json("summary.json", old)

    def failing_replace(src: Any, dst: Any) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr("hpt.results.store.os.replace", failing_replace)
    with pytest.raises(StorageError, match=r"could not write the summary to .*Input/output error"):
        store.write_json("summary.json", RunSummary(complete=True, cells=[]))
    assert json.loads((tmp_path / "summary.json").read_text())["complete"] is False
    assert _leftovers(tmp_path) == []


# Whole runs, faults injected


@pytest.fixture
def server(boolq_answers: dict[str, str]) -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "three_shot_cot"))
    fake.delay_s = 0.005
    with serving(fake.app()) as srv:
        yield fake, srv.base_url


def _evaluate(base_url: str, data_dir: Path, out: Path, limit: int) -> Any:
    return hpt.evaluate(
        datasets="boolq", models="openai:test-model", base_url=base_url, limit=limit,
        concurrency=CONCURRENCY, data_dir=data_dir, out=out, retry=FAST_RETRY,
    )  # fmt: skip


async def test_a_full_records_file_stops_the_calls_and_resume_finishes(
    server: tuple[FakeOpenAI, str], data_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    fake, base_url = server
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    out, n = tmp_path / "run", 150
    sent_when_full: list[int] = []
    opened = RunStore._open

    def open_small(self: RunStore, how: str) -> None:
        opened(self, how)
        assert self._fh is not None
        self._fh = FillsUp(self._fh, 60_000, lambda: sent_when_full.append(len(fake.requests)))  # type: ignore[assignment]

    monkeypatch.setattr(RunStore, "_open", open_small)
    with pytest.raises(RunStopped) as raised:
        await _evaluate(base_url, data_dir, out, n)
    stopped = raised.value
    kept = _lines(out)
    assert 0 < len(kept) == stopped.kept < n and all(line.endswith("\n") for line in kept)
    assert [SampleRecord.model_validate_json(line) for line in kept]
    assert str(stopped).startswith(f"could not write a record to {out / 'samples.jsonl'}: ")
    assert f"{len(kept)} records kept in {out / 'samples.jsonl'}" in str(stopped)
    assert f"the summary is in {out / 'summary.json'}" in str(stopped)
    assert str(stopped).endswith(f"free some space, then continue with: hpt run --resume {out}")
    # No call is sent once the file is full: only those already on their way arrive (a
    # worker may have started one more in the moment before it was stopped).
    (at_fault,) = sent_when_full
    assert len(fake.requests) - at_fault <= 2 * CONCURRENCY, (at_fault, len(fake.requests))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["cells"][0]["samples"] == len(kept)
    assert _leftovers(out) == [] and not (out / ".lock").exists()

    monkeypatch.setattr(RunStore, "_open", opened)  # space again
    result = await hpt.resume(out)
    assert result.complete and result.summary.samples == n
    assert len({r.sample_id for r in map(SampleRecord.model_validate_json, _lines(out))}) == n


def _cache_fills_up(monkeypatch: pytest.MonkeyPatch, fake: FakeOpenAI, puts: int) -> list[int]:
    """The response cache's disk fills after ``puts`` writes: from then on every use raises
    its StorageError, as the cache does after a storage fault. Returns, once it has, the
    number of calls the server had received at that moment."""
    get, put = ResponseCache.get, ResponseCache.put
    stored: list[int] = []
    sent_when_full: list[int] = []

    def full() -> None:
        if len(stored) >= puts:
            if not sent_when_full:
                sent_when_full.append(len(fake.requests))
            cause = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            raise StorageError("the response cache", Path("responses.sqlite3"), cause)

    async def get_until_full(self: ResponseCache, *args: Any) -> Any:
        full()
        return await get(self, *args)

    async def put_until_full(self: ResponseCache, *args: Any) -> None:
        full()
        stored.append(1)
        await put(self, *args)

    monkeypatch.setattr(ResponseCache, "get", get_until_full)
    monkeypatch.setattr(ResponseCache, "put", put_until_full)
    return sent_when_full


async def test_a_cache_that_cannot_be_written_stops_the_run(
    server: tuple[FakeOpenAI, str], data_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    fake, base_url = server
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    out, n = tmp_path / "run", 150
    sent_when_full = _cache_fills_up(monkeypatch, fake, puts=60)
    with pytest.raises(RunStopped) as raised:
        await _evaluate(base_url, data_dir, out, n)
    message = str(raised.value)
    assert message.startswith("could not write the response cache to ")
    kept = _lines(out)
    assert f"{len(kept)} records kept in" in message and f"hpt run --resume {out}" in message
    assert 0 < len(kept) < n and raised.value.kept == len(kept)
    assert len(fake.requests) - sent_when_full[0] <= 2 * CONCURRENCY
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cells"][0]["samples"] == len(kept)


@pytest.mark.dspy
@pytest.mark.usefixtures("toy")
@pytest.mark.parametrize(
    ("strategy", "puts"),
    [("dspy_predict", 2), ("dspy_bfrs", 5)],  # evaluating, optimising
)
async def test_a_cache_fault_inside_dspy_stops_the_run(
    strategy: str, puts: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DSPy wraps what an LM call raises on its way out of its worker thread; the fault is
    found inside and stops the run all the same."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=Scripted())
    sent_when_full = _cache_fills_up(monkeypatch, fake, puts)
    args = {"dspy_bfrs": {"num_threads": 4}} if strategy == "dspy_bfrs" else {}
    with serving(fake.app()) as srv, pytest.raises(RunStopped) as raised:
        await run_evaluation(dspy_run_spec(srv, tmp_path / "run", strategy, strategy_args=args))
    assert str(raised.value).startswith("could not write the response cache to ")
    assert len(fake.requests) - sent_when_full[0] <= 2 * CONCURRENCY


async def test_a_summary_that_cannot_be_written_is_said_and_no_tmp_stays(
    server: tuple[FakeOpenAI, str], data_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    _, base_url = server
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    out = tmp_path / "run"
    replace = os.replace

    def no_summary(src: Any, dst: Any) -> None:
        if Path(dst).name == "summary.json":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        replace(src, dst)

    monkeypatch.setattr("hpt.results.store.os.replace", no_summary)
    with pytest.raises(RunStopped) as raised:
        await _evaluate(base_url, data_dir, out, 6)
    assert str(raised.value).startswith(f"could not write the summary to {out}/summary.json")
    assert f"the run itself finished: 6 records in {out / 'samples.jsonl'}" in str(raised.value)
    assert f"summary.json was not written (hpt summarize {out} recomputes it" in str(raised.value)
    assert sorted(p.name for p in out.iterdir()) == ["run.json", "samples.jsonl"]


# The command line on a real full disk


def test_a_run_that_fills_the_disk_stops_in_one_line_and_resumes(
    server: tuple[FakeOpenAI, str], mounted: Path, data_dir: Path
) -> None:
    fake, base_url = server
    fake.delay_s = 0
    subprocess.run(["mount", "-o", "remount,size=256k", str(mounted)], check=True)
    out, n = mounted / "run", 800
    cmd = run_cmd(base_url, data_dir, out, n)
    full = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=300)
    assert full.returncode == 1, full.stderr
    kept = _lines(out)
    line = one_error_line(
        full.stderr, f"could not write a record to {out / 'samples.jsonl'}: No space left",
        f"{len(kept)} records kept in", f"then continue with: hpt run --resume {out}",
    )  # fmt: skip
    assert "summary" in line and 0 < len(kept) < n and all(k.endswith("\n") for k in kept)
    assert [SampleRecord.model_validate_json(k) for k in kept]
    # Three calls a sample; beyond the records kept, only the climbs under way and the
    # records that finished once the file was full (today: 5,860 calls after the fault).
    assert len(fake.requests) <= 3 * (len(kept) + 3 * CONCURRENCY), len(fake.requests)
    assert sorted(p.name for p in out.iterdir() if p.name != "summary.json") == [
        "run.json", "samples.jsonl",
    ]  # fmt: skip

    subprocess.run(["mount", "-o", "remount,size=16m", str(mounted)], check=True)
    resumed = subprocess.run([*cmd[:2], "--resume", str(out), "--no-progress"], env=env(),
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    ids = [json.loads(k)["sample_id"] for k in _lines(out)]
    assert len(ids) == len(set(ids)) == n


def test_a_file_size_limit_stops_the_run_too(
    server: tuple[FakeOpenAI, str], data_dir: Path, tmp_path: Path
) -> None:
    """Needs no root: the records file meets RLIMIT_FSIZE (EFBIG; Python ignores SIGXFSZ)."""
    fake, base_url = server
    fake.delay_s = 0
    out, n = tmp_path / "run", 400

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, resource.RLIM_INFINITY))

    cmd = run_cmd(base_url, data_dir, out, n, "--no-cache")
    done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=300,
                          preexec_fn=limited)  # fmt: skip
    assert done.returncode == 1, done.stderr
    kept = _lines(out)
    one_error_line(done.stderr, f"could not write a record to {out / 'samples.jsonl'}: File too "
                   f"large; the run stopped: {len(kept)} records kept", "ulimit -f")  # fmt: skip
    assert 0 < len(kept) < n and all(k.endswith("\n") for k in kept)
    assert len(fake.requests) <= 3 * (len(kept) + 3 * CONCURRENCY), len(fake.requests)
    assert _leftovers(out) == []


def test_a_run_started_on_a_full_disk_leaves_nothing(
    server: tuple[FakeOpenAI, str], mounted: Path, data_dir: Path
) -> None:
    fake, base_url = server
    with (mounted / "filler").open("wb") as fh:  # fill it to the last byte
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    out = mounted / "run"
    full = subprocess.run(run_cmd(base_url, data_dir, out, 5), env=env(),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert full.returncode == 1, full.stderr
    one_error_line(full.stderr, f"could not write the run spec to {out / 'run.json'}",
                   "No space left on device", "nothing was run")  # fmt: skip
    assert not out.exists() and fake.requests == []
