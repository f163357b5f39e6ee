"""The response cache under faults: a damaged or locked file is left alone with one warning
and the run goes on without it; a write the storage refuses (disk full, I/O error) stops the
run with a StorageError; ``hpt cache check`` finds damage and ``hpt cache clear`` always
clears."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import json
import random
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from hpt.backends import GenerationParams, ManagedBackend, Message, ResponseCache
from hpt.backends.cache import check_cache
from hpt.errors import StorageError
from tests.backend_helpers import FAST_RETRY, backend, serving
from tests.run_faults import mounted_tmpfs  # noqa: F401 (the fixture "mounted")
from tests.servers.answer_key import KeyedResponder
from tests.servers.openai_compat import FakeOpenAI, ServerThread

WARNING = "hpt: warning: response cache "
N = 8


def _ask(i: int) -> list[Message]:
    return [Message(role="user", content=f"question {i}")]


def _reply(body: dict[str, Any]) -> str:
    return f"answer to {body['messages'][-1]['content']}"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeOpenAI, ServerThread]]:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=_reply)
    with serving(fake.app()) as srv:
        yield fake, srv


@contextlib.asynccontextmanager
async def _model(srv: ServerThread, cache: ResponseCache) -> AsyncIterator[ManagedBackend]:
    async with backend(
        cache=cache, provider="openai", model="test-model", endpoints=[srv.base_url]
    ) as b:
        yield b


async def _ask_all(model: ManagedBackend, n: int = N) -> list[str]:
    outs = [await model.complete(_ask(i), GenerationParams()) for i in range(n)]
    assert [o.text for o in outs] == [f"answer to question {i}" for i in range(n)]
    return [o.text for o in outs if o.cached]


async def _filled(path: Path, srv: ServerThread) -> None:
    async with ResponseCache(path) as cache, _model(srv, cache) as model:
        await _ask_all(model)


def _damage(path: Path) -> None:
    """Garbage over every page but the first (the header and schema stay readable)."""
    wal = Path(f"{path}-wal")
    assert not wal.exists() or not wal.stat().st_size  # all of it in the file: checkpointed
    size = path.stat().st_size
    page = 4096
    assert size >= 3 * page
    with path.open("r+b") as fh:
        fh.seek(page)
        fh.write(random.Random(24).randbytes(size - page))


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(WARNING)]


# -- damaged ---------------------------------------------------------------------------------


async def test_a_damaged_cache_is_left_alone_at_open_with_one_warning(
    server: tuple[FakeOpenAI, ServerThread], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, srv = server
    path = tmp_path / "responses.sqlite3"
    await _filled(path, srv)
    _damage(path)
    async with ResponseCache(path) as cache, _model(srv, cache) as model:
        assert await _ask_all(model) == []  # nothing from the damaged file
        assert await _ask_all(model) == []  # nor kept: puts are dropped
    assert fake.served == 3 * N
    [line] = _warnings(capsys.readouterr().err)
    assert line == (
        f"{WARNING}{path} is damaged: database disk image is malformed; continuing without "
        "it (hpt cache check / hpt cache clear)"
    )


async def test_damage_found_mid_run_is_left_alone_with_one_warning(
    server: tuple[FakeOpenAI, ServerThread], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, srv = server
    path = tmp_path / "responses.sqlite3"
    await _filled(path, srv)
    async with ResponseCache(path) as cache, _model(srv, cache) as model:
        # Opened whole (every key known); the entries' pages go bad under it.
        _damage(path)
        assert await _ask_all(model) == []
    assert fake.served == 2 * N
    assert [ln.split(" is ")[1][:7] for ln in _warnings(capsys.readouterr().err)] == ["damaged"]


async def test_a_run_on_a_damaged_cache_warns_once_and_completes(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path,
    tmp_path: Path, _private_cache: Path, capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from hpt.orchestrator import RunSpec, run_evaluation

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "three_shot_cot"))
    with serving(fake.app()) as srv:
        spec = RunSpec.model_validate(
            {"dataset": "boolq", "model": "openai:test-model", "limit": 6, "concurrency": 3,
             "data_dir": data_dir, "out": tmp_path / "first", "retry": FAST_RETRY,
             "base_url": srv.base_url}
        )  # fmt: skip
        await run_evaluation(spec)
        calls = fake.served
        _damage(_private_cache / "responses.sqlite3")
        await run_evaluation(spec.model_copy(update={"out": tmp_path / "second"}))
    assert fake.served == 2 * calls  # every call asked again
    summary = json.loads((tmp_path / "second" / "summary.json").read_text())["cells"][0]
    assert summary["samples"] == 6 and summary["calls"] == calls and summary["cached_calls"] == 0
    assert len(_warnings(capfd.readouterr().err)) == 1


# -- hpt cache check / clear / stats ---------------------------------------------------------


def _hpt(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from hpt.cli.main import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_reports_damage_and_clear_removes_a_file_it_cannot_read(
    server: tuple[FakeOpenAI, ServerThread], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, srv = server
    path = tmp_path / "responses.sqlite3"
    asyncio.run(_filled(path, srv))
    code, out, _ = _hpt(capsys, "cache", "check", "--path", str(path))
    assert code == 0 and out.splitlines() == [f"cache: {path}", f"ok: no damage found; {N} entries"]

    _damage(path)
    code, out, _ = _hpt(capsys, "cache", "check", "--path", str(path))
    lines = out.splitlines()
    assert code == 1 and lines[0] == f"cache: {path}" and "hpt cache clear" in lines[-1]
    assert lines[1] == "damaged: database disk image is malformed"  # its roots are gone

    code, out, err = _hpt(capsys, "cache", "stats", "--path", str(path))
    assert code == 2 and out == ""
    assert err.startswith("hpt: error: the response cache ") and err.count("\n") == 1
    assert "is damaged" in err and "hpt cache check" in err and "hpt cache clear" in err

    code, out, _ = _hpt(capsys, "cache", "clear", "--path", str(path))
    said, did = out.splitlines()
    assert code == 0 and said == (
        f"the response cache {path} is damaged: database disk image is malformed; removing "
        "it and its -wal and -shm files"
    )
    assert did.startswith(f"removed {path}") and list(tmp_path.iterdir()) == []
    code, out, _ = _hpt(capsys, "cache", "check", "--path", str(path))
    assert code == 0 and out == f"no response cache at {path}: nothing to check\n"
    assert not path.exists()  # check creates nothing


def test_a_file_that_is_no_database_is_reported_and_cleared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "responses.sqlite3"
    path.write_bytes(b"\x00\xffnot sqlite" * 1000)
    assert check_cache(path).damage == ["file is not a database"]
    code, out, _ = _hpt(capsys, "cache", "check", "--path", str(path))
    assert code == 1 and "damaged: file is not a database" in out.splitlines()
    code, out, _ = _hpt(capsys, "cache", "clear", "--path", str(path))
    assert code == 0 and out.splitlines()[-1] == f"removed {path}"
    code, out, _ = _hpt(capsys, "cache", "stats", "--path", str(path))  # a fresh, empty cache
    assert code == 0 and "entries: 0" in out


# -- locked by another process ---------------------------------------------------------------

_LOCKER = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    if sys.argv[2] == "exclusive":  # no one may even read
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("UPDATE responses SET hits = hits")
    print("locked", flush=True)
    sys.stdin.read()  # until the test closes it
    conn.execute("ROLLBACK")
    """
)


