"""Faults the local protocol servers can inject, one per incoming request.

A fault is an int status code (answered with the protocol's own error body) or one of:
``"429:SECONDS"`` (429 with that Retry-After), ``"drop"`` (close the connection without an
answer), ``"malformed"`` (200 with a body that is not JSON), ``"slow:SECONDS"`` (answer
normally after that delay, to trip client timeouts).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

Fault = int | str
ErrorBody = Callable[[int], web.Response]


@dataclass
class FaultQueue:
    pending: list[Fault] = field(default_factory=list)
    injected: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def extend(self, faults: list[Fault]) -> None:
        with self._lock:
            self.pending.extend(faults)

    def next(self) -> Fault | None:
        with self._lock:
            if not self.pending:
                return None
            fault = self.pending.pop(0)
            self.injected.append(fault)
            return fault


async def apply(fault: Fault | None, request: web.Request, error: ErrorBody) -> web.Response | None:
    """The response a fault calls for, or None to answer normally."""
    if fault is None:
        return None
    if isinstance(fault, int):
        return error(fault)
    kind, _, arg = fault.partition(":")
    if kind == "429":
        resp = error(429)
        resp.headers["Retry-After"] = arg or "0"
        return resp
    if kind == "drop":
        transport = request.transport
        if transport is not None:
            transport.abort()
        raise asyncio.CancelledError  # aiohttp ends the handler quietly; nothing is sent
    if kind == "malformed":
        return web.Response(status=200, body=b'{"choices": [', content_type="application/json")
    if kind == "slow":
        await asyncio.sleep(float(arg))
        return None
    raise ValueError(f"unknown fault {fault!r}")
