"""``hpt cache``: inspect or empty the response cache."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from rich.console import Console

from hpt.backends import ResponseCache, default_cache_path


def add_parser(sub: Any) -> None:
    cache = sub.add_parser("cache", help="inspect or empty the response cache")
    cache.add_argument("action", choices=["stats", "clear"])
    cache.add_argument("--path", type=Path, help=f"cache file (default {default_cache_path()})")


def command(args: argparse.Namespace, console: Console) -> int:
    async def act() -> str:
        cache = ResponseCache(args.path)
        try:
            if args.action == "clear":
                n = await cache.clear()
                return f"removed {n} cached responses from {cache.path}"
            st = await cache.stats()
        finally:
            await cache.aclose()
        lines = [
            f"cache: {st.path}",
            f"entries: {st.entries}  hits served: {st.hits}  size: {st.size_bytes / 1e6:.2f} MB",
        ]
        lines += [f"  {model}: {n}" for model, n in st.by_model.items()]
        return "\n".join(lines)

    console.print(asyncio.run(act()), highlight=False)
    return 0
