"""A content-addressed response cache in SQLite, so a repeated or resumed run is free.

The key hashes everything that decides a completion: provider, model, endpoint, every
generation parameter, the messages, and the caller's sample/epoch seed. Only successful
completions are stored. All SQLite work runs on one worker thread, off the event loop;
WAL mode lets several runs share one file.

Two things keep the cache off the hot path of a fresh run: the keys present at open are
held in memory (as 64-bit prefixes), so a miss costs no database trip, and writes (hit
counts too, so a read never needs the write lock) are gathered for ``FLUSH_AFTER_S`` and
committed together.

The cache is a convenience, and its faults are sorted by what they mean (``_fault``): a
damaged file or one another process keeps locked past ``BUSY_TIMEOUT_S`` is left alone with
one warning, and the run goes on without it; a write the storage refuses (disk full,
read-only, I/O error) is a ``StorageError`` that stops the run, since what it pays for next
could not be kept either.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import sqlite3
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from pydantic import BaseModel
from pydantic_core import to_json

from hpt.backends.base import Completion, GenerationParams, Message
from hpt.errors import HptError, StorageError

CACHE_ENV = "HPT_CACHE_DIR"
FLUSH_AFTER_S = 0.05
# Several runs may share the file; each holds the write lock only for one batch.
BUSY_TIMEOUT_S = 5.0
CACHE_FILE = "responses.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    created REAL NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0,
    completion TEXT NOT NULL
)
"""
_COUNT_HITS = "UPDATE responses SET hits = hits + ? WHERE key = ?"


def default_cache_path() -> Path:
    base = os.environ.get(CACHE_ENV)
    if base:
        return Path(base).expanduser() / CACHE_FILE
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return root / "hpt" / CACHE_FILE


def cache_key(
    *,
    provider: str,
    model: str,
    endpoint: str,
    params: GenerationParams,
    messages: list[Message],
    seed: str,
) -> str:
    # Fixed field order (GenerationParams' own, then a fixed list) makes the JSON canonical;
    # pydantic-core's serializer is several times faster than json.dumps here, and writes
    # the params model as the same object its model_dump(mode="json") would give.
    identity = (
        provider,
        model,
        endpoint,
        params,
        # A turn's thinking blocks, where sent back, are part of what was asked.
        [
            (m.role, m.content)
            if m.reasoning_blocks is None
            else (m.role, m.content, m.reasoning_blocks)
            for m in messages
        ],
        seed,
    )
    return hashlib.sha256(to_json(identity)).hexdigest()


# What SQLite's primary result code (the low byte of an extended one) says about the file.
# A write the storage refused, with the errno it amounts to: the run must stop.
_STORAGE_FAULTS = {
    sqlite3.SQLITE_FULL: errno.ENOSPC,
    sqlite3.SQLITE_IOERR: errno.EIO,
    sqlite3.SQLITE_READONLY: errno.EROFS,
}
# Another connection holds the lock past the busy timeout: the file is fine, but not ours now.
_LOCKED = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL}
_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
# At open, before anything is spent, these are the user's to fix (or to pass --no-cache).
_CANNOT_OPEN = {*_STORAGE_FAULTS, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM}


def _code(exc: sqlite3.Error) -> int | None:
    # Set only on errors SQLite itself reported (not on the module's own misuse errors).
    code: int | None = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def _what_is_wrong(exc: sqlite3.Error) -> str:
    code = _code(exc)
    if code in _LOCKED:
        return f"is locked by another process: {exc}"
    if code in _DAMAGED:
        return f"is damaged: {exc}"
    return f"cannot be used: {exc}"


def _unusable(path: Path, exc: sqlite3.Error) -> CacheError:
    """The line for a command that needs the file itself (stats, clear, check)."""
    if _code(exc) in _LOCKED:
        advice = "try again when that process has finished"
    else:
        advice = "`hpt cache check` shows the damage; `hpt cache clear` removes the file"
    return CacheError(f"the response cache {path} {_what_is_wrong(exc)}; {advice}")


