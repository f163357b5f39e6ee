"""``hpt judge-strategies``: strategy complexity scored by an LLM judge (HPT appendix C)."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console

from hpt.cli import signals
from hpt.cli.common import PlainTable, names, require_positive
from hpt.cli.options import (
    add_generation_options,
    add_model_options,
    merge_model_options,
    model_settings_only,
)
from hpt.errors import validation_message
from hpt.graphs import DEFAULT_LADDER, resolve_strategies
from hpt.orchestrator.config import ConfigError
from hpt.results.rundir import RunDirError
from hpt.tasks import TASKS, get_task


def add_parser(sub: Any) -> None:
    judge = sub.add_parser(
        "judge-strategies",
        help="score each strategy's complexity with an LLM judge (HPT appendix C)",
    )
    judge.add_argument("--model", default="local", help="model that answers (default local)")
    judge.add_argument("--judge-model", help="model that judges (default: --model)")
    add_model_options(judge)
    add_generation_options(judge)
    judge.add_argument(
        "--datasets", type=names, default=list(TASKS), help="comma-separated (default all)"
    )
    judge.add_argument("--strategies", type=names, default=list(DEFAULT_LADDER))
    judge.add_argument("--per-dataset", type=int, default=3, help="samples per dataset (3)")
    judge.add_argument("--seed", type=int, default=0)
    judge.add_argument("--concurrency", type=int, default=8)
    judge.add_argument("--data-dir", type=Path)
    judge.add_argument("--out", type=Path, help="output folder (default runs/judge-TIME)")


def command(args: argparse.Namespace, console: Console) -> int:
    from hpt.orchestrator.complexity import CRITERIA, JudgeSpec, run_judge

    for name in args.datasets:
        get_task(name)  # unknown names fail here, before any model starts
    resolve_strategies(args.strategies)
    require_positive(args, "per_dataset", "concurrency", "max_concurrency", "rpm", "tpm",
                     "max_attempts")  # fmt: skip
    out = args.out or Path("runs") / f"judge-{datetime.now():%Y%m%d-%H%M%S}"
    if out.exists() and any(out.iterdir()):
        raise RunDirError(f"{out} is not empty; choose another --out")
    settings = model_settings_only(merge_model_options(args))
    try:
        spec = JudgeSpec.model_validate({
            **settings, "model": args.model, "judge_model": args.judge_model,
            "datasets": args.datasets, "strategies": args.strategies,
            "per_dataset": args.per_dataset, "seed": args.seed, "concurrency": args.concurrency,
            "data_dir": args.data_dir, "out": out,
        })  # fmt: skip
    except ValidationError as exc:
        where = f"{args.config} or the command line" if args.config else "command line"
        raise ConfigError(validation_message(exc, where)) from None
    spec.resolve(spec.model)  # a bad model spec fails before any data is read
    if spec.judge_model:
        spec.resolve(spec.judge_model)
    summary = signals.run(run_judge(spec))
    table = PlainTable(title="Strategy complexity by LLM judge (mean 1-5)")
    table.add_column("strategy")
    for c in CRITERIA:
        table.add_column(summary.criteria[c], justify="right")
    table.add_column("judged / unparseable", justify="right")
    for strategy in args.strategies:
        means = summary.means.get(strategy)
        cells = [f"{means[c]:.2f}" for c in CRITERIA] if means else ["-"] * len(CRITERIA)
        counts = f"{summary.judged[strategy]} / {summary.unparseable[strategy]}"
        table.add_row(strategy, *cells, counts)
    console.print(table)
    console.print(
        f"records: {out / 'judgements.jsonl'}  chart: {out / 'judge_scores.svg'}",
        markup=False, soft_wrap=True,
    )  # fmt: skip
    return 0
