"""``hpt cache``: inspect, check or empty the response cache."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from rich.console import Console

from hpt.backends.cache import (
    CacheDamagedError,
    CacheError,
    ResponseCache,
    check_cache,
    default_cache_path,
    remove_cache_files,
)

EXIT_DAMAGED = 1


def add_parser(sub: Any) -> None:
    cache = sub.add_parser(
        "cache",
        help="inspect, check or empty the response cache",
        description="stats: what the cache holds. check: SQLite's integrity check of the file "
        "(exit 1 when it is damaged). clear: empty it; a file that cannot be read as a "
        "database is removed, with its -wal and -shm files.",
    )
    cache.add_argument("action", choices=["stats", "check", "clear"])
    cache.add_argument("--path", type=Path, help=f"cache file (default {default_cache_path()})")


def command(args: argparse.Namespace, console: Console) -> int:
    path: Path = args.path or default_cache_path()
    if args.action == "check":
        return _check(path, console)
    lines = asyncio.run(_clear(path) if args.action == "clear" else _stats(path))
    for line in lines:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    return 0


async def _stats(path: Path) -> list[str]:
    cache = ResponseCache(path)
    try:
        st = await cache.stats()
    finally:
        await cache.aclose()
    lines = [
        f"cache: {st.path}",
        f"entries: {st.entries}  hits served: {st.hits}  size: {st.size_bytes / 1e6:.2f} MB",
    ]
    return lines + [f"  {model}: {n}" for model, n in st.by_model.items()]


async def _clear(path: Path) -> list[str]:
    cache = ResponseCache(path)
    try:
        n = await cache.clear()
        return [f"removed {n} cached responses from {path}"]
    except CacheDamagedError as exc:
        damaged = exc
    finally:
        await cache.aclose()  # before the files go: nothing of them stays open
    try:
        removed = await asyncio.to_thread(remove_cache_files, path)
    except OSError as exc:
        raise CacheError(f"{damaged}; could not remove it: {exc}") from exc
    return [
        f"{damaged}; removing it and its -wal and -shm files",
        f"removed {', '.join(str(f) for f in removed)}",
    ]


def _check(path: Path, console: Console) -> int:
    report = check_cache(path)
    if not report.exists:
        console.print(
            f"no response cache at {path}: nothing to check", markup=False, soft_wrap=True
        )
        return 0
    console.print(f"cache: {path}", highlight=False, markup=False, soft_wrap=True)
    if not report.damage:
        console.print(f"ok: no damage found; {report.entries} entries", markup=False)
        return 0
    for finding in report.damage:
        console.print(f"damaged: {finding}", highlight=False, markup=False, soft_wrap=True)
    console.print(
        "run `hpt cache clear` to remove the file; the next run starts a fresh cache",
        markup=False,
    )
    return EXIT_DAMAGED
