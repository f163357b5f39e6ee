"""Memory at scale: a run streams its records to disk in flat memory (what grows with the run
is kept on disk or in compact arrays), and the report and the trace viewer read the store
incrementally.

The data is GSM8K's test questions repeated to N rows (its train split for exemplars), the
server bench/lean_server.py in its own process answering at once, never with GSM8K's answer:
each sample climbs the whole ladder, three calls by default (role -> zero-shot CoT ->
three-shot CoT), one with ``--strategies role``, which is what makes a million samples take
reasonable time on two cores. RSS is read from /proc every ``--every`` records (5,000, or a
twentieth of the run past 100,000 samples) and printed as a table, with the growth per
sample past the first reading (warm-up: connections, the cache's first pages) and what
loading the data and planning the run took before the first record.

    .venv/bin/python bench/scale.py [--samples 50000]
    .venv/bin/python bench/scale.py --samples 1000000 --strategies role --run-only
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import lean_server  # noqa: E402
from hpt.orchestrator import RunSpec, SilentObserver, run_evaluation  # noqa: E402


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Memory(SilentObserver):
    """RSS (MB), the Python heap's live blocks and seconds since the start, at the start and
    every ``every`` records, printed as a table row as each is read (a long run shows its
    readings as it goes). The blocks (every object and buffer Python allocated and has not
    freed) say what RSS cannot: loading the data frees more than the run then holds, and the
    allocator reuses that memory before RSS grows."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.samples = 0
        self.t0 = 0.0
        self.readings: list[tuple[int, float, int, float]] = []

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        self.t0 = time.perf_counter()
        print("| records | RSS (MB) | since start (MB) | live blocks | since start | s |")
        print("|---:|---:|---:|---:|---:|---:|")
        self.read()

    def recorded(self, record: object, tally: object) -> None:
        self.samples += 1
        if self.samples % self.every == 0:
            self.read()

    def read(self) -> None:
        gc.collect()  # cyclic garbage waiting for the collector is not held state
        n, mb, blocks = self.samples, rss_mb(), sys.getallocatedblocks()
        at = time.perf_counter() - self.t0
        self.readings.append((n, mb, blocks, at))
        _, mb0, blocks0, _ = self.readings[0]
        print(f"| {n:,} | {mb:.0f} | {mb - mb0:+.0f} | {blocks:,} | {blocks - blocks0:+,} "
              f"| {at:.0f} |", flush=True)  # fmt: skip

    def growth(self) -> tuple[float, float] | None:
        """Bytes of RSS and live blocks per record, from the first reading after the start
        (past warm-up) to the last."""
        if len(self.readings) < 3:
            return None
        (n0, mb0, b0, _), (n1, mb1, b1, _) = self.readings[1], self.readings[-1]
        return (mb1 - mb0) * 2**20 / (n1 - n0), (b1 - b0) / (n1 - n0)


def make_data(src: Path, dst: Path, n: int) -> None:
    (dst / "gsm8k").mkdir(parents=True)
    shutil.copy(src / "gsm8k" / "train.jsonl", dst / "gsm8k" / "train.jsonl")
    rows = (src / "gsm8k" / "test.jsonl").read_text().splitlines()
    with (dst / "gsm8k" / "test.jsonl").open("w") as fh:
        for i in range(n):
            row = json.loads(rows[i % len(rows)])
            row["question"] = f"(variant {i}) " + row["question"]
            fh.write(json.dumps(row) + "\n")


def peak_of(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of an hpt command in a child process. The peak is the
    child's VmHWM: ru_maxrss would carry over this (forked) process's own peak."""
    code = (
        "import sys, time; from pathlib import Path; from hpt.cli.main import main; "
        "t = time.perf_counter(); rc = main(sys.argv[1:]); "
        "hwm = [l for l in Path('/proc/self/status').read_text().splitlines() "
        "if l.startswith('VmHWM:')][0].split()[1]; "
        "print('@@', time.perf_counter() - t, int(hwm) / 1024); sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    line = next(x for x in done.stdout.splitlines() if x.startswith("@@"))
    _, wall, peak = line.split()
    return float(wall), float(peak)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=50_000)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument(
        "--strategies",
        default="role,zero_shot_cot,three_shot_cot",
        help="the ladder, comma-separated: its length is the calls per sample",
    )
    ap.add_argument(
        "--every",
        type=int,
        default=0,
        help="records between RSS readings (default: 5,000, or samples / 20)",
    )
    ap.add_argument("--no-cache", action="store_true", help="without hpt's response cache")
    ap.add_argument("--run-only", action="store_true",
                    help="skip timing hpt report and hpt view over the run")  # fmt: skip
    ap.add_argument(
        "--data-dir", default=os.environ.get("HPT_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    args = ap.parse_args()
    every = args.every or (5000 if args.samples <= 100_000 else args.samples // 20)
    with lean_server.running() as port, tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        make_data(Path(args.data_dir), data, args.samples)
        data_mb = (data / "gsm8k" / "test.jsonl").stat().st_size / 1e6
        os.environ.update(OPENAI_API_KEY="bench-key", HPT_CACHE_DIR=f"{tmp}/cache")
        out = Path(tmp) / "run"
        spec = RunSpec(dataset="gsm8k", model="openai:bench-model",
                       base_url=f"http://127.0.0.1:{port}/v1",
                       strategies=args.strategies.split(","), cache=not args.no_cache,
                       concurrency=args.concurrency, max_concurrency=args.concurrency,
                       data_dir=data, out=out)  # fmt: skip
        memory = Memory(every)
        before = rss_mb()
        t = time.perf_counter()
        result = asyncio.run(run_evaluation(spec, memory))
        wall = time.perf_counter() - t
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        s = result.summary
        assert s.samples == args.samples and s.errors == 0, s
        size = (out / "samples.jsonl").stat().st_size
        print(f"run: {s.samples} samples, {s.calls} calls in {wall:.1f} s "
              f"({s.samples / wall:.1f} samples/s); records {size / 1e6:.0f} MB")  # fmt: skip
        print(f"RSS before the run {before:.0f} MB; at its start {memory.readings[0][1]:.0f} "
              f"MB: the data loaded ({args.samples:,} rows, {data_mb:.0f} MB of JSON lines, "
              "and the exemplars) and the run planned")  # fmt: skip
        growth = memory.growth()
        if growth is not None:
            print(f"growth a sample past the first reading: {growth[0]:.0f} bytes of RSS, "
                  f"{growth[1]:.3f} live blocks")  # fmt: skip
        print(f"run peak RSS: {peak:.0f} MB")
        if args.run_only:
            return
        r_wall, r_peak = peak_of(["report", str(out), "--out", f"{tmp}/report"])
        print(f"hpt report: {r_wall:.1f} s, peak RSS {r_peak:.0f} MB")
        v_wall, v_peak = peak_of(["view", str(out), "--no-open", "--out", f"{tmp}/view.html"])
        v_size = Path(f"{tmp}/view.html").stat().st_size
        print(f"hpt view: {v_wall:.1f} s, peak RSS {v_peak:.0f} MB, page {v_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
