"""What generated knowledge's logprob server costs on the embedded model.

``make run`` (``hpt run --dataset boolq --limit 10`` on SmolLM2) once per arrangement, each
with a fresh response cache so every call reaches a server:

- ``off``: ``HPT_LOCAL_LOGPROBS=off``, one llama.cpp server without ``logits_all``; no
  logprobs, so generated knowledge takes its first candidate (hpt before the logprob server).
- ``server``: the default, that server plus a second one with ``logits_all`` (started on
  the first call that asks for logprobs) for the three knowledge candidates.
- ``shared``: one server with ``logits_all`` for every call (measured to decide against it).

For each: wall time, CPU seconds of the whole process tree, peak resident memory of the
tree (the sum over the hpt process and its servers, sampled every 0.2 s, as RSS and as PSS,
which counts the GGUF pages both servers map once), and how generated knowledge chose.
Then the servers' start-up time, each kind started alone a few times.

    .venv/bin/python bench/gkp_cost.py [--limit 10] [--arrangements off,server] [--gen-seed 1]

``--gen-seed 1`` (the default here; ``make run`` has none) makes both arrangements generate
the same text, so they differ only in where the knowledge calls go and which one is kept.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.backends.local import LOGPROB_N_CTX, LOGPROBS_ENV, LocalServer  # noqa: E402

HPT = str(Path(sys.executable).parent / "hpt")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def _tree(root: int) -> list[int]:
    """``root`` and every descendant, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in kB; (0, 0) once it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            fields = dict(line.split()[:2] for line in f if line.endswith("kB\n"))
        return int(fields["Rss:"]), int(fields["Pss:"])
    except (OSError, KeyError, ValueError):
        return 0, 0


def _role(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return "gone"
    if b"-c" in argv[1:2]:
        return "logprob server"
    return "server" if b"llama_cpp.server" in argv else "hpt"


class TreeSampler(threading.Thread):
    """Peak summed RSS/PSS of a process tree, each role's own peak RSS, and the most
    processes seen in the tree at once."""

    def __init__(self, root: int, interval_s: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.root, self.interval_s = root, interval_s
        self.peak_rss_kb = self.peak_pss_kb = self.most_procs = 0
        self.peak_by_role_kb: dict[str, int] = {}
        self._roles: dict[int, str] = {}
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            pids = _tree(self.root)
            mems = [_memory_kb(p) for p in pids]
            self.peak_rss_kb = max(self.peak_rss_kb, sum(r for r, _ in mems))
            self.peak_pss_kb = max(self.peak_pss_kb, sum(p for _, p in mems))
            self.most_procs = max(self.most_procs, sum(1 for r, _ in mems if r))
            for pid, (rss, _) in zip(pids, mems, strict=True):
                role = self._roles.setdefault(pid, _role(pid))
                self.peak_by_role_kb[role] = max(self.peak_by_role_kb.get(role, 0), rss)
            self._done.wait(self.interval_s)

    def stop(self) -> None:
        self._done.set()
        self.join()


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_once(arrangement: str, args: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="hpt-gkp-") as tmp:
        env = {**os.environ, "HPT_CACHE_DIR": str(Path(tmp) / "cache"), LOGPROBS_ENV: arrangement}
        cmd = [HPT, "run", "--dataset", "boolq", "--limit", str(args.limit),
               "--out", str(Path(tmp) / "run")]  # fmt: skip
        if args.data_dir:
            cmd += ["--data-dir", args.data_dir]
        if args.gen_seed is not None:
            cmd += ["--gen-seed", str(args.gen_seed)]
        load_before = os.getloadavg()[0]
        cpu0, started = _children_cpu_s(), time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        _, err = proc.communicate()
        wall = time.perf_counter() - started
        sampler.stop()
        cpu = _children_cpu_s() - cpu0
        if proc.returncode != 0:
            raise SystemExit(f"{arrangement}: hpt run failed ({proc.returncode}):\n{err.decode()}")
        records = [json.loads(line) for line in (Path(tmp) / "run" / "samples.jsonl").open()]
    gkp = [a for r in records for a in r["attempts"] if a["strategy"] == "generated_knowledge"]
    knowledge = [c for a in gkp for c in a["calls"] if c["purpose"].startswith("knowledge")]
    return {
        "arrangement": arrangement,
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": sampler.peak_rss_kb / 1024,
        "peak_pss_mb": sampler.peak_pss_kb / 1024,
        "processes": sampler.most_procs,
        "peak_rss_mb_by_process": {
            k: round(v / 1024) for k, v in sampler.peak_by_role_kb.items() if k != "gone"
        },
        "gkp_attempts": len(gkp),
        "by_mean_token_prob": sum(
            "by mean token probability" in a["notes"].get("knowledge", "") for a in gkp
        ),
        "knowledge_calls": len(knowledge),
        "knowledge_tokens": sum(c["usage"]["completion_tokens"] for c in knowledge),
        "knowledge_call_s": sum(c["latency_s"] for c in knowledge),
        "hpi": sum(r["hpi_score"] or 0 for r in records) / max(1, len(records)),
        # The machine's 1-minute load average before and after: other work shares the cores.
        "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


async def startup_times(repeats: int) -> dict[str, list[float]]:
    kinds = {
        "fast (n_ctx 8192)": lambda: LocalServer(8192, logits_all=False),
        f"logprob (n_ctx {LOGPROB_N_CTX}, logits_all)": lambda: LocalServer(
            LOGPROB_N_CTX, logits_all=True
        ),
    }
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(repeats):
        for name, make in kinds.items():
            server = make()
            started = time.perf_counter()
            try:
                await server.start()
                times[name].append(time.perf_counter() - started)
            finally:
                await server.stop()
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--arrangements", default="off,server")
    ap.add_argument("--gen-seed", type=int, default=1)
    ap.add_argument("--startups", type=int, default=3)
    ap.add_argument(
        "--data-dir", default=os.environ.get("HPT_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    args = ap.parse_args()
    rows = [
        "| arrangement | wall s | CPU s | peak RSS MB | peak PSS MB | each process's peak RSS MB | "
        "GKP attempts | by mean token prob | knowledge calls | knowledge tokens | "
        "knowledge call s | HPI |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arrangement in args.arrangements.split(","):
        r = run_once(arrangement, args)
        print(json.dumps(r), flush=True)
        peaks = r["peak_rss_mb_by_process"]
        assert isinstance(peaks, dict)
        each = ", ".join(f"{k} {v}" for k, v in peaks.items())
        rows.append(
            f"| {arrangement} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['peak_rss_mb']:.0f} | "
            f"{r['peak_pss_mb']:.0f} | {each} | {r['gkp_attempts']} | "
            f"{r['by_mean_token_prob']} | {r['knowledge_calls']} | {r['knowledge_tokens']} | "
            f"{r['knowledge_call_s']:.1f} | {r['hpi']:.2f} |"
        )
    print("\n".join(rows))
    print("\n| server | start-up s (median) | runs |\n|---|---|---|")
    for name, times in asyncio.run(startup_times(args.startups)).items():
        shown = ", ".join(f"{t:.2f}" for t in times)
        print(f"| {name} | {statistics.median(times):.2f} | {shown} |")


if __name__ == "__main__":
    main()
