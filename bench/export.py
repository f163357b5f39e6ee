"""How long ``hpt export`` takes and how big its output is, per format, on a big run.

Builds a run of N synthetic records (two models, two datasets, both modes; every seventh
sample unresolved, one errored; prompts of a few hundred characters, one call per level), then
exports it to every format of ``hpt.exports.FORMATS``, each in a fresh process (so a format's
imports count, and one format's loaded libraries do not speed up the next), and prints a
table: seconds for the import of the format's libraries, seconds for the export itself, and
the size on disk. A format whose module or library is not installed is reported as such.
Nothing leaves the machine (no --push; W&B offline, MLflow's file store).

    .venv/bin/python bench/export.py [--samples 10000] [--formats inspect,hf]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.exports import FORMATS  # noqa: E402
from tests.run_fixtures import make_record, write_run  # noqa: E402

PASSAGE = "The passage says many things about the question at hand. " * 6
# Run in the child: import the format (timed), then export (timed); one JSON line back.
CHILD = """
import json, sys, time
from pathlib import Path
t = time.perf_counter()
from hpt.exports import ExportError, export, load_format
try:
    load_format(sys.argv[2])
except ExportError as exc:
    print(json.dumps({"missing": str(exc)}))
    sys.exit(0)
imported = time.perf_counter() - t
t = time.perf_counter()
done = export(Path(sys.argv[1]), sys.argv[2], out=Path(sys.argv[3]))
print(json.dumps({"import_s": imported, "export_s": time.perf_counter() - t,
                  "path": str(done.path), "samples": done.samples}))
"""


def build_run(directory: Path, samples: int) -> Path:
    records = []
    for i in range(samples):
        mode = "adaptive" if i % 5 == 0 else "standard"
        level = None if i % 7 == 0 else (i % 5) + 1
        records.append(make_record(
            f"s{i}", model="alpha" if i % 2 else "beta", dataset="boolq" if i % 3 else "csqa",
            mode=mode, level=level, iteration=1 if mode == "adaptive" and level else None,
            final=PASSAGE[: 40 + i % 200], tokens=(300, 60),
            error="HTTP 400: too long" if i == samples - 1 else None,
        ))  # fmt: skip
    for r in records:  # prompts of a realistic length: the passage before the question
        for a in r.attempts:
            for c in a.calls:
                c.messages[0].content = PASSAGE + c.messages[0].content
    return write_run(directory, records)


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--formats", default=",".join(FORMATS))
    args = ap.parse_args()
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "TQDM_DISABLE": "1", "PYTHONPATH": str(REPO)}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        run = build_run(Path(tmp) / "run", args.samples)
        built = time.perf_counter() - t
        jsonl = (run / "samples.jsonl").stat().st_size
        print(f"run: {args.samples:,} records, samples.jsonl {megabytes(jsonl)} "
              f"(built in {built:.1f} s)")  # fmt: skip
        print(f"{'format':<8} {'import s':>9} {'export s':>9} {'total s':>8} {'size':>10}  where")
        for fmt in args.formats.split(","):
            out = Path(tmp) / f"out-{fmt}"
            t = time.perf_counter()
            child = subprocess.run(
                [sys.executable, "-c", CHILD, str(run), fmt, str(out)],
                capture_output=True, text=True, env=env, cwd=tmp,
            )  # fmt: skip
            wall = time.perf_counter() - t
            lines = child.stdout.strip().splitlines()
            if child.returncode != 0 or not lines:
                tail = (child.stderr.strip().splitlines() or ["(no output)"])[-1]
                print(f"{fmt:<8} failed: {tail}")
                continue
            result = json.loads(lines[-1])
            if "missing" in result:
                print(f"{fmt:<8} not available: {result['missing']}")
                continue
            path = Path(result["path"])
            print(f"{fmt:<8} {result['import_s']:>9.2f} {result['export_s']:>9.2f} {wall:>8.2f} "
                  f"{megabytes(size(path)):>10}  {path.relative_to(tmp)} "
                  f"({result['samples']:,} samples)")  # fmt: skip


if __name__ == "__main__":
    main()
