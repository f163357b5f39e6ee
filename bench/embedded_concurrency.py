"""The embedded model's decoding rate with calls in flight together.

The same prompts, each answered with exactly ``--max-tokens`` tokens (temperature 0, end of
text forbidden, so every path generates the same lengths), by:

- llama.cpp's library (llama-cpp-python's ``Llama``), one after another: the ceiling of one
  sequence at a time on this machine;
- hpt's embedded server (llama-server, started as hpt starts it, ``--slots`` slots) with 1,
  4 and 8 calls in flight;
- llama-cpp-python's server (what served the embedded model before), 1 and 4 in flight,
  when its ``[server]`` extra is installed (``make bench`` installs it).

Tokens/s is completion tokens over wall time (prompt processing included, as a run pays it).
Every path waits at llama.cpp's thread barriers as hpt's server does (OMP_WAIT_POLICY=PASSIVE,
see hpt.backends.local); ``--spin`` makes every path spin there instead (ACTIVE).

    .venv/bin/python bench/embedded_concurrency.py [--prompts 16] [--max-tokens 128]
        [--in-flight 1,4,8] [--slots 8] [--no-before] [--spin]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.backends.local import LOCAL_MODEL_NAME, LocalServer, find_gguf  # noqa: E402

TOPICS = ("a lighthouse keeper", "the first rain on Mars", "a clockmaker's apprentice",
          "a lost library card", "two rival bakers", "a night train to the coast",
          "a robot learning to paint", "the last snow leopard", "a village without clocks",
          "a letter found in a wall", "the tide that did not return", "a chess match by post",
          "a garden on a rooftop", "an orchestra of one", "a map with a missing island",
          "the quietest city")  # fmt: skip
CORES = os.cpu_count() or 1


def prompts(n: int) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": f"Write a short story about {TOPICS[i % len(TOPICS)]}."}]
            for i in range(n)]  # fmt: skip


def library_rate(asks: list[list[dict[str, str]]], max_tokens: int) -> tuple[float, set[int]]:
    """Tokens/s of llama_cpp.Llama answering ``asks`` one after another, and the
    end-of-generation tokens it forbade."""
    from llama_cpp import Llama

    llm = Llama(str(find_gguf()), n_ctx=4096, n_threads=CORES, verbose=False)
    # Every end-of-generation token the chat template may stop on, forbidden.
    ends = {llm.token_eos(), *llm.tokenize(b"<|im_end|>", add_bos=False, special=True)}
    bias = {t: -1e9 for t in ends}
    llm.create_chat_completion(asks[0], max_tokens=8, temperature=0)  # warm-up
    started, tokens = time.perf_counter(), 0
    for ask in asks:
        out: Any = llm.create_chat_completion(
            ask, max_tokens=max_tokens, temperature=0, logit_bias=bias
        )
        got = out["usage"]["completion_tokens"]
        assert got == max_tokens, got
        tokens += got
    return tokens / (time.perf_counter() - started), ends


async def served_rate(
    url: str, asks: list[list[dict[str, str]]], max_tokens: int, in_flight: int, **extra: Any
) -> float:
    """Tokens/s of the server at ``url`` with ``in_flight`` calls at a time over ``asks``."""
    gate = asyncio.Semaphore(in_flight)

    async def one(client: httpx.AsyncClient, ask: list[dict[str, str]], n: int) -> int:
        async with gate:
            body = {"model": LOCAL_MODEL_NAME, "messages": ask, "max_tokens": n,
                    "temperature": 0, **extra}  # fmt: skip
            reply = await client.post(f"{url}/chat/completions", json=body)
            reply.raise_for_status()
            return int(reply.json()["usage"]["completion_tokens"])

    async with httpx.AsyncClient(timeout=600) as client:
        await one(client, asks[0], 8)  # warm-up
        started = time.perf_counter()
        counts = await asyncio.gather(*(one(client, a, max_tokens) for a in asks))
        wall = time.perf_counter() - started
    assert set(counts) == {max_tokens}, counts
    return sum(counts) / wall


@contextlib.asynccontextmanager
async def before_server() -> AsyncIterator[str]:
    """llama-cpp-python's server as hpt ran it before (one context of 8,192 tokens)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryFile() as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "llama_cpp.server", "--model", str(find_gguf()),
            "--model_alias", LOCAL_MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", "8192", "--n_threads", str(CORES), "--logits_all", "false",
            stdout=log, stderr=log,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}/v1"
        try:
            async with httpx.AsyncClient(timeout=2) as client:
                for _ in range(600):
                    if proc.returncode is not None:
                        log.seek(0)
                        raise SystemExit(f"llama_cpp.server exited: {log.read()[-500:]!r}")
                    with contextlib.suppress(httpx.HTTPError):
                        if (await client.get(f"{url}/models")).status_code == 200:
                            break
                    await asyncio.sleep(0.1)
            yield url
        finally:
            proc.terminate()
            await proc.wait()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--in-flight", default="1,4,8")
    ap.add_argument("--slots", type=int, default=8, help="the server's slots (hpt's default)")
    ap.add_argument("--no-before", action="store_true", help="skip llama_cpp.server")
    ap.add_argument("--spin", action="store_true", help="OMP_WAIT_POLICY=ACTIVE everywhere")
    args = ap.parse_args()
    # Read by libgomp when llama_cpp (or a server) loads it: set before either does.
    os.environ["OMP_WAIT_POLICY"] = "ACTIVE" if args.spin else "PASSIVE"
    asks, n = prompts(args.prompts), args.max_tokens
    levels = [int(x) for x in args.in_flight.split(",")]
    has_library = importlib.util.find_spec("llama_cpp") is not None
    print(f"SmolLM2-135M Q4_1, {len(asks)} prompts x {n} tokens, temperature 0, {CORES} threads, "
          f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}")  # fmt: skip
    rows: list[tuple[str, int, float]] = []
    ends: set[int] = set()
    if has_library:
        rate, ends = library_rate(asks, n)
        rows.append(("llama_cpp.Llama, one after another", 1, rate))
    server = LocalServer(args.slots)
    url = await server.start()
    try:
        for k in levels:
            rate = await served_rate(url, asks, n, k, ignore_eos=True)
            rows.append((f"llama-server, {server.slots} slots (hpt)", k, rate))
    finally:
        await server.stop()
    # llama-cpp-python's [server] extra: what its server imports beside the library.
    server_extra = ("uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")
    if (
        has_library
        and all(importlib.util.find_spec(m) for m in server_extra)
        and not args.no_before
    ):
        bias = {str(t): -1e9 for t in ends}  # llama_cpp.server takes no ignore_eos
        async with before_server() as before:
            for k in (1, 4):
                rate = await served_rate(before, asks, n, k, logit_bias=bias)
                rows.append(("llama_cpp.server (hpt before)", k, rate))
    base = rows[0][2] if has_library else None
    print(f"{'path':<40} {'in flight':>9} {'tok/s':>8} {'x library':>10}")
    for name, k, rate in rows:
        ratio = f"{rate / base:.2f}" if base else "-"
        print(f"{name:<40} {k:>9} {rate:>8.1f} {ratio:>10}")


if __name__ == "__main__":
    asyncio.run(main())