@contextlib.contextmanager
def _locked(path: Path, how: str) -> Iterator[None]:
    """Another process holding the cache's lock (writers only, or everyone)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _LOCKER, str(path), how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        assert proc.stdout.readline() == "locked\n"
        yield
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0


async def test_a_cache_locked_mid_run_is_left_alone_with_one_warning(
    server: tuple[FakeOpenAI, ServerThread], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, srv = server
    path = tmp_path / "responses.sqlite3"
    async with ResponseCache(path, busy_timeout_s=0.2) as cache, _model(srv, cache) as model:
        with _locked(path, "writers"):
            await _ask_all(model)  # their batch cannot be written: the cache is given up
            await _wait_for_flushes()
            assert await _ask_all(model) == []
        assert await _ask_all(model) == []  # released, but given up for this run
    assert fake.served == 3 * N
    [line] = _warnings(capsys.readouterr().err)
    assert f"{path} is locked by another process: database is locked; continuing" in line


async def test_a_cache_locked_at_open_is_left_alone_with_one_warning(
    server: tuple[FakeOpenAI, ServerThread], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, srv = server
    path = tmp_path / "responses.sqlite3"
    await _filled(path, srv)
    with _locked(path, "exclusive"):
        async with ResponseCache(path, busy_timeout_s=0.2) as cache, _model(srv, cache) as model:
            assert cache.unusable is not None
            assert await _ask_all(model) == []
    assert fake.served == 2 * N
    assert len(_warnings(capsys.readouterr().err)) == 1


async def test_reads_go_on_while_another_process_holds_the_write_lock(
    server: tuple[FakeOpenAI, ServerThread], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A hit is only a read (WAL lets it past a writer), its count waits for no lock: so none
    # of these gets, queued on the one worker, spends a busy wait, let alone one each.
    fake, srv = server
    path = tmp_path / "responses.sqlite3"
    await _filled(path, srv)
    with _locked(path, "writers"):
        async with ResponseCache(path, busy_timeout_s=1.0) as cache, _model(srv, cache) as model:
            asks = (model.complete(_ask(i), GenerationParams()) for i in range(N))
            outs = await asyncio.gather(*asks)
            assert all(o.cached for o in outs)
            assert cache.unusable is None
    assert fake.served == N  # only the filling run paid
    assert _warnings(capsys.readouterr().err) == []
    async with ResponseCache(path) as cache, _model(srv, cache) as model:
        await _ask_all(model)  # the lock gone, hits are counted again
        assert (await cache.stats()).hits == N


async def _wait_for_flushes() -> None:
    """Let the batches gathered so far reach the file (or fail to)."""
    await asyncio.gather(*(t for t in asyncio.all_tasks() if t.get_name() == "hpt-cache-flush"))


# -- storage faults --------------------------------------------------------------------------


@contextlib.contextmanager
def _unretrieved() -> Iterator[list[dict[str, Any]]]:
    """What the event loop reports of tasks nobody awaited ("Task exception was never
    retrieved")."""
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: seen.append(context))
    try:
        yield seen
        gc.collect()  # a finished task's unretrieved exception is reported when it goes
    finally:
        loop.set_exception_handler(None)


