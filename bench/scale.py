"""Memory at scale: a 50,000-sample run streams its records to disk in flat memory, and the
report and the trace viewer read the store incrementally.

The data is GSM8K's test questions repeated to N rows (its train split for exemplars), the
server bench/lean_server.py in its own process answering at once; each sample takes three
calls (role -> zero-shot CoT -> three-shot CoT). RSS is read from /proc every 5,000 records.

    .venv/bin/python bench/scale.py [--samples 50000]
"""

from __future__ import annotations

import argparse
import asyncio
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
    def __init__(self) -> None:
        self.samples = 0
        self.readings: list[tuple[int, float]] = []

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        self.readings.append((0, rss_mb()))

    def recorded(self, record: object, tally: object) -> None:
        self.samples += 1
        if self.samples % 5000 == 0:
            self.readings.append((self.samples, rss_mb()))


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
        "--data-dir", default=os.environ.get("HPT_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    args = ap.parse_args()
    with lean_server.running() as port, tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        make_data(Path(args.data_dir), data, args.samples)
        os.environ.update(OPENAI_API_KEY="bench-key", HPT_CACHE_DIR=f"{tmp}/cache")
        out = Path(tmp) / "run"
        spec = RunSpec(dataset="gsm8k", model="openai:bench-model",
                       base_url=f"http://127.0.0.1:{port}/v1",
                       strategies=["role", "zero_shot_cot", "three_shot_cot"],
                       concurrency=args.concurrency, max_concurrency=args.concurrency,
                       data_dir=data, out=out)  # fmt: skip
        memory = Memory()
        t = time.perf_counter()
        result = asyncio.run(run_evaluation(spec, memory))
        wall = time.perf_counter() - t
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        s = result.summary
        assert s.samples == args.samples and s.errors == 0, s
        size = (out / "samples.jsonl").stat().st_size
        print(f"run: {s.samples} samples, {s.calls} calls in {wall:.1f} s "
              f"({s.samples / wall:.1f} samples/s); records {size / 1e6:.0f} MB")  # fmt: skip
        print("RSS (MB) after N records: "
              + ", ".join(f"{n}: {mb:.0f}" for n, mb in memory.readings))  # fmt: skip
        print(f"run peak RSS: {peak:.0f} MB (data and exemplars loaded: {args.samples} rows)")
        r_wall, r_peak = peak_of(["report", str(out), "--out", f"{tmp}/report"])
        print(f"hpt report: {r_wall:.1f} s, peak RSS {r_peak:.0f} MB")
        v_wall, v_peak = peak_of(["view", str(out), "--no-open", "--out", f"{tmp}/view.html"])
        v_size = Path(f"{tmp}/view.html").stat().st_size
        print(f"hpt view: {v_wall:.1f} s, peak RSS {v_peak:.0f} MB, page {v_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
