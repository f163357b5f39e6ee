"""The ``hpt`` command line."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError
from rich.console import Console
from rich.markup import escape

from hpt import __version__
from hpt.backends import (
    SPEC_HELP,
    BackendError,
    CacheError,
    GenerationParams,
    ResponseCache,
    RetryPolicy,
    UnknownModelSpecError,
    default_cache_path,
    load_dotenv_file,
    redact,
)
from hpt.graphs import (
    DEFAULT_LADDER,
    STRATEGIES,
    UnknownStrategyError,
    mermaid,
    resolve_strategies,
)
from hpt.orchestrator.config import ConfigError, load_run_config, validation_message
from hpt.orchestrator.metrics import Summary, summarize_cells
from hpt.orchestrator.progress import RichProgress, cells_table, print_table, summary_table
from hpt.orchestrator.runner import default_out_dir, load_saved_spec, run_evaluation
from hpt.orchestrator.spec import RunSpec
from hpt.orchestrator.store import SAMPLES, SUMMARY, RunDirError, read_records, require_run_dirs
from hpt.prompts import PromptError
from hpt.tasks import TASKS, DatasetError, UnknownTaskError, get_task


class PluginError(ImportError):
    pass


USER_ERRORS: tuple[type[Exception], ...] = (
    PluginError,
    BackendError,
    CacheError,
    ConfigError,
    DatasetError,
    PromptError,
    RunDirError,
    UnknownModelSpecError,
    UnknownStrategyError,
    UnknownTaskError,
)
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _strategies(value: str) -> list[str]:
    return [s.strip() for s in value.split(",") if s.strip()]


def _modes(value: str) -> list[str]:
    modes = _strategies(value)
    for mode in modes:
        if mode not in ("standard", "adaptive"):
            raise argparse.ArgumentTypeError(f"{mode!r}: choose standard or adaptive")
    return modes


def _floats(value: str) -> list[float]:
    try:
        return [float(v) for v in _strategies(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: expected numbers such as 0.15,0.2") from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hpt", description=__doc__)
    p.add_argument("--version", action="version", version=f"hpt {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="climb the HPF ladder over a dataset and report the HPI")
    # Defaults are None so that a value from --config shows through unless a flag is given.
    run.add_argument("--config", type=Path, help="run config (TOML or YAML): [run], [models.*]")
    run.add_argument(
        "--dataset",
        action="extend",
        type=_strategies,
        help=f"one or more of {', '.join(TASKS)} (repeat the flag or separate with commas)",
    )
    run.add_argument(
        "--model",
        action="append",
        help="local (default), openai:MODEL, anthropic:MODEL, tgi:URL[,URL...], hf:MODEL_ID "
        "or a model named in --config; repeat for several models",
    )
    run.add_argument("--base-url", help="the model's endpoint (default: the provider's own)")
    run.add_argument("--knowledge-model", help="model for generated knowledge (default: --model)")
    run.add_argument(
        "--mode",
        action="extend",
        type=_modes,
        help="standard: climb level by level (default); adaptive: a prompt-selector picks "
        "each level (HPT appendix E); standard,adaptive runs both",
    )
    run.add_argument("--selector-model", help="adaptive mode's prompt-selector (default: --model)")
    run.add_argument(
        "--share-completions",
        action="store_true",
        default=None,
        help="adaptive attempts reuse the standard ladder's cached completions "
        "(default: the two modes are independent samples)",
    )
    run.add_argument(
        "--extractor-model",
        help="a model that states each completion's final answer, read instead of the rule "
        "reader; both readings are recorded and their disagreement summarised",
    )
    run.add_argument(
        "--strategies", type=_strategies, help="comma-separated ladder, lowest level first"
    )
    run.add_argument("--limit", type=int, help="evaluate N samples (seeded choice)")
    run.add_argument("--seed", type=int, help="seed for choosing samples (default 0)")
    run.add_argument("--concurrency", type=int, help="samples in flight (default 8)")
    run.add_argument("--max-concurrency", type=int, help="cap on calls in flight per backend")
    run.add_argument("--rpm", type=int, help="cap on requests per minute per backend")
    run.add_argument("--tpm", type=int, help="cap on tokens per minute per backend")
    run.add_argument("--out", type=Path, help="run directory (default runs/DATASET-MODEL-TIME)")
    run.add_argument(
        "--data-dir",
        type=Path,
        help="offline data laid out like shared/data "
        "(default $HPT_DATA_DIR; unset: the Hugging Face hub)",
    )
    defaults = GenerationParams()
    run.add_argument("--temperature", type=float, help=f"default {defaults.temperature}")
    run.add_argument("--top-p", type=float, help=f"default {defaults.top_p}")
    run.add_argument("--max-tokens", type=int, help=f"default {defaults.max_tokens}")
    run.add_argument(
        "--repetition-penalty",
        type=float,
        help=f"multiplicative penalty where the provider has one; 1 disables "
        f"(default {defaults.repetition_penalty})",
    )
    run.add_argument("--gen-seed", type=int, help="sampling seed sent to the model")
    run.add_argument(
        "--samples-per-task",
        type=int,
        help="independent climbs per sample; reports unbiased pass@k for k <= N (default 1)",
    )
    run.add_argument(
        "--threshold",
        action="extend",
        type=_floats,
        help="iwslt/samsum: the score (0-1) that resolves a sample; several make one cell each "
        "(default: the paper's two, 0.15 and 0.20)",
    )
    run.add_argument(
        "--resume",
        type=Path,
        metavar="DIR",
        help="continue the run in DIR with its saved spec; finished samples are not repeated",
    )
    run.add_argument(
        "--keep-errors",
        action="store_true",
        help="with --resume: keep samples that ended in an error instead of running them again",
    )
    run.add_argument(
        "--max-attempts",
        type=int,
        help=f"tries per model call before the sample is recorded as an error "
        f"(default {RetryPolicy().max_attempts})",
    )
    run.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the response cache"
    )
    run.add_argument("--epoch", type=int, help="a new epoch bypasses cached answers (default 0)")
    run.add_argument("--no-progress", action="store_true", help="no live display")

    graph = sub.add_parser("graph", help="print the ladder's Mermaid diagram")
    graph.add_argument("--strategies", type=_strategies, default=list(DEFAULT_LADDER))
    graph.add_argument("--mode", choices=["standard", "adaptive"], default="standard")
    for command in (run, graph):
        command.add_argument(
            "--plugin",
            action="append",
            default=[],
            metavar="MODULE",
            help="import MODULE first (it may register strategies); repeatable",
        )

    judge = sub.add_parser(
        "judge-strategies",
        help="score each strategy's complexity with an LLM judge (HPT appendix C)",
    )
    judge.add_argument("--model", default="local", help="model that answers (default local)")
    judge.add_argument("--base-url", help="the answering model's endpoint")
    judge.add_argument("--judge-model", help="model that judges (default: --model)")
    judge.add_argument(
        "--datasets", type=_strategies, default=list(TASKS), help="comma-separated (default all)"
    )
    judge.add_argument("--strategies", type=_strategies, default=list(DEFAULT_LADDER))
    judge.add_argument("--per-dataset", type=int, default=3, help="samples per dataset (3)")
    judge.add_argument("--seed", type=int, default=0)
    judge.add_argument("--concurrency", type=int, default=8)
    judge.add_argument("--max-tokens", type=int, default=GenerationParams().max_tokens)
    judge.add_argument("--data-dir", type=Path)
    judge.add_argument("--out", type=Path, help="output folder (default runs/judge-TIME)")
    judge.add_argument("--no-cache", action="store_true")

    rep = sub.add_parser(
        "report",
        help="the paper's tables (Markdown, CSV) and plots (PNG, SVG) from run directories",
    )
    rep.add_argument("run_dirs", nargs="+", type=Path, metavar="DIR")
    rep.add_argument(
        "--out", type=Path, help="output folder (default DIR/report, or runs/report-TIME)"
    )
    rep.add_argument(
        "--prices",
        type=Path,
        help='TOML of USD per million tokens per model: ["openai:gpt-4o"] input = 2.5, output = 10',
    )
    rep.add_argument("--no-plots", action="store_true", help="tables only")

    view = sub.add_parser(
        "view", help="a self-contained HTML trace viewer of run directories (works offline)"
    )
    view.add_argument("run_dirs", nargs="+", type=Path, metavar="DIR")
    view.add_argument("--out", type=Path, help="HTML file (default DIR/view.html)")
    view.add_argument(
        "--serve", action="store_true", help="serve it on localhost instead of opening the file"
    )
    view.add_argument("--port", type=int, default=0, help="with --serve (default: any free port)")
    view.add_argument("--no-open", action="store_true", help="write the file, open nothing")

    summ = sub.add_parser("summarize", help="recompute a run's metrics from its records")
    summ.add_argument("run_dir", type=Path)

    sub.add_parser("list", help="list datasets and strategies")

    cache = sub.add_parser("cache", help="inspect or empty the response cache")
    cache.add_argument("action", choices=["stats", "clear"])
    cache.add_argument("--path", type=Path, help=f"cache file (default {default_cache_path()})")
    return p


_FLAGS = {  # CLI flag -> RunSpec field
    "dataset": "dataset",
    "model": "model",
    "base_url": "base_url",
    "knowledge_model": "knowledge_model",
    "mode": "mode",
    "selector_model": "selector_model",
    "extractor_model": "extractor_model",
    "share_completions": "share_completions",
    "strategies": "strategies",
    "limit": "limit",
    "seed": "seed",
    "concurrency": "concurrency",
    "max_concurrency": "max_concurrency",
    "rpm": "requests_per_minute",
    "tpm": "tokens_per_minute",
    "epoch": "epoch",
    "threshold": "threshold",
    "samples_per_task": "samples_per_task",
    "data_dir": "data_dir",
    "out": "out",
}
_PARAM_FLAGS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_tokens": "max_tokens",
    "repetition_penalty": "repetition_penalty",
    "gen_seed": "seed",
}


def _spec(args: argparse.Namespace) -> RunSpec:
    for flag in ("limit", "concurrency", "max_concurrency", "rpm", "tpm", "max_attempts",
                 "samples_per_task"):  # fmt: skip
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} must be at least 1")
    merged: dict[str, Any] = {}
    if args.config is not None:
        config = load_run_config(args.config)
        merged.update(config.run)
        merged["models"] = config.models
    for flag, key in _FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            merged[key] = value
    params = dict(merged.get("params") or {})
    for flag, key in _PARAM_FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            params[key] = value
    merged["params"] = params
    if args.max_attempts is not None:
        merged["retry"] = {**(merged.get("retry") or {}), "max_attempts": args.max_attempts}
    if args.no_cache:
        merged["cache"] = False
    if not merged.get("dataset"):
        raise ConfigError("say which dataset to run: --dataset NAME (or dataset in [run])")
    try:
        spec = RunSpec.model_validate(merged)
    except ValidationError as exc:
        where = f"{args.config} or the command line" if args.config else "command line"
        raise ConfigError(validation_message(exc, where)) from None
    spec.check_models()  # a bad model spec fails before any data is touched
    return spec.model_copy(update={"out": spec.out or default_out_dir(spec)})


# What may change when a run is resumed: how fast it goes, not what it computes.
_RESUME_FLAGS = {"concurrency", "max_concurrency", "rpm", "tpm", "max_attempts"}


def _resume_spec(args: argparse.Namespace) -> RunSpec:
    given = [
        f"--{flag.replace('_', '-')}"
        for flag in (*_FLAGS, *_PARAM_FLAGS, "config", "max_attempts")
        if getattr(args, flag) is not None and flag not in _RESUME_FLAGS
    ] + (["--no-cache"] if args.no_cache else [])
    if given:
        raise ConfigError(
            f"--resume continues the saved spec of {args.resume}; it cannot take "
            f"{', '.join(given)} (only --concurrency, --max-concurrency, --rpm, --tpm, "
            f"--max-attempts, --keep-errors, --no-progress)"
        )
    spec = load_saved_spec(args.resume).run_spec()
    update: dict[str, Any] = {"out": args.resume}
    for flag in ("concurrency", "max_concurrency", "rpm", "tpm"):
        if getattr(args, flag) is not None:
            update[_FLAGS[flag]] = getattr(args, flag)
    if args.max_attempts is not None:
        update["retry"] = (spec.retry or RetryPolicy()).model_copy(
            update={"max_attempts": args.max_attempts}
        )
    return spec.model_copy(update=update)


def _run(args: argparse.Namespace, console: Console, err: Console) -> int:
    if args.keep_errors and args.resume is None:
        raise ConfigError("--keep-errors applies only with --resume DIR")
    spec = _resume_spec(args) if args.resume is not None else _spec(args)
    assert spec.out is not None
    progress = None if args.no_progress or not console.is_terminal else RichProgress()
    try:
        result = asyncio.run(
            run_evaluation(
                spec,
                progress,
                resume=args.resume is not None,
                retry_errors=not args.keep_errors,
                command=["hpt", *sys.argv[1:]],
            )
        )
    except KeyboardInterrupt:
        if progress is not None:
            progress.stop()
        err.print(
            f"hpt: interrupted; finished samples are kept in {spec.out}. "
            f"Continue with: hpt run --resume {spec.out}",
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_INTERRUPTED
    finally:
        if progress is not None:
            progress.stop()
    if len(result.summaries) == 1:
        print_table(console, summary_table(result.summary, spec.strategies))
    else:
        print_table(console, cells_table(result.summaries))
    console.print(f"records: {result.out / SAMPLES}  summary: {result.out / SUMMARY}")
    console.print(f"report: hpt report {result.out}  traces: hpt view {result.out}")
    return 0


def _cache(args: argparse.Namespace, console: Console) -> int:
    async def act() -> str:
        cache = ResponseCache(args.path)
        try:
            if args.action == "clear":
                n = await cache.clear()
                return f"removed {n} cached responses from {cache.path}"
            st = await cache.stats()
        finally:
            await cache.aclose()
        lines = [
            f"cache: {st.path}",
            f"entries: {st.entries}  hits served: {st.hits}  size: {st.size_bytes / 1e6:.2f} MB",
        ]
        lines += [f"  {model}: {n}" for model, n in st.by_model.items()]
        return "\n".join(lines)

    console.print(asyncio.run(act()), highlight=False)
    return 0


def _judge(args: argparse.Namespace, console: Console) -> int:
    from datetime import datetime

    from rich.table import Table

    from hpt.orchestrator.judge import CRITERIA, JudgeSpec, run_judge

    for name in args.datasets:
        get_task(name)  # unknown names fail here, before any model starts
    resolve_strategies(args.strategies)
    if args.per_dataset < 1:
        raise ConfigError("--per-dataset must be at least 1")
    out = args.out or Path("runs") / f"judge-{datetime.now():%Y%m%d-%H%M%S}"
    if out.exists() and any(out.iterdir()):
        raise RunDirError(f"{out} is not empty; choose another --out")
    spec = JudgeSpec(
        model=args.model, base_url=args.base_url, judge_model=args.judge_model,
        datasets=args.datasets,
        strategies=args.strategies, per_dataset=args.per_dataset, seed=args.seed,
        concurrency=args.concurrency, params=GenerationParams(max_tokens=args.max_tokens),
        data_dir=args.data_dir, out=out, cache=not args.no_cache,
    )  # fmt: skip
    summary = asyncio.run(run_judge(spec))
    table = Table(title="Strategy complexity by LLM judge (mean 1-5)")
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
    console.print(f"records: {out / 'judgements.jsonl'}  chart: {out / 'judge_scores.svg'}")
    return 0


def _summarize(args: argparse.Namespace, console: Console) -> int:
    spec = load_saved_spec(args.run_dir)
    summaries = summarize_cells(read_records(args.run_dir))
    for summary in summaries:
        print_table(console, summary_table(summary, spec.strategies))
    print(TypeAdapter(list[Summary]).dump_json(summaries, indent=2).decode())
    return 0


def _report(args: argparse.Namespace, console: Console) -> int:
    from datetime import datetime

    from hpt.orchestrator import report

    prices = report.load_prices(args.prices) if args.prices else None
    require_run_dirs(*args.run_dirs)
    reports = report.collect(args.run_dirs, prices)
    if not reports:
        raise RunDirError(f"no records in {', '.join(map(str, args.run_dirs))}")
    out = args.out or (
        args.run_dirs[0] / "report"
        if len(args.run_dirs) == 1
        else Path("runs") / f"report-{datetime.now():%Y%m%d-%H%M%S}"
    )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"cannot write report folder {out}: {exc.strerror}") from None
    text = report.markdown(reports, args.run_dirs)
    (out / "report.md").write_text(text, encoding="utf-8")
    report.write_csv(reports, out / "cells.csv")
    written = [out / "report.md", out / "cells.csv"]
    if not args.no_plots:
        from hpt.orchestrator import plots

        written += plots.hpi_chart(reports, out) + plots.level_histograms(reports, out)
    print(text)
    console.print("wrote " + ", ".join(str(p) for p in written), highlight=False, soft_wrap=True)
    return 0


def _view(args: argparse.Namespace, console: Console) -> int:
    import webbrowser

    from hpt.orchestrator import viewer

    require_run_dirs(*args.run_dirs)
    out = args.out or args.run_dirs[0] / "view.html"
    try:
        n = viewer.write_view(args.run_dirs, out)
    except OSError as exc:
        raise RunDirError(f"cannot write {out}: {exc.strerror}") from None
    console.print(f"wrote {out} ({n} samples, {out.stat().st_size / 1e6:.1f} MB)", highlight=False)
    if args.serve:
        try:
            viewer.serve(out, args.port)
        except OSError as exc:
            raise RunDirError(f"cannot serve on port {args.port}: {exc.strerror}") from None
        except KeyboardInterrupt:
            return 0
    elif not args.no_open and not webbrowser.open(out.resolve().as_uri()):
        console.print("no browser to open it here; open the file in one", highlight=False)
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
    load_dotenv_file()
    try:
        for module in getattr(args, "plugin", []):
            _import_plugin(module)
        if args.command == "run":
            return _run(args, console, err)
        if args.command == "graph":
            print(mermaid(args.strategies, adaptive=args.mode == "adaptive"))
            return 0
        if args.command == "view":
            return _view(args, console)
        if args.command == "report":
            return _report(args, console)
        if args.command == "summarize":
            return _summarize(args, console)
        if args.command == "cache":
            return _cache(args, console)
        if args.command == "judge-strategies":
            return _judge(args, console)
        console.print("datasets:   " + ", ".join(f"{n} ({t.hub_id})" for n, t in TASKS.items()))
        console.print("strategies: " + ", ".join(STRATEGIES))
        console.print("models:     " + SPEC_HELP, markup=False)
        return 0
    except USER_ERRORS as exc:
        err.print(
            f"[red]hpt: error:[/] {escape(redact(str(exc)))}", highlight=False, soft_wrap=True
        )
        return EXIT_USAGE
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        err.print(f"[red]hpt: error:[/] {where}: {first['msg']}", highlight=False, soft_wrap=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.print("hpt: interrupted; finished samples are kept in the run directory")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