@pytest.fixture
def small_disk(mounted: Path) -> Path:
    """A real 512 KB filesystem (tmpfs), where root may mount one."""
    subprocess.run(["mount", "-o", "remount,size=512k", str(mounted)], check=True)
    return mounted


def _fill(folder: Path) -> None:
    with (folder / "filler").open("wb", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 4096)


async def test_a_full_disk_under_the_cache_stops_the_calls(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=lambda body: "x" * 20_000)  # enough to grow the log
    path = small_disk / "responses.sqlite3"
    with serving(fake.app()) as srv, _unretrieved() as unretrieved:
        async with ResponseCache(path) as cache, _model(srv, cache) as model:
            _fill(small_disk)
            with pytest.raises(StorageError) as failed:
                for i in range(100):
                    await model.complete(_ask(i), GenerationParams())
                    await _wait_for_flushes()
            sent = fake.served
            with pytest.raises(StorageError):  # and so is every later call: none is sent
                await model.complete(_ask(1000), GenerationParams())
            assert fake.served == sent
        # aclose above did not raise it again: the caller has it already.
    assert failed.value.what == "the response cache" and failed.value.path == path
    assert str(failed.value) == (
        f"could not write the response cache to {path}: No space left on device"
    )
    assert unretrieved == []


async def test_a_last_batch_the_disk_refuses_surfaces_when_the_cache_closes(
    small_disk: Path, server: tuple[FakeOpenAI, ServerThread]
) -> None:
    _, srv = server
    path = small_disk / "responses.sqlite3"
    big = [Message(role="user", content="y" * 100_000)]
    with _unretrieved() as unretrieved:
        with pytest.raises(StorageError, match="No space left on device"):
            async with ResponseCache(path) as cache, _model(srv, cache) as model:
                _fill(small_disk)
                await model.complete(big, GenerationParams())  # its batch is still gathering
    assert unretrieved == []


async def test_a_run_whose_cache_disk_fills_stops(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str],
    data_dir: Path, tmp_path: Path,
) -> None:  # fmt: skip
    from hpt.orchestrator import RunSpec, run_evaluation

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("HPT_CACHE_DIR", str(small_disk))  # the records are elsewhere
    keyed = KeyedResponder(boolq_answers, "three_shot_cot")
    served = itertools.count(1)

    def responder(body: dict[str, Any]) -> str:
        if next(served) == 60:  # the disk fills while the run goes on
            _fill(small_disk)
        return f"{keyed(body)} {'padding ' * 1000}"

    fake = FakeOpenAI(responder)
    with serving(fake.app()) as srv:
        spec = RunSpec.model_validate(
            {"dataset": "boolq", "model": "openai:test-model", "limit": 300, "concurrency": 8,
             "data_dir": data_dir, "out": tmp_path / "run", "retry": FAST_RETRY,
             "base_url": srv.base_url}
        )  # fmt: skip
        with pytest.raises(StorageError) as stopped:
            await run_evaluation(spec)
    assert str(stopped.value).startswith(
        f"could not write the response cache to {small_disk / 'responses.sqlite3'}: No space "
        "left on device"
    )
    assert fake.served < 3 * 300  # it stopped, well before its last call


_FILE_SIZE_LIMIT = textwrap.dedent(
    """
    import asyncio, resource, signal, sys
    from pathlib import Path
    from hpt.backends import Completion, ResponseCache
    from hpt.errors import StorageError

    async def main():
        async with ResponseCache(Path(sys.argv[1])) as cache:
            # Writes past 64 KB fail with EFBIG (the signal that would kill us ignored).
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))
            for i in range(40):
                await cache.put(f"{i:064x}", "p", "m", Completion(text="x" * 4000))
            # Until the batches have met the limit.
            flushes = [t for t in asyncio.all_tasks() if t.get_name() == "hpt-cache-flush"]
            await asyncio.gather(*flushes)
            try:
                await cache.get(f"{0:064x}")
            except StorageError as exc:
                print(exc)

    asyncio.run(main())
    """
)


def test_an_io_error_writing_the_cache_is_a_storage_fault(tmp_path: Path) -> None:
    # Needs no root: a file-size limit makes the writes fail with an I/O error.
    path = tmp_path / "responses.sqlite3"
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", _FILE_SIZE_LIMIT, str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.stdout == f"could not write the response cache to {path}: Input/output error\n"
    assert done.returncode == 0 and "never retrieved" not in done.stderr, done.stderr
