"""Serving an aiohttp page on 127.0.0.1, as the live viewer and the annotation page do."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator

from aiohttp import web


@contextlib.asynccontextmanager
async def listening(app: web.Application, port: int = 0) -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1:``port`` (0: any free port) for the body of the ``async
    with``; yields its URL. The socket is bound first, so a port in use raises OSError before
    anything starts."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    finally:
        await runner.cleanup()
