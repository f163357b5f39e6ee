"""Per-sample sandbox overhead for HumanEval, under bubblewrap and under the fallback (what
runs without it: a network namespace and the harness's checks): a trivial program run one at
a time (the cost of a fresh, confined interpreter and of the checker beside it), and all 164
canonical solutions with one run per core.

    .venv/bin/python bench/sandbox.py [--runs 50] [--isolation both|bubblewrap|fallback]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.tasks.humaneval import HumanEval  # noqa: E402
from hpt.tasks.sandbox import Sandbox, isolation  # noqa: E402


async def measure(bubblewrap: bool, runs: int, data_dir: Path) -> None:
    sandbox = Sandbox(bubblewrap=bubblewrap)
    await sandbox.run("pass")  # the one-off probe is not a program's cost
    times = []
    for _ in range(runs):
        result = await sandbox.run("pass")
        assert result.passed, result
        times.append(result.duration_s * 1000)
    p90 = sorted(times)[int(runs * 0.9)]
    print(
        f"{result.isolation}: trivial program, {runs} runs one at a time: "
        f"median {statistics.median(times):.1f} ms, p90 {p90:.1f} ms"
    )
    task = HumanEval(data_dir, sandbox=sandbox)
    samples = task._all()
    started = time.perf_counter()
    checks = await asyncio.gather(*(task.acheck(s, s.target) for s in samples))
    elapsed = time.perf_counter() - started
    failed = [s.id for s, c in zip(samples, checks, strict=True) if not c.resolved]
    print(f"{result.isolation}: {len(samples)} canonical solutions, {os.cpu_count()} at a time: "
          f"{len(samples) - len(failed)} passed in {elapsed:.2f} s = "
          f"{elapsed / len(samples) * 1000:.1f} ms per sample"
          + (f"; failed: {', '.join(failed)}" if failed else ""))  # fmt: skip


async def main(runs: int, data_dir: Path, which: str) -> None:
    if which in ("both", "bubblewrap"):
        if isolation()[0] == "bubblewrap":
            await measure(True, runs, data_dir)
        else:
            print("bubblewrap cannot run here: measuring the fallback only")
    if which in ("both", "fallback"):
        await measure(False, runs, data_dir)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--isolation", choices=["both", "bubblewrap", "fallback"], default="both")
    ap.add_argument(
        "--data-dir", default=os.environ.get("HPT_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    args = ap.parse_args()
    asyncio.run(main(args.runs, Path(args.data_dir), args.isolation))
