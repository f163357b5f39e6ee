"""hpt against inspect-ai, side by side on the same machine and the same server.

Each evaluates the same 1,000 GSM8K questions with three model calls per sample against one
local OpenAI-compatible server that answers at once (bench/lean_server.py, its own process):
hpt climbs role -> zero-shot CoT -> three-shot CoT (the server's "The answer is True." never
parses as a number, so every sample takes all three levels); inspect-ai runs a solver of three
generate() calls. Both persist full traces: hpt its samples.jsonl (and response cache),
inspect its .eval log. Each tool runs in a fresh interpreter; the time is from the call that
starts the evaluation to its return, setup included.

    .venv/bin/python bench/vs_inspect.py [--samples 1000] [--concurrency 100]

Needs ``pip install -e '.[bench]'`` (inspect-ai); ``make bench`` does it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import lean_server  # noqa: E402

HPT_SIDE = r"""
import asyncio, json, resource, sys, time
from pathlib import Path
from hpt.orchestrator import RunSpec, run_evaluation
base_url, data_dir, out, n, conc = sys.argv[1:6]
spec = RunSpec(dataset="gsm8k", model="openai:bench-model", base_url=base_url,
               strategies=["role", "zero_shot_cot", "three_shot_cot"], limit=int(n),
               concurrency=int(conc), max_concurrency=int(conc), data_dir=Path(data_dir),
               out=Path(out))
t = time.perf_counter()
result = asyncio.run(run_evaluation(spec))
wall = time.perf_counter() - t
s = result.summary
assert s.samples == int(n) and s.calls == 3 * int(n) and s.errors == 0, s
size = (Path(out) / "samples.jsonl").stat().st_size
print(json.dumps({"wall_s": wall, "samples": s.samples, "calls": s.calls, "trace_bytes": size,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

INSPECT_SIDE = r"""
import json, resource, sys, time
from pathlib import Path
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate, user_message
base_url, data_dir, out, n, conc = sys.argv[1:6]
rows = [json.loads(line) for line in (Path(data_dir) / "gsm8k" / "test.jsonl").open()][: int(n)]
samples = [Sample(id=i, input=r["question"], target=r["answer"].split("####")[-1].strip())
           for i, r in enumerate(rows)]
task = Task(dataset=samples, scorer=match(numeric=True),
            solver=[generate(), user_message("Let's think step by step."), generate(),
                    user_message("Answer once more."), generate()])
t = time.perf_counter()
logs = inspect_eval(task, model="openai/bench-model", model_base_url=base_url,
                    model_args={"responses_api": False}, max_connections=int(conc),
                    max_samples=int(conc), log_dir=out, display="none", log_level="error")
wall = time.perf_counter() - t
log = logs[0]
assert log.status == "success", log.error
calls = sum(1 for s in log.samples for e in s.events if e.event == "model")
assert len(log.samples) == int(n) and calls == 3 * int(n), (len(log.samples), calls)
size = sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())
print(json.dumps({"wall_s": wall, "samples": len(log.samples), "calls": calls, "trace_bytes": size,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def side(code: str, args: list[str], env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=REPO)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"benchmark side failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument(
        "--data-dir", default=os.environ.get("HPT_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    args = ap.parse_args()
    results = {}
    with lean_server.running() as port, tempfile.TemporaryDirectory() as tmp:
        base_url = f"http://127.0.0.1:{port}/v1"
        env = {**os.environ, "OPENAI_API_KEY": "bench-key", "HPT_CACHE_DIR": f"{tmp}/cache"}
        env.pop("OPENAI_BASE_URL", None)
        common = [base_url, args.data_dir]
        tail = [str(args.samples), str(args.concurrency)]
        results["hpt"] = side(HPT_SIDE, [*common, f"{tmp}/hpt-run", *tail], env)
        results["inspect-ai"] = side(INSPECT_SIDE, [*common, f"{tmp}/inspect-logs", *tail], env)
    print(f"{args.samples} GSM8K samples x 3 calls, {args.concurrency} in flight, instant server")
    header = ("tool", "wall s", "samples/s", "calls/s", "traces MB", "peak RSS MB")
    print(f"{header[0]:<12}" + "".join(f"{h:>12}" for h in header[1:]))
    for name, r in results.items():
        print(f"{name:<12}{r['wall_s']:>12.2f}{r['samples'] / r['wall_s']:>12.1f}"
              f"{r['calls'] / r['wall_s']:>12.1f}{r['trace_bytes'] / 1e6:>12.1f}"
              f"{r['peak_rss_mb']:>12.0f}")  # fmt: skip
    ratio = results["inspect-ai"]["wall_s"] / results["hpt"]["wall_s"]
    print(f"hpt samples/s / inspect-ai samples/s = {ratio:.1f}x (target: at least 10x)")


if __name__ == "__main__":
    main()