def cache_files(path: Path) -> list[Path]:
    """The database and the write-ahead log and index SQLite keeps beside it."""
    return [path, Path(f"{path}-wal"), Path(f"{path}-shm")]


def remove_cache_files(path: Path) -> list[Path]:
    """Delete the cache's files (those present); the ones removed."""
    removed = []
    for file in cache_files(path):
        try:
            file.unlink()
        except FileNotFoundError:
            continue
        removed.append(file)
    return removed


class CacheStats(BaseModel):
    path: str
    entries: int
    hits: int
    size_bytes: int
    by_model: dict[str, int]


class CacheCheck(BaseModel):
    path: str
    exists: bool
    entries: int | None = None
    # What SQLite's integrity check found, or why the file could not be read at all.
    damage: list[str] = []


class CacheError(HptError):
    """The cache file cannot be opened or used."""


class CacheDamagedError(CacheError):
    """The file cannot be used as a database (damaged, or no database at all): ``hpt cache
    clear`` removes it."""


def check_cache(path: Path, *, limit: int = 10) -> CacheCheck:
    """SQLite's full integrity check of the file, which it neither creates nor changes; at
    most ``limit`` findings. Blocking: for the command line, not the event loop."""
    if not path.exists():
        return CacheCheck(path=str(path), exists=False)
    uri = f"{path.resolve().as_uri()}?mode=rw"  # mode=rw: never create a missing file
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise _unusable(path, exc) from exc
    try:
        rows = conn.execute(f"PRAGMA integrity_check({int(limit)})").fetchall()
        # A finding may span lines, the first headed by which schema it is in ("*** in
        # database main ***"): one line each, without the header.
        found = [
            line
            for (text,) in rows
            for line in str(text).splitlines()
            if not line.startswith("***")
        ]
        if found != ["ok"]:
            return CacheCheck(path=str(path), exists=True, damage=found)
        (entries,) = conn.execute("SELECT COUNT(*) FROM responses").fetchone()
        return CacheCheck(path=str(path), exists=True, entries=entries)
    except sqlite3.Error as exc:
        if _code(exc) in _LOCKED:
            raise _unusable(path, exc) from exc
        return CacheCheck(path=str(path), exists=True, damage=[str(exc)])
    finally:
        conn.close()


class KnownKeys:
    """The 64-bit key prefixes the cache holds, for a miss that costs no database trip: a
    sorted array (8 bytes a key; a set of ints took ~70) and the keys added since it was last
    merged, in a set of at most ``MERGE_AT``, so a million-call run does not grow by ~70 MB."""

    MERGE_AT = 1 << 16

    def __init__(self, keys: Iterable[int] = ()) -> None:
        self._sorted = np.sort(np.fromiter(keys, dtype=np.uint64), kind="stable")
        self._new: set[int] = set()

    def __contains__(self, key: int) -> bool:
        if key in self._new:
            return True
        at = int(self._sorted.searchsorted(np.uint64(key)))
        return at < len(self._sorted) and int(self._sorted[at]) == key

    def add(self, key: int) -> None:
        self._new.add(key)
        if len(self._new) >= self.MERGE_AT:
            new = np.fromiter(self._new, dtype=np.uint64, count=len(self._new))
            # A stable sort of integers is a radix sort (~10 ms at a million keys); a key
            # added twice (calls made at once) does a lookup no harm.
            self._sorted = np.sort(np.concatenate([self._sorted, new]), kind="stable")
            self._new.clear()


