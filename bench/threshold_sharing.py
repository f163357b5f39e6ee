"""What a second threshold costs: SAMSum at one threshold (0.15) against the paper's two
(0.15 and 0.20) in one run, against a local scripted OpenAI-compatible server.

The server answers each request with words drawn at random from the prompt's dialogue (a new
draw each time a request is asked, as a sampling model gives; the n-th asking draws the same
in every run), after ``--delay`` seconds. Each configuration
runs with a fresh response cache, as a first run would. Printed per configuration: requests
the server answered, wall time, each cell's calls (and those not made: cached or shared),
and for two thresholds how many samples' level-1 replies are the same in both cells.

    .venv/bin/python bench/threshold_sharing.py [--samples 40] [--concurrency 8] [--delay 0.05]
                                                [--no-cache]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.orchestrator import RunSpec, run_evaluation  # noqa: E402


class Sampler:
    """A summary-like reply: a dozen words of the prompt's last lines, drawn afresh each time
    a request is asked, but the n-th asking of a request draws the same in every run (so
    configurations compare the same replies)."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()

    def __call__(self, body: dict[str, Any]) -> str:
        text = body["messages"][-1]["content"]
        identity = json.dumps(body["messages"])
        self.asked[identity] += 1
        rng = random.Random(f"{identity}#{self.asked[identity]}")
        words = " ".join(text.splitlines()[-12:]).split()
        picked = sorted(rng.sample(range(len(words)), min(12, len(words))))
        return "Summary: " + " ".join(words[i] for i in picked)


def serve(delay: float, ports: mp.Queue, stop: mp.Event, served: mp.Queue) -> None:  # type: ignore[type-arg]
    from tests.servers.openai_compat import FakeOpenAI, ServerThread

    fake = FakeOpenAI(Sampler(), delay_s=delay, record_requests=False)
    server = ServerThread(fake.app()).start()
    ports.put(server.port)
    stop.wait()
    served.put(fake.served)
    server.stop()


def same_first_replies(out: Path) -> tuple[int, int]:
    """Samples whose level-1 reply is the same in every threshold cell, of those recorded."""
    first: dict[str, set[str]] = {}
    for line in (out / "samples.jsonl").read_text().splitlines():
        record = json.loads(line)
        attempt = record["attempts"][0] if record["attempts"] else None
        text = attempt["completion"] if attempt else None
        first.setdefault(record["sample_id"], set()).add(str(text))
    return sum(len(t) == 1 for t in first.values()), len(first)


def run_once(args: argparse.Namespace, thresholds: list[float], tmp: Path) -> None:
    ports: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    served: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    stop = mp.Event()
    proc = mp.Process(target=serve, args=(args.delay, ports, stop, served), daemon=True)
    proc.start()
    port = ports.get(timeout=60)
    name = "+".join(f"{t:g}" for t in thresholds)
    os.environ["HPT_CACHE_DIR"] = str(tmp / f"cache-{name}")  # a fresh cache: a first run
    spec = RunSpec(
        dataset="samsum",
        model="openai:test-model",
        base_url=f"http://127.0.0.1:{port}/v1",
        threshold=thresholds,
        limit=args.samples,
        concurrency=args.concurrency,
        data_dir=Path(args.data_dir),
        out=tmp / f"run-{name}",
        cache=not args.no_cache,
    )
    started = time.perf_counter()
    result = asyncio.run(run_evaluation(spec))
    wall = time.perf_counter() - started
    stop.set()
    requests = served.get(timeout=30)
    proc.join(timeout=10)
    print(f"thresholds {name}: {requests} requests answered, wall {wall:.2f}s")
    for s in result.summaries:
        print(f"  @{s.threshold:g}: {s.samples} samples, hpi {s.hpi:.2f}, "
              f"calls {s.calls} (not made: {s.cached_calls})")  # fmt: skip
    if len(thresholds) > 1:
        same, total = same_first_replies(tmp / f"run-{name}")
        print(f"  level-1 reply the same in every cell: {same} of {total} samples")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--delay", type=float, default=0.05, help="server latency per call (s)")
    ap.add_argument("--no-cache", action="store_true", help="run without the response cache")
    ap.add_argument(
        "--data-dir", default=os.environ.get("HPT_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    args = ap.parse_args()
    os.environ["OPENAI_API_KEY"] = "test-key"
    print(f"SAMSum, {args.samples} samples, concurrency {args.concurrency}, "
          f"server delay {args.delay}s, cache {'off' if args.no_cache else 'on'}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for thresholds in ([0.15], [0.15, 0.2]):
            run_once(args, thresholds, Path(tmp))


if __name__ == "__main__":
    main()
