"""The paper's table on the embedded model: `hpt run` on N samples of each of the seven
datasets, standard and adaptive HPF, with HPI, accuracy and each dataset's own score.

    .venv/bin/python bench/embedded_table.py [--limit 10] [--max-tokens 256] [--out runs/table]

Runs are cached like any other, so a rerun only pays for what changed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.backends import GenerationParams  # noqa: E402
from hpt.orchestrator import RunSpec, RunSummary, run_evaluation  # noqa: E402

DATASETS = ("mmlu", "gsm8k", "humaneval", "boolq", "csqa", "iwslt", "samsum")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--modes", default="standard,adaptive")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "embedded-table")
    ap.add_argument(
        "--data-dir", default=os.environ.get("HPT_DATA_DIR", str(REPO.parent / "shared" / "data"))
    )
    args = ap.parse_args()
    rows = ["| dataset | mode | HPI | accuracy | level-1 acc. | text score | calls | errors | "
            "hallucinations | wall s |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for dataset in args.datasets.split(","):
        for mode in args.modes.split(","):
            out = args.out / f"{dataset}-{mode}"
            done = None
            if (out / "summary.json").exists():
                saved = RunSummary.model_validate_json((out / "summary.json").read_text())
                done = saved.cells[0] if saved.complete else None
            if done is not None:  # an earlier invocation finished this one
                s, wall = done, float("nan")
            else:  # new, or interrupted: resume it (the cache makes repeated calls cheap)
                params = GenerationParams(max_tokens=args.max_tokens, seed=1)
                spec = RunSpec(dataset=dataset, model="local", mode=mode, limit=args.limit,
                               concurrency=2, data_dir=Path(args.data_dir), out=out,
                               params=params)  # fmt: skip
                started = time.perf_counter()
                resume = (out / "run.json").exists()
                s = asyncio.run(run_evaluation(spec, resume=resume)).summary
                wall = time.perf_counter() - started

            def f(v: float | None) -> str:
                return "-" if v is None else f"{v:.3f}"

            text = f"{s.text_metric} {f(s.text_score)}" if s.text_metric else "-"
            halluc = f"{s.hallucinations}/{s.selector_turns}" if mode == "adaptive" else "-"
            rows.append(f"| {dataset} | {mode} | {f(s.hpi)} | {f(s.accuracy)} | "
                        f"{f(s.level1_accuracy)} | {text} | {s.calls} | {s.errors} | {halluc} | "
                        f"{wall:.0f} |")  # fmt: skip
            print(rows[-1], flush=True)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