class ResponseCache:
    def __init__(self, path: Path | None = None, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = path or default_cache_path()
        self._busy_timeout_s = busy_timeout_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpt-cache")
        self._conn: sqlite3.Connection | None = None
        self._known = KnownKeys()
        self._pending: dict[str, tuple[str, str, str]] = {}
        self._hits: dict[str, int] = {}  # served since the last batch, counted with it
        self._flush_armed = False
        self._flushes: set[asyncio.Task[None]] = set()
        # Why the file was left alone (damaged, locked); from then on every get misses and
        # every put is dropped.
        self.unusable: str | None = None
        # A write the storage refused (or anything a background flush raised): raised by
        # every later get and put, so no further call is sent, and by aclose if no one saw it.
        self._failure: Exception | None = None
        self._failure_seen = False

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout_s, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(_SCHEMA)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    # -- worker-thread side ------------------------------------------------------------
    def _given_up(self) -> bool:
        # Work queued before a fault was seen must not wait on the file (or reopen it) again.
        return self.unusable is not None or self._failure is not None

    def _get(self, key: str) -> str | None:
        if self._given_up():
            return None
        conn = self._connect()
        row = conn.execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _put_many(
        self, rows: list[tuple[str, str, str, float, str]], hits: list[tuple[int, str]]
    ) -> None:
        if self._given_up():
            return
        conn = self._connect()
        if not rows:
            self._count_hits(conn, hits)
            return
        with conn:  # one transaction for the batch
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT OR REPLACE INTO responses (key, provider, model, created, completion) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            conn.executemany(_COUNT_HITS, hits)

    def _count_hits(self, conn: sqlite3.Connection, hits: list[tuple[int, str]]) -> None:
        # A count is worth no wait: while another process holds the write lock it is dropped.
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            with conn:
                conn.execute("BEGIN")
                conn.executemany(_COUNT_HITS, hits)
        except sqlite3.OperationalError as exc:
            if _code(exc) not in _LOCKED:
                raise
        finally:
            conn.execute(f"PRAGMA busy_timeout = {round(self._busy_timeout_s * 1000)}")

    def _load_known(self) -> KnownKeys:
        conn = self._connect()
        return KnownKeys(
            int(k, 16) for (k,) in conn.execute("SELECT substr(key, 1, 16) FROM responses")
        )

    def _stats(self) -> CacheStats:
        conn = self._connect()
        entries, hits = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(hits), 0) FROM responses"
        ).fetchone()
        by_model = {
            f"{p}:{m}": n
            for p, m, n in conn.execute(
                "SELECT provider, model, COUNT(*) FROM responses GROUP BY provider, model "
                "ORDER BY provider, model"
            )
        }
        size = sum(p.stat().st_size for p in cache_files(self.path) if p.exists())
        return CacheStats(
            path=str(self.path), entries=entries, hits=hits, size_bytes=size, by_model=by_model
        )

    def _clear(self) -> int:
        conn = self._connect()
        (n,) = conn.execute("SELECT COUNT(*) FROM responses").fetchone()
        conn.execute("DELETE FROM responses")
        conn.execute("VACUUM")
        return int(n)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- faults --------------------------------------------------------------------------
    def _fault(self, exc: sqlite3.Error) -> StorageError | None:
        """Sort a failure met while a run uses the cache: a storage fault becomes the
        ``StorageError`` every later use raises (returned, for the caller to raise); anything
        else leaves the file alone, with one warning."""
        errno_ = _STORAGE_FAULTS.get(_code(exc) or 0)
        if errno_ is not None:
            cause = OSError(errno_, os.strerror(errno_), str(self.path))
            failure = StorageError("the response cache", self.path, cause)
            failure.__cause__ = exc
            self._failure = failure
            self._pending = {}
            self._hits = {}
            return failure
        self._known = KnownKeys()
        self._pending = {}
        self._hits = {}
        if self.unusable is None:
            self.unusable = _what_is_wrong(exc)
            sys.stderr.write(
                f"hpt: warning: response cache {self.path} {self.unusable}; continuing "
                "without it (hpt cache check / hpt cache clear)\n"
            )
            self._pool.submit(self._close)  # after whatever the worker is doing now
        return None

    def _raise_failure(self) -> NoReturn:
        assert self._failure is not None
        self._failure_seen = True
        raise self._failure

    # -- event-loop side ---------------------------------------------------------------
    async def open(self) -> None:
        try:
            self._known = await self._run(self._load_known)
        except OSError as exc:
            raise CacheError(self._cannot_open(exc)) from exc
        except sqlite3.Error as exc:
            if _code(exc) in _CANNOT_OPEN:
                raise CacheError(self._cannot_open(exc)) from exc
            self._fault(exc)

    def _cannot_open(self, exc: Exception) -> str:
        return (
            f"cannot open the response cache {self.path}: {exc}; "
            f"set {CACHE_ENV} to a writable folder or pass --no-cache"
        )

    async def get(self, key: str) -> Completion | None:
        if self._failure is not None:
            self._raise_failure()
        if int(key[:16], 16) not in self._known:
            return None
        pending = self._pending.get(key)
        if pending:
            blob: str | None = pending[2]
        else:
            try:
                blob = await self._run(self._get, key)
            except sqlite3.Error as exc:
                if self._fault(exc):
                    self._raise_failure()
                return None
            if blob is not None:
                self._hits[key] = self._hits.get(key, 0) + 1
                self._arm_flush()
        return None if blob is None else Completion.model_validate_json(blob)

    async def put(self, key: str, provider: str, model: str, completion: Completion) -> None:
        if self._failure is not None:
            self._raise_failure()
        if self.unusable is not None:
            return
        self._known.add(int(key[:16], 16))
        self._pending[key] = (provider, model, completion.model_dump_json())
        self._arm_flush()

    def _arm_flush(self) -> None:
        if not self._flush_armed:
            self._flush_armed = True
            flush = asyncio.create_task(self._flush_soon(), name="hpt-cache-flush")
            self._flushes.add(flush)
            flush.add_done_callback(self._flushes.discard)

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_AFTER_S)
        try:
            await self.flush()
        except Exception as exc:
            # No one awaits this task: the next get, put or aclose raises what it met.
            self._failure = self._failure or exc

    async def flush(self) -> None:
        self._flush_armed = False
        if not self._pending and not self._hits:
            return
        now = time.time()
        rows = [(k, p, m, now, blob) for k, (p, m, blob) in self._pending.items()]
        hits = [(n, k) for k, n in self._hits.items()]
        self._pending = {}
        self._hits = {}
        try:
            await self._run(self._put_many, rows, hits)
        except sqlite3.Error as exc:
            failure = self._fault(exc)
            if failure:
                raise failure from exc  # not marked seen: a background flush only keeps it

    async def stats(self) -> CacheStats:
        await self.flush()
        try:
            result: CacheStats = await self._run(self._stats)
        except OSError as exc:
            raise CacheError(self._cannot_open(exc)) from exc
        except sqlite3.Error as exc:
            raise _unusable(self.path, exc) from exc
        return result

    async def clear(self) -> int:
        """Empty the cache; ``CacheDamagedError`` when the file cannot be used as a database
        (then ``remove_cache_files`` is the way to clear it)."""
        self._pending.clear()
        self._hits.clear()
        self._known = KnownKeys()
        try:
            result: int = await self._run(self._clear)
        except OSError as exc:
            raise CacheError(self._cannot_open(exc)) from exc
        except sqlite3.Error as exc:
            if _code(exc) in _LOCKED:
                raise _unusable(self.path, exc) from exc
            raise CacheDamagedError(
                f"the response cache {self.path} {_what_is_wrong(exc)}"
            ) from exc
        return result

    async def __aenter__(self) -> ResponseCache:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        # Shielded: a cancelled run still keeps the answers it paid for.
        await asyncio.shield(self._settle_and_close())

    async def _settle_and_close(self) -> None:
        try:
            await asyncio.gather(*self._flushes)  # batches under way (they never raise)
            await self.flush()
            if self._failure is not None and not self._failure_seen:
                self._raise_failure()
        finally:
            await self._run(self._close)
            self._pool.shutdown(wait=True)
