"""SIGTERM ends a long command as Ctrl-C does: its work is cancelled, so every ``finally``
runs (summaries written, embedded model servers stopped), and the command says how to go on.

Without this, SIGTERM (what ``kill``, ``timeout``, systemd and job schedulers send) killed the
process at once: no summary, no message, and the embedded llama.cpp server, in its own process
group so that Ctrl-C reaches hpt first, left running."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

EXIT_TERMINATED = 128 + signal.SIGTERM  # 143, as a shell reports a process ended by SIGTERM


class Terminated(BaseException):
    """SIGTERM cancelled the command; its clean-up has run. A BaseException, as
    KeyboardInterrupt is: no ``except Exception`` on its way out mistakes it for a failure."""


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, with SIGTERM cancelling ``main`` as Ctrl-C does; raises
    ``Terminated`` once ``main`` has wound down. A second SIGTERM while it winds down is
    ignored: the clean-up it would cut short is what the first one asked for."""
    return asyncio.run(_cancelled_by_sigterm(main))


async def _cancelled_by_sigterm(main: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    terminated = False

    def terminate() -> None:
        nonlocal terminated
        if not terminated:
            terminated = True
            task.cancel()

    before = signal.getsignal(signal.SIGTERM)
    loop.add_signal_handler(signal.SIGTERM, terminate)
    try:
        return await main
    except asyncio.CancelledError:
        if terminated and task.uncancel() == 0:
            raise Terminated from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        if before is not None:  # None: set outside Python; the default then stays
            signal.signal(signal.SIGTERM, before)
