"""The ``hpt`` command line."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from hpt import __version__
from hpt.backends import (
    BackendError,
    GenerationParams,
    RetryPolicy,
    UnknownModelSpecError,
    parse_model_spec,
)
from hpt.graphs import DEFAULT_LADDER, STRATEGIES, UnknownStrategyError, mermaid
from hpt.orchestrator.metrics import summarize
from hpt.orchestrator.progress import RichProgress, summary_table
from hpt.orchestrator.runner import run_evaluation
from hpt.orchestrator.spec import RunSpec
from hpt.orchestrator.store import SPEC, SUMMARY, RunDirError, read_records
from hpt.prompts import PromptError
from hpt.tasks import TASKS, DatasetError, UnknownTaskError


class PluginError(ImportError):
    pass


USER_ERRORS: tuple[type[Exception], ...] = (
    PluginError,
    BackendError,
    DatasetError,
    PromptError,
    RunDirError,
    UnknownModelSpecError,
    UnknownStrategyError,
    UnknownTaskError,
)
EXIT_USAGE = 2


def _strategies(value: str) -> list[str]:
    return [s.strip() for s in value.split(",") if s.strip()]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hpt", description=__doc__)
    p.add_argument("--version", action="version", version=f"hpt {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="climb the HPF ladder over a dataset and report the HPI")
    run.add_argument("--dataset", required=True, help=f"one of {', '.join(TASKS)}")
    run.add_argument("--model", default="local", help="local (default) or openai:MODEL")
    run.add_argument("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    run.add_argument("--knowledge-model", help="model for generated knowledge (default: --model)")
    run.add_argument(
        "--strategies",
        type=_strategies,
        default=list(DEFAULT_LADDER),
        help="comma-separated ladder, lowest level first",
    )
    run.add_argument("--limit", type=int, help="evaluate N samples (seeded choice)")
    run.add_argument("--seed", type=int, default=0, help="seed for choosing samples (default 0)")
    run.add_argument("--concurrency", type=int, default=8, help="samples in flight (default 8)")
    run.add_argument("--rpm", type=int, help="cap on requests per minute per backend")
    run.add_argument("--out", type=Path, help="run directory (default runs/DATASET-MODEL-TIME)")
    run.add_argument(
        "--data-dir",
        type=Path,
        help="offline data laid out like shared/data "
        "(default $HPT_DATA_DIR; unset: the Hugging Face hub)",
    )
    defaults = GenerationParams()
    run.add_argument("--temperature", type=float, default=defaults.temperature)
    run.add_argument("--top-p", type=float, default=defaults.top_p)
    run.add_argument("--max-tokens", type=int, default=defaults.max_tokens)
    run.add_argument(
        "--repetition-penalty",
        type=float,
        default=defaults.repetition_penalty,
        help="multiplicative penalty where the provider has one; 1 disables",
    )
    run.add_argument("--gen-seed", type=int, help="sampling seed sent to the model")
    run.add_argument(
        "--max-attempts",
        type=int,
        default=RetryPolicy().max_attempts,
        help="tries per model call before the sample is recorded as an error",
    )
    run.add_argument("--no-progress", action="store_true", help="no live display")

    graph = sub.add_parser("graph", help="print the ladder's Mermaid diagram")
    graph.add_argument("--strategies", type=_strategies, default=list(DEFAULT_LADDER))
    for command in (run, graph):
        command.add_argument(
            "--plugin",
            action="append",
            default=[],
            metavar="MODULE",
            help="import MODULE first (it may register strategies); repeatable",
        )

    summ = sub.add_parser("summarize", help="recompute a run's metrics from its records")
    summ.add_argument("run_dir", type=Path)

    sub.add_parser("list", help="list datasets and strategies")
    return p


def _spec(args: argparse.Namespace) -> RunSpec:
    if args.limit is not None and args.limit < 1:
        raise DatasetError("--limit must be at least 1")
    if args.concurrency < 1:
        raise DatasetError("--concurrency must be at least 1")
    parse_model_spec(args.model)  # fail on a bad spec before touching any data
    if args.knowledge_model:
        parse_model_spec(args.knowledge_model)
    return RunSpec(
        dataset=args.dataset,
        model=args.model,
        knowledge_model=args.knowledge_model,
        base_url=args.base_url,
        strategies=args.strategies,
        limit=args.limit,
        seed=args.seed,
        concurrency=args.concurrency,
        requests_per_minute=args.rpm,
        params=GenerationParams(
            temperature=args.temperature,
            top_p=args.top_p,
            max_tokens=args.max_tokens,
            repetition_penalty=args.repetition_penalty,
            seed=args.gen_seed,
        ),
        retry=RetryPolicy(max_attempts=args.max_attempts),
        data_dir=args.data_dir,
        out=args.out,
    )


def _run(args: argparse.Namespace, console: Console) -> int:
    spec = _spec(args)
    progress = None if args.no_progress or not console.is_terminal else RichProgress()
    try:
        result = asyncio.run(run_evaluation(spec, progress))
    finally:
        if progress is not None:
            progress.stop()
    console.print(summary_table(result.summary, spec.strategies))
    console.print(f"records: {result.out / 'samples.jsonl'}  summary: {result.out / SUMMARY}")
    return 0


def _summarize(args: argparse.Namespace, console: Console) -> int:
    try:
        spec = RunSpec.model_validate_json((args.run_dir / SPEC).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDirError(f"{args.run_dir} is not a run directory (no {SPEC})") from None
    records = list(read_records(args.run_dir))
    first = records[0] if records else None
    summary = summarize(
        records,
        dataset=spec.dataset,
        model=first.model if first else spec.model,
        mode="standard",
        m=len(spec.strategies),
        penalty=first.penalty if first else TASKS[spec.dataset].penalty,
    )
    console.print(summary_table(summary, spec.strategies))
    print(summary.model_dump_json(indent=2))
    return 0


def _import_plugin(module: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise PluginError(
            f"cannot import plugin {module!r} ({exc}); is it on PYTHONPATH or installed?"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console()
    err = Console(stderr=True)
    try:
        for module in getattr(args, "plugin", []):
            _import_plugin(module)
        if args.command == "run":
            return _run(args, console)
        if args.command == "graph":
            print(mermaid(args.strategies))
            return 0
        if args.command == "summarize":
            return _summarize(args, console)
        console.print("datasets:   " + ", ".join(f"{n} ({t.hub_id})" for n, t in TASKS.items()))
        console.print("strategies: " + ", ".join(STRATEGIES))
        return 0
    except USER_ERRORS as exc:
        err.print(f"[red]hpt: error:[/] {exc}", highlight=False, markup=True, soft_wrap=True)
        return EXIT_USAGE
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        err.print(f"[red]hpt: error:[/] {where}: {first['msg']}", highlight=False, soft_wrap=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.print("hpt: interrupted; finished samples are kept in the run directory")
        return 130


if __name__ == "__main__":
    sys.exit(main())
