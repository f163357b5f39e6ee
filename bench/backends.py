"""Backend throughput: calls/s through hpt's backend stack against a server that answers
after a fixed delay and takes 128 calls at once, as a share of the ideal 128 / delay.

Each call goes through everything a run uses: the response cache (on, every call a miss),
per-backend limits, retries and the provider's client. The server runs in its own process
(bench/lean_server.py) so the client has a core to itself. A second pass injects 5% faults
(429 "overloaded" and 500, half each) and reports how many calls completed and the slowdown.

    .venv/bin/python bench/backends.py [--providers openai,openai-sdk,tgi,anthropic]

"openai" is hpt's lean aiohttp client (the default for self-hosted OpenAI-compatible
servers), "openai-sdk" the official SDK (the default for api.openai.com).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import lean_server  # noqa: E402
from hpt.backends import (  # noqa: E402
    BackendError,
    GenerationParams,
    Message,
    ModelConfig,
    ResponseCache,
    model_config_from,
    open_backend,
)

CONCURRENCY = 128
DELAY = 0.2
STAGGER = True


def config(provider: str, port: int) -> ModelConfig:
    root = f"http://127.0.0.1:{port}"
    if provider in ("openai", "openai-sdk"):
        client = "sdk" if provider == "openai-sdk" else "aiohttp"
        return model_config_from({"provider": "openai", "model": "bench-model",
                                  "endpoints": [f"{root}/v1"], "max_concurrency": CONCURRENCY,
                                  "client": client})  # fmt: skip
    if provider == "anthropic":
        return model_config_from({"provider": "anthropic", "model": "bench-model",
                                  "endpoints": [root], "max_concurrency": CONCURRENCY})  # fmt: skip
    return model_config_from({"provider": "tgi", "endpoints": [f"{root}/tgi"], "api": "chat"})


async def drive(provider: str, port: int, calls: int, warmup: int) -> dict[str, Any]:
    os.environ.setdefault("OPENAI_API_KEY", "bench")
    os.environ.setdefault("ANTHROPIC_API_KEY", "bench")
    params = GenerationParams(max_tokens=64)
    cache = ResponseCache(Path(tempfile.mkdtemp()) / "responses.sqlite3")
    await cache.open()
    ok = failed = 0
    finished: list[float] = []
    async with open_backend(config(provider, port), label=provider, cache=cache) as backend:

        async def batch(start: int, n: int) -> None:
            nonlocal ok, failed
            todo = iter(range(start, start + n))

            async def worker(k: int) -> None:
                nonlocal ok, failed
                if STAGGER:  # start the workers spread over one server delay, as a run ramps up
                    await asyncio.sleep(k * DELAY / CONCURRENCY)
                for i in todo:
                    msg = [Message(role="user", content=f"Question {i}: is the sky blue? " * 8)]
                    try:
                        await backend.complete(msg, params, cache_seed=str(i))
                        ok += 1
                        finished.append(time.perf_counter())
                    except BackendError:
                        failed += 1

            await asyncio.gather(*(worker(k) for k in range(CONCURRENCY)))

        await batch(0, warmup)
        ok = failed = 0
        finished.clear()
        t0 = time.perf_counter()
        await batch(warmup, calls)
        elapsed = time.perf_counter() - t0
        stats = backend.stats
    await cache.aclose()
    # Steady state: the rate between the 10th and 90th percentile completions, which leaves
    # out the ramp-up and the last, partly empty round.
    lo, hi = finished[len(finished) // 10], finished[len(finished) * 9 // 10]
    steady = (len(finished) * 8 // 10) / (hi - lo)
    return {
        "ok": ok,
        "failed": failed,
        "elapsed": elapsed,
        "steady": steady,
        "retries": stats.retries,
        "rate_limited": stats.rate_limited,
        "cap": stats.concurrency,
    }


def measure(provider: str, delay: float, fault_rate: float, calls: int) -> dict[str, Any]:
    with lean_server.running(delay, fault_rate) as port:
        return asyncio.run(drive(provider, port, calls, warmup=2 * CONCURRENCY))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--providers",
        default="openai,openai-sdk,tgi,anthropic",
        help="openai (lean aiohttp client), openai-sdk, tgi, anthropic",
    )
    ap.add_argument("--calls", type=int, default=40 * CONCURRENCY)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--fault-rate", type=float, default=0.05)
    ap.add_argument(
        "--no-stagger",
        action="store_true",
        help="start all 128 workers at once (they then arrive in lock-step waves)",
    )
    args = ap.parse_args()
    global DELAY, STAGGER
    DELAY, STAGGER = args.delay, not args.no_stagger
    ideal = CONCURRENCY / args.delay
    print(f"server delay {args.delay * 1000:.0f} ms, {CONCURRENCY} concurrent: "
          f"ideal {ideal:.0f} calls/s; {args.calls} calls per pass")  # fmt: skip
    for provider in args.providers.split(","):
        clean = measure(provider, args.delay, 0.0, args.calls)
        rate = clean["steady"]
        print(
            f"{provider:9s} clean: {rate:6.1f} calls/s = {rate / ideal:6.1%} of ideal in steady "
            f"state; {clean['ok'] / clean['elapsed']:.1f} calls/s end to end "
            f"({clean['ok']} ok, {clean['failed']} failed, {clean['elapsed']:.2f} s)"
        )
        if args.fault_rate > 0:
            faulty = measure(provider, args.delay, args.fault_rate, args.calls)
            done = faulty["ok"] / args.calls
            slow = faulty["elapsed"] / clean["elapsed"]
            print(f"{provider:9s} {args.fault_rate:.0%} faults: completed {faulty['ok']}/"
                  f"{args.calls} = {done:.1%}, {faulty['failed']} failed, "
                  f"{faulty['retries']} retries ({faulty['rate_limited']} overloaded), "
                  f"{faulty['elapsed']:.2f} s = {slow:.2f}x the clean pass, "
                  f"final cap {faulty['cap']}")  # fmt: skip


if __name__ == "__main__":
    main()
