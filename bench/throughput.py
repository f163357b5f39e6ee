"""Throughput of the ladder against a local OpenAI-compatible server that answers instantly.

1,000 BoolQ samples, each resolved at level 3 (role -> zero-shot CoT -> three-shot CoT, so
three model calls per sample), 100 samples in flight. The server runs in its own process, so
this process's CPU time is hpt's alone: reported as CPU milliseconds per model call over the
ladder (start-up, data loading and backend set-up excluded, and reported apart).

    .venv/bin/python bench/throughput.py [--samples 1000] [--concurrency 100] [--delay 0]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.orchestrator import RunSpec, SilentObserver, run_evaluation  # noqa: E402
from hpt.tasks import get_task  # noqa: E402


def serve(data_dir: str, delay: float, ports: mp.Queue, stop: mp.Event) -> None:  # type: ignore[type-arg]
    from tests.servers.answer_key import KeyedResponder, boolq_answer_key
    from tests.servers.openai_compat import FakeOpenAI, ServerThread

    answers = boolq_answer_key(get_task("boolq", Path(data_dir)).load_samples())
    fake = FakeOpenAI(
        KeyedResponder(answers, "three_shot_cot"), delay_s=delay, record_requests=False
    )
    server = ServerThread(fake.app()).start()
    ports.put(server.port)
    stop.wait()
    server.stop()


class Clock(SilentObserver):
    """Notes when the ladder starts, after data loading and backend start-up."""

    t0 = 0.0

    cpu0 = 0.0

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        self.t0 = time.perf_counter()
        self.cpu0 = time.process_time()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--delay", type=float, default=0.0, help="server latency per call (s)")
    ap.add_argument(
        "--data-dir", default=os.environ.get("HPT_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    args = ap.parse_args()

    ports: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    stop = mp.Event()
    proc = mp.Process(target=serve, args=(args.data_dir, args.delay, ports, stop), daemon=True)
    proc.start()
    port = ports.get(timeout=60)
    os.environ["OPENAI_API_KEY"] = "test-key"
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        # A fresh response cache: every call is a miss that is also written, as in a new run.
        os.environ["HPT_CACHE_DIR"] = str(Path(tmp) / "cache")
        spec = RunSpec(
            dataset="boolq",
            model="openai:test-model",
            base_url=f"http://127.0.0.1:{port}/v1",
            limit=args.samples,
            concurrency=args.concurrency,
            data_dir=Path(args.data_dir),
            out=Path(tmp) / "run",
        )
        t_all = time.perf_counter()
        result = asyncio.run(run_evaluation(spec, clock))
        end, cpu_end = time.perf_counter(), time.process_time()
        records_bytes = (Path(tmp) / "run" / "samples.jsonl").stat().st_size
    stop.set()
    proc.join(timeout=10)
    s = result.summary
    ladder_s = end - clock.t0
    assert s.samples == args.samples and s.level_counts[3] == args.samples, s
    print(f"samples {s.samples}, calls {s.calls}, concurrency {args.concurrency}, ", end="")
    print(f"server delay {args.delay}s")
    print(f"ladder time {ladder_s:.2f}s (setup incl. data load {clock.t0 - t_all:.2f}s)")
    print(f"samples/s {s.samples / ladder_s:.1f}   model calls/s {s.calls / ladder_s:.1f}")
    print(f"records written: {records_bytes / 1e6:.1f} MB")
    ladder_cpu = cpu_end - clock.cpu0
    print(f"CPU per model call {1000 * ladder_cpu / s.calls:.2f} ms "
          f"(ladder CPU {ladder_cpu:.2f}s; start-up CPU {clock.cpu0:.2f}s, "
          f"{clock.t0 - t_all:.2f}s wall after imports)")  # fmt: skip


if __name__ == "__main__":
    main()
