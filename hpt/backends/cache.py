"""A content-addressed response cache in SQLite, so a repeated or resumed run is free.

The key hashes everything that decides a completion: provider, model, endpoint, every
generation parameter, the messages, and the caller's sample/epoch seed. Only successful
completions are stored. All SQLite work runs on one worker thread, off the event loop;
WAL mode lets several runs share one file.

Two things keep the cache off the hot path of a fresh run: the keys present at open are
held in memory (as 64-bit prefixes), so a miss costs no database trip, and writes are
gathered for ``FLUSH_AFTER_S`` and committed together.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json

from hpt.backends.base import Completion, GenerationParams, Message

CACHE_ENV = "HPT_CACHE_DIR"
FLUSH_AFTER_S = 0.05
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
        [(m.role, m.content) for m in messages],
        seed,
    )
    return hashlib.sha256(to_json(identity)).hexdigest()


class CacheStats(BaseModel):
    path: str
    entries: int
    hits: int
    size_bytes: int
    by_model: dict[str, int]


class CacheError(Exception):
    """The cache file cannot be opened or used."""


class ResponseCache:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_cache_path()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpt-cache")
        self._conn: sqlite3.Connection | None = None
        self._known: set[int] = set()
        self._pending: dict[str, tuple[str, str, str]] = {}
        self._flusher: asyncio.Task[None] | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(_SCHEMA)
            except (OSError, sqlite3.Error) as exc:
                raise CacheError(
                    f"cannot open the response cache {self.path}: {exc}; "
                    f"set {CACHE_ENV} to a writable folder or pass --no-cache"
                ) from exc
            self._conn = conn
        return self._conn

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    # -- worker-thread side ------------------------------------------------------------
    def _get(self, key: str) -> str | None:
        conn = self._connect()
        row = conn.execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        conn.execute("UPDATE responses SET hits = hits + 1 WHERE key = ?", (key,))
        return str(row[0])

    def _put_many(self, rows: list[tuple[str, str, str, float, str]]) -> None:
        conn = self._connect()
        with conn:  # one transaction for the batch
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT OR REPLACE INTO responses (key, provider, model, created, completion) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    def _load_known(self) -> set[int]:
        conn = self._connect()
        return {int(k, 16) for (k,) in conn.execute("SELECT substr(key, 1, 16) FROM responses")}

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
        size = sum(
            p.stat().st_size
            for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
            if p.exists()
        )
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

    # -- event-loop side ---------------------------------------------------------------
    async def open(self) -> None:
        self._known = await self._run(self._load_known)

    async def get(self, key: str) -> Completion | None:
        if int(key[:16], 16) not in self._known:
            return None
        pending = self._pending.get(key)
        blob = pending[2] if pending else await self._run(self._get, key)
        return None if blob is None else Completion.model_validate_json(blob)

    async def put(self, key: str, provider: str, model: str, completion: Completion) -> None:
        self._known.add(int(key[:16], 16))
        self._pending[key] = (provider, model, completion.model_dump_json())
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush_soon(), name="hpt-cache-flush")

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_AFTER_S)
        await self.flush()

    async def flush(self) -> None:
        self._flusher = None
        if not self._pending:
            return
        now = time.time()
        rows = [(k, p, m, now, blob) for k, (p, m, blob) in self._pending.items()]
        self._pending = {}
        await self._run(self._put_many, rows)

    async def stats(self) -> CacheStats:
        await self.flush()
        result: CacheStats = await self._run(self._stats)
        return result

    async def clear(self) -> int:
        self._pending.clear()
        self._known.clear()
        result: int = await self._run(self._clear)
        return result

    async def __aenter__(self) -> ResponseCache:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.cancel()
        # Shielded: a cancelled run still keeps the answers it paid for.
        await asyncio.shield(self.flush())
        await self._run(self._close)
        self._pool.shutdown(wait=True)
