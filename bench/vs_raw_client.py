"""hpt's ladder against a bare aiohttp client: calls/s with 128 calls in flight, each answered
after 200 ms by the same local server (bench/lean_server.py, its own process).

The ideal is 128 / 0.2 = 640 calls/s. The bare client posts the same chat request 3,000 times
through one aiohttp session from 128 workers, and does nothing else. hpt climbs 1,000 GSM8K
samples through three levels (3,000 calls) with 128 samples in flight, writing its full
records and response cache. Each side runs in a fresh interpreter; calls/s is over the calls
themselves: the bare client from its first post to its last reply, hpt from the start of its
climb to its last record on disk (closing the run afterwards is timed and shown apart).

hpt starts its workers START_PACE_S apart (hpt/orchestrator/scheduling.py); the bare client is
run twice, starting all its workers at once (the target's reference) and paced like hpt, so
the share of the gain that is pacing rather than hpt's own CPU shows.

    .venv/bin/python bench/vs_raw_client.py [--calls 3000] [--delay 0.2] [--concurrency 128]
                                            [--raw-cpu-ms 0]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import lean_server  # noqa: E402
from bench.vs_inspect import side  # noqa: E402
from hpt.orchestrator.scheduling import START_PACE_S  # noqa: E402

RAW_SIDE = r"""
import asyncio, json, sys, time
import aiohttp
base_url, n, conc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
burn, pace = float(sys.argv[4]), float(sys.argv[5])
body = json.dumps({"model": "bench-model", "messages": [{"role": "user", "content": "Q?"}],
                   "temperature": 0.6, "max_tokens": 256}).encode()
async def main():
    left = [n]
    connector = aiohttp.TCPConnector(limit=conc)
    async with aiohttp.ClientSession(connector=connector, headers={
            "Content-Type": "application/json", "Authorization": "Bearer bench-key"}) as s:
        async def worker(i):
            await asyncio.sleep(i * pace)
            while left[0] > 0:
                left[0] -= 1
                async with s.post(f"{base_url}/chat/completions", data=body) as r:
                    json.loads(await r.read())
                end = time.perf_counter() + burn  # --raw-cpu-ms: a client that works too
                while time.perf_counter() < end:
                    pass
        t = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(conc)))
        return time.perf_counter() - t
wall = asyncio.run(main())
print(json.dumps({"calls": n, "wall_s": wall}))
"""

HPT_SIDE = r"""
import asyncio, json, sys, time
from pathlib import Path
from hpt.orchestrator import RunSpec, run_evaluation, SilentObserver
base_url, data_dir, out, n, conc = sys.argv[1:6]
class Clock(SilentObserver):
    t0 = t1 = 0.0
    def started(self, spec, total, out, done=0):
        self.t0 = time.perf_counter()
    def recorded(self, record, tally):
        self.t1 = time.perf_counter()
clock = Clock()
spec = RunSpec(dataset="gsm8k", model="openai:bench-model", base_url=base_url,
               strategies=["role", "zero_shot_cot", "three_shot_cot"], limit=int(n),
               concurrency=int(conc), max_concurrency=int(conc), data_dir=Path(data_dir),
               out=Path(out))
result = asyncio.run(run_evaluation(spec, clock))
teardown = time.perf_counter() - clock.t1
s = result.summary
assert s.samples == int(n) and s.calls == 3 * int(n) and s.errors == 0, s
print(json.dumps({"calls": s.calls, "wall_s": clock.t1 - clock.t0, "teardown_s": teardown}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument(
        "--raw-cpu-ms",
        type=float,
        default=0.0,
        help="CPU the bare client burns after each reply: how calls/s falls as a client's "
        "own work per call grows (hpt's is ~0.2 ms above the bare client's)",
    )
    ap.add_argument(
        "--data-dir", default=os.environ.get("HPT_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    args = ap.parse_args()
    samples = args.calls // 3
    with lean_server.running(delay=args.delay) as port, tempfile.TemporaryDirectory() as tmp:
        base_url = f"http://127.0.0.1:{port}/v1"
        env = {**os.environ, "OPENAI_API_KEY": "bench-key", "HPT_CACHE_DIR": f"{tmp}/cache"}
        env.pop("OPENAI_BASE_URL", None)
        raw_args = [base_url, str(samples * 3), str(args.concurrency), str(args.raw_cpu_ms / 1000)]
        raw = side(RAW_SIDE, [*raw_args, "0"], env)
        paced = side(RAW_SIDE, [*raw_args, str(START_PACE_S)], env)
        hpt = side(HPT_SIDE, [base_url, args.data_dir, f"{tmp}/run", str(samples),
                              str(args.concurrency)], env)  # fmt: skip
    ideal = args.concurrency / args.delay
    print(f"{samples * 3} calls, {args.concurrency} in flight, server answers after "
          f"{args.delay * 1000:.0f} ms (ideal {ideal:.0f} calls/s)")  # fmt: skip
    rates = {}
    pace = f"bare, paced {START_PACE_S * 1000:g} ms"
    for name, r in (("bare aiohttp", raw), (pace, paced), ("hpt ladder", hpt)):
        rates[name] = r["calls"] / r["wall_s"]
        print(f"{name:20s} {rates[name]:7.1f} calls/s  ({rates[name] / ideal:.1%} of ideal)")
    print(f"hpt after its last record (summary, cache, connections): {hpt['teardown_s']:.3f} s")
    print(f"hpt / bare client paced alike = {rates['hpt ladder'] / rates[pace]:.3f}")
    ratio = rates["hpt ladder"] / rates["bare aiohttp"]
    print(f"hpt calls/s / bare client calls/s = {ratio:.3f} (target: at least 0.95)")


if __name__ == "__main__":
    main()
