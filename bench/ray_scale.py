"""Calls per second over Ray workers (``hpt run --ray --workers N``) against one process,
with a local server that answers at once (bench/lean_server.py, in its own process).

BoolQ's ladder with a fixed reply ("The answer is True."): a sample whose answer is True
resolves at level 1, the others climb all five levels (several calls at some). The same
samples run in one process, then over 1 and 2 Ray workers of a local Ray started once (its
start is reported apart); each run is timed from its first climb (observer.started: data
loaded, backends or workers open) to its end. Also: the driver's CPU per record (what
receiving, writing and counting a record costs it), and one Ray actor call's round trip
(what a rate limiter shared by every worker in one actor would add to each model call).

With ``--embedded``, the embedded model instead (``--model local``; one llama-server on
this node, which is one, shared by the workers, with a slot per sample in flight: a
worker's --concurrency each): samples/s of BoolQ's ladder at --max-tokens 128.

    .venv/bin/python bench/ray_scale.py [--samples 2000] [--concurrency 64] [--delay 0]
    .venv/bin/python bench/ray_scale.py --embedded [--samples 8] [--concurrency 4]
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

from bench.lean_server import running  # noqa: E402
from hpt.orchestrator import RunSpec, SilentObserver, ray_driver, run_evaluation  # noqa: E402


class Clock(SilentObserver):
    """When the climbs start, and the driver's CPU time then."""

    t0 = cpu0 = 0.0

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        self.t0, self.cpu0 = time.perf_counter(), time.process_time()


def run(spec: RunSpec) -> tuple[float, float, int, int]:
    """Wall seconds and driver CPU seconds of the climbs, samples and calls."""
    clock = Clock()
    result = asyncio.run(run_evaluation(spec, clock))
    wall, cpu = time.perf_counter() - clock.t0, time.process_time() - clock.cpu0
    assert result.complete
    return (
        wall,
        cpu,
        sum(s.samples for s in result.summaries),
        sum(s.calls for s in result.summaries),
    )


def round_trip_ms(ray: Any, n: int = 2000) -> float:
    """One call of an async actor's method that does nothing, awaited: milliseconds."""

    @ray.remote(num_cpus=0)
    class Nothing:
        async def take(self) -> None:
            return None

    actor = Nothing.remote()

    async def calls() -> float:
        await actor.take.remote()
        t = time.perf_counter()
        for _ in range(n):
            await actor.take.remote()
        return (time.perf_counter() - t) / n * 1000

    try:
        return asyncio.run(calls())
    finally:
        ray.kill(actor)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embedded", action="store_true", help="the embedded model, not a server")
    ap.add_argument("--samples", type=int, help="default 2000; 8 with --embedded")
    ap.add_argument("--concurrency", type=int, help="per process (default 64; 4 embedded)")
    ap.add_argument("--delay", type=float, default=0.0, help="server latency per call (s)")
    ap.add_argument("--workers", default="1,2", help="Ray worker counts to run")
    ap.add_argument("--backlog", type=float, default=ray_driver.BACKLOG)
    ap.add_argument("--chunk", type=float, default=ray_driver.CHUNK)
    ap.add_argument(
        "--data-dir", default=os.environ.get("HPT_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    args = ap.parse_args()
    args.samples = args.samples or (8 if args.embedded else 2000)
    args.concurrency = args.concurrency or (4 if args.embedded else 64)
    ray_driver.BACKLOG, ray_driver.CHUNK = args.backlog, args.chunk
    # Ray's workers read the environment Ray starts with.
    os.environ.update(OPENAI_API_KEY="test-key", RAY_USAGE_STATS_ENABLED="0")
    ray = ray_driver.import_ray()
    with running(args.delay) as port, tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")  # fmt: skip
        model = "the embedded model" if args.embedded else f"server delay {args.delay}s"
        print(f"Ray start {time.perf_counter() - t:.1f}s; {os.cpu_count()} CPUs; "
              f"{args.samples} BoolQ samples, --concurrency {args.concurrency} per process, "
              f"{model}; backlog {args.backlog}, chunk {args.chunk}")  # fmt: skip
        served = {"model": "openai:test-model", "base_url": f"http://127.0.0.1:{port}/v1"}
        embedded = {"model": "local", "params": {"max_tokens": 128}}

        def spec(name: str, **extra: Any) -> RunSpec:
            return RunSpec.model_validate(
                {"dataset": "boolq", "limit": args.samples, "concurrency": args.concurrency,
                 "cache": False, "data_dir": Path(args.data_dir), "out": Path(tmp) / name,
                 **(embedded if args.embedded else served), **extra}
            )  # fmt: skip

        runs = [("one process", spec("one"))] + [
            (f"Ray, {n} worker{'s' * (n > 1)}", spec(f"ray{n}", ray="", workers=n))
            for n in map(int, args.workers.split(","))
        ]
        base = None
        for name, s in runs:
            t = time.perf_counter()
            wall, cpu, samples, calls = run(s)
            whole = time.perf_counter() - t
            per_record = wall / samples * 1000
            base = base or per_record
            print(f"{name:>16}: {calls / wall:7.4g} calls/s, {samples / wall:6.4g} samples/s "
                  f"({calls} calls in {wall:.2f}s; {whole - wall:.1f}s to start and end); "
                  f"driver CPU {cpu / samples * 1000:.3f} ms a record; wall "
                  f"{per_record - base:+.3f} ms a record vs one process")  # fmt: skip
        print(f"Ray actor call round trip: {round_trip_ms(ray):.2f} ms")
        ray.shutdown()


if __name__ == "__main__":
    main()
