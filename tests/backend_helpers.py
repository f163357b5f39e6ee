"""Shared helpers for backend tests: servers on loopback and opening backends against them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

from aiohttp import web

from hpt.backends import ManagedBackend, ResponseCache, model_config_from, open_backend
from tests.servers.openai_compat import ServerThread

FAST_RETRY = {"max_attempts": 6, "initial_wait_s": 0.01, "max_wait_s": 0.05, "max_total_s": 30}


@contextlib.contextmanager
def serving(app: web.Application, port: int = 0) -> Iterator[ServerThread]:
    server = ServerThread(app, port=port).start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def backend(
    cache: ResponseCache | None = None, **config: Any
) -> AsyncIterator[ManagedBackend]:
    config.setdefault("retry", FAST_RETRY)
    cfg = model_config_from(config)
    async with open_backend(cfg, label=f"{cfg.provider}:test", cache=cache) as b:
        yield b
