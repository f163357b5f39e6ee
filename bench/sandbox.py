"""Per-sample sandbox overhead for HumanEval: a trivial program run one at a time (the cost
of a fresh, confined interpreter), and all 164 canonical solutions with one run per core.

    .venv/bin/python bench/sandbox.py [--runs 50]
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

from hpt.tasks import get_task  # noqa: E402
from hpt.tasks.sandbox import Sandbox  # noqa: E402


async def main(runs: int, data_dir: Path) -> None:
    sandbox = Sandbox()
    times = []
    for _ in range(runs):
        result = await sandbox.run("pass")
        assert result.passed, result
        times.append(result.duration_s * 1000)
    p90 = sorted(times)[int(runs * 0.9)]
    print(
        f"trivial program, {runs} runs one at a time ({result.isolation}): "
        f"median {statistics.median(times):.1f} ms, p90 {p90:.1f} ms"
    )
    task = get_task("humaneval", data_dir)
    samples = task._all()
    started = time.perf_counter()
    checks = await asyncio.gather(*(task.acheck(s, s.target) for s in samples))
    elapsed = time.perf_counter() - started
    passed = sum(c.resolved for c in checks)
    print(f"164 canonical solutions, {os.cpu_count()} at a time: {passed} passed in "
          f"{elapsed:.2f} s = {elapsed / len(samples) * 1000:.1f} ms per sample")  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument(
        "--data-dir", default=os.environ.get("HPT_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    args = ap.parse_args()
    asyncio.run(main(args.runs, Path(args.data_dir)))
