"""``hpt run``: climb the ladder over datasets x models x modes, or resume a run."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console

from hpt.backends import FatalBackendError, RetryPolicy
from hpt.cli import signals
from hpt.cli.common import (
    EXIT_BUDGET,
    EXIT_INTERRUPTED,
    PlainTable,
    floats,
    modes,
    names,
    positive_number,
    require_positive,
)
from hpt.cli.options import (
    MODEL_FLAGS,
    add_generation_options,
    add_model_options,
    given_model_flags,
    merge_model_options,
)
from hpt.cli.penalty import (
    PenaltyNotices,
    add_penalty_options,
    apply_penalty_flags,
    given_penalty_flags,
)
from hpt.cli.progress import (
    RichProgress,
    print_cells,
    print_table,
    summary_table,
    truncation_warning,
)
from hpt.errors import validation_message
from hpt.orchestrator.budget import spend_text, usd_text
from hpt.orchestrator.config import ConfigError
from hpt.orchestrator.estimate import ESTIMATE_MIN, CellEstimate, Estimate
from hpt.orchestrator.planning import default_out_dir
from hpt.orchestrator.resume import load_saved_plugins, load_saved_spec
from hpt.orchestrator.runner import RunResult, run_evaluation
from hpt.orchestrator.spec import (
    BATCH_POLL_S,
    BATCH_SIZE,
    BATCH_WAIT_S,
    REASONING_DIMENSIONS,
    SHORTHANDS,
    RunSpec,
    Shard,
    evaluated,
    set_task_arg,
    with_shorthands,
)
from hpt.plugins import load_plugins
from hpt.results.rundir import SAMPLES, SPEC, SUMMARY
from hpt.tasks import TASKS
from hpt.tasks.depthqa.answering import DEPTH_MODES
from hpt.tasks.depthqa.task import DepthQAArgs
from hpt.types import REASONING_EFFORTS

# CLI flag -> RunSpec field, beyond the model and generation options
RUN_FLAGS = {
    "dataset": "dataset",
    "model": "model",
    "knowledge_model": "knowledge_model",
    "mode": "mode",
    "selector_model": "selector_model",
    "extractor_model": "extractor_model",
    "share_completions": "share_completions",
    "strategies": "strategies",
    "limit": "limit",
    "seed": "seed",
    "concurrency": "concurrency",
    "epoch": "epoch",
    "threshold": "threshold",
    "reasoning_effort": "reasoning_effort",
    "thinking_budget": "thinking_budget",
    "samples_per_task": "samples_per_task",
    "judge_model": "judge_model",
    "prompt_model": "prompt_model",
    "data_dir": "data_dir",
    "out": "out",
    "batch": "batch",
    "batch_size": "batch_size",
    "batch_wait": "batch_wait_s",
    "batch_poll": "batch_poll_s",
    "budget_usd": "budget_usd",
    "max_calls": "max_calls",
    "prices": "prices_file",
    "ray": "ray",
    "workers": "workers",
}
# What may change when a run is resumed: how fast it goes and what it may spend, not what
# it computes; and --base-url, to give again the credentials an endpoint's URL had (run.json
# keeps none).
RESUME_FLAGS = {"concurrency", "max_concurrency", "rpm", "tpm", "max_attempts", "base_url",
                "budget_usd", "max_calls", "batch_poll", "ray", "workers"}  # fmt: skip
# Flags of batch mode's pacing: only with --batch.
BATCH_FLAGS = ("batch_size", "batch_wait", "batch_poll")


def depth_modes(value: str) -> list[str]:
    """--depth-mode's names, as DepthQA's ``mode`` argument reads them (multi_turn too)."""
    chosen: list[str] = []
    for mode in names(value):
        try:
            chosen += DepthQAArgs.model_validate({"mode": mode}).mode
        except ValidationError:
            raise argparse.ArgumentTypeError(
                f"{mode!r}: choose from {', '.join(DEPTH_MODES)}"
            ) from None
    return chosen


def efforts(value: str) -> list[str]:
    """--reasoning-effort's names: ``low,medium,high``."""
    chosen = names(value)
    for effort in chosen:
        if effort not in REASONING_EFFORTS:
            raise argparse.ArgumentTypeError(
                f"{effort!r}: choose from {', '.join(REASONING_EFFORTS)}"
            )
    return chosen


def budgets(value: str) -> list[int]:
    """--thinking-budget's token counts: ``1024,4096``."""
    try:
        chosen = [int(v) for v in names(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r}: expected token counts such as 1024,4096"
        ) from None
    if any(n < 0 for n in chosen):
        raise argparse.ArgumentTypeError(f"{value!r}: a budget is 0 (no thinking) or more tokens")
    return chosen


def dotted_arg(owner: str) -> Any:
    """The type of a ``OWNER.FIELD=VALUE`` flag; VALUE is read as JSON when it parses (7,
    true, [1, 2]), else as text."""

    def parse(value: str) -> tuple[str, str, Any]:
        key, sep, raw = value.partition("=")
        name, dot, field = key.strip().partition(".")
        if not sep or not dot or not name or not field:
            raise argparse.ArgumentTypeError(f"{value!r}: expected {owner}.FIELD=VALUE")
        try:
            parsed: Any = json.loads(raw)
        except json.JSONDecodeError:
            parsed = raw
        return name, field.strip(), parsed

    return parse


def program_arg(value: str) -> tuple[str, Path]:
    """``STRATEGY=FILE`` or ``STRATEGY:DATASET=FILE``: a saved DSPy program."""
    key, sep, raw = value.partition("=")
    if not sep or not key.strip() or not raw.strip():
        raise argparse.ArgumentTypeError(
            f"{value!r}: expected STRATEGY=FILE or STRATEGY:DATASET=FILE"
        )
    return key.strip(), Path(raw.strip()).expanduser().resolve()


def add_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="climb the HPF ladder over a dataset and report the HPI")
    run.add_argument(
        "--dataset",
        action="extend",
        type=names,
        help=f"one or more of {', '.join(TASKS)} (repeat the flag or separate with commas)",
    )
    run.add_argument(
        "--model",
        action="append",
        help="local (default), openai:MODEL, anthropic:MODEL, tgi:URL[,URL...], hf:MODEL_ID "
        "or a model named in --config; repeat for several models",
    )
    add_model_options(run)
    run.add_argument("--knowledge-model", help="model for generated knowledge (default: --model)")
    run.add_argument(
        "--mode",
        action="extend",
        type=modes,
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
    run.add_argument("--strategies", type=names, help="comma-separated ladder, lowest level first")
    run.add_argument(
        "--strategy-arg",
        action="append",
        type=dotted_arg("STRATEGY"),
        metavar="NAME.FIELD=VALUE",
        help="a strategy's parameter, e.g. self_consistency.n=7 or "
        "generated_knowledge.candidates=5; repeatable",
    )
    run.add_argument("--limit", type=int, help="evaluate N samples (seeded choice)")
    run.add_argument("--seed", type=int, help="seed for choosing samples (default 0)")
    run.add_argument(
        "--shard",
        metavar="I/N",
        help="run the I-th of N disjoint slices of every cell's samples (I from 1; chosen by "
        "the seeded hash --limit ranks by, after --limit's choice); run every shard with the "
        "same settings, then join their directories with hpt merge",
    )
    run.add_argument(
        "--concurrency",
        type=int,
        help="samples in flight per model (default 8; with --batch, a batched model's are all "
        "in flight)",
    )
    run.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="climb in Ray workers (pip install 'hpt[ray]'), this process writing the run: the "
        "cluster at ADDRESS (HOST:6379, auto), else RAY_ADDRESS's, else a local Ray",
    )
    run.add_argument(
        "--workers",
        type=int,
        help="with --ray: workers, each with --concurrency samples in flight and an equal "
        "share of the rate limits (default: the cluster's CPUs)",
    )
    run.add_argument("--out", type=Path, help="run directory (default runs/DATASET-MODEL-TIME)")
    run.add_argument(
        "--data-dir",
        type=Path,
        help="offline data laid out like shared/data "
        "(default $HPT_DATA_DIR; unset: the Hugging Face hub)",
    )
    add_generation_options(run)
    add_penalty_options(run)
    run.add_argument(
        "--samples-per-task",
        type=int,
        help="independent climbs per sample; reports unbiased pass@k for k <= N (default 1)",
    )
    run.add_argument(
        "--threshold",
        action="extend",
        type=floats,
        help="iwslt/samsum: the score (0-1) that resolves a sample; several make one cell each "
        "(default: the paper's two, 0.15 and 0.20)",
    )
    run.add_argument(
        "--reasoning-effort",
        action="extend",
        type=efforts,
        metavar="EFFORT",
        help=f"reasoning models: how hard to think, {'/'.join(REASONING_EFFORTS)} as the "
        "model takes them; several make one cell each (default: the provider's)",
    )
    run.add_argument(
        "--thinking-budget",
        action="extend",
        type=budgets,
        metavar="TOKENS",
        help="reasoning models: the tokens they may think (0: thinking off where the model "
        "can); several make one cell each (default: the provider's)",
    )
    run.add_argument(
        "--resume",
        type=Path,
        metavar="DIR",
        help="continue the run in DIR with its saved spec; finished samples are not repeated",
    )
    run.add_argument(
        "--trust-plugins",
        action="store_true",
        help="with --resume: import the plugins the run directory names (this runs their "
        "code); without it, a plugin must be an installed entry point or given with --plugin",
    )
    run.add_argument(
        "--keep-errors",
        action="store_true",
        help="with --resume: keep samples that ended in an error instead of running them again",
    )
    run.add_argument(
        "--task-arg",
        action="append",
        type=dotted_arg("DATASET"),
        metavar="DATASET.FIELD=VALUE",
        help="a dataset's own argument, e.g. depthqa.mode=multi_turn or depthqa.graph=DIR; "
        "repeatable",
    )
    run.add_argument(
        "--depth-mode",
        action="extend",
        type=depth_modes,
        help="short for --task-arg depthqa.mode=...: zero-shot, prompt-gold, prompt-pred, "
        "multi-turn (comma-separated; one cell each; default zero-shot unless --strategies "
        "names a ladder)",
    )
    run.add_argument(
        "--graph",
        type=Path,
        metavar="DIR",
        help="short for --task-arg depthqa.graph=DIR: a question graph directory "
        "(questions.jsonl, nodes.jsonl, node_to_q.jsonl), e.g. written by hpt decompose "
        "(default: the hub; offline --data-dir has the questions without the graph)",
    )
    run.add_argument(
        "--judge-model", help="depthqa: the model that scores answers 1-5 (default: --model)"
    )
    run.add_argument(
        "--prompt-model",
        help="dspy_mipro: the model that proposes instructions (default: --model); a small "
        "model often cannot write DSPy's field format",
    )
    run.add_argument(
        "--program",
        action="append",
        type=program_arg,
        metavar="STRATEGY[:DATASET]=FILE",
        help="run a saved DSPy program (DSPy's program.save JSON, e.g. RUN/programs/*.json or "
        "a dspy-helm agent) in dspy_predict/dspy_cot/dspy_bfrs/dspy_mipro instead of "
        "optimising; :DATASET limits it to one dataset; repeatable",
    )
    run.add_argument("--epoch", type=int, help="a new epoch bypasses cached answers (default 0)")
    run.add_argument("--no-progress", action="store_true", help="no live display")
    add_spending_options(run)


def add_spending_options(run: argparse.ArgumentParser) -> None:
    """Batch mode, budgets, prices and the cost estimate."""
    run.add_argument(
        "--batch",
        action="store_true",
        default=None,
        help="send OpenAI's and Anthropic's calls through their Batch APIs (half the price, "
        "answers within 24 hours; other providers are called directly). Where any model "
        "a cell calls is batched (judge and extractor too), every sample climbs at once, "
        "whatever --concurrency says: memory holds one waiting climb per sample. "
        "Batches are saved in the run directory: --resume collects them",
    )
    run.add_argument(
        "--batch-size",
        type=int,
        metavar="N",
        help=f"with --batch: send a batch once N requests wait (default {BATCH_SIZE})",
    )
    run.add_argument(
        "--batch-wait",
        type=positive_number,
        metavar="S",
        help=f"with --batch: or once S seconds passed without a new request (default "
        f"{BATCH_WAIT_S:g})",
    )
    run.add_argument(
        "--batch-poll",
        type=positive_number,
        metavar="S",
        help=f"with --batch: seconds between asking a batch's status (default {BATCH_POLL_S:g})",
    )
    run.add_argument(
        "--budget-usd",
        type=positive_number,
        metavar="X",
        help="send a call only while what was spent plus the worst case of every call in "
        "flight stays within X dollars; then stop (exit 3) and say how to resume with more",
    )
    run.add_argument(
        "--max-calls",
        type=int,
        metavar="N",
        help="send at most N model calls (answers from the response cache are free), then "
        "stop (exit 3)",
    )
    run.add_argument(
        "--prices",
        type=Path,
        metavar="FILE",
        help='model prices over hpt\'s cost map: a TOML table per model, ["LABEL"] input = '
        "USD, output = USD per million tokens (optional: cache_read, cache_write, "
        "batch_input, batch_output)",
    )
    run.add_argument(
        "--estimate",
        type=int,
        metavar="N",
        help=f"run N samples of each cell (at least {ESTIMATE_MIN}: those --limit N would "
        "choose), then stop and project the whole run's cost with a 95%% interval; --resume "
        "goes on from there",
    )


def build_spec(args: argparse.Namespace, plugins: list[str]) -> RunSpec:
    require_positive(args, "limit", "concurrency", "max_concurrency", "rpm", "tpm",
                     "max_attempts", "samples_per_task", "batch_size", "max_calls")  # fmt: skip
    for flag in BATCH_FLAGS:
        if getattr(args, flag) is not None and not args.batch:
            raise ConfigError(f"--{flag.replace('_', '-')} applies only with --batch")
    if args.prices is not None:
        args.prices = args.prices.expanduser().resolve()
    merged = merge_model_options(args)
    for flag, key in RUN_FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            merged[key] = value
    for key in REASONING_DIMENSIONS:
        if getattr(args, key) is not None:  # the flag over the config's, in [run.params] too
            merged["params"].pop(key, None)
    # Once the datasets are known: a shorthand applies only to a dataset the run evaluates.
    merged = with_shorthands(merged)
    if args.strategy_arg:
        given = {k: dict(v) for k, v in (merged.get("strategy_args") or {}).items()}
        for name, field, value in args.strategy_arg:
            given.setdefault(name, {})[field] = value
        merged["strategy_args"] = given
    if args.task_arg or any(getattr(args, flag) is not None for flag in SHORTHANDS):
        datasets = evaluated(merged.get("dataset"))
        merged["task_args"] = task_args(args, merged.get("task_args") or {}, datasets)
    apply_penalty_flags(args, merged)
    if args.program:
        programs = {k: Path(v) for k, v in (merged.get("programs") or {}).items()}
        programs.update(dict(args.program))
        merged["programs"] = programs
    if args.shard is not None:
        merged["shard"] = Shard.parse(args.shard)
    # Config-file plugins load now, before anything they register is looked up.
    merged["plugins"] = list(dict.fromkeys([*plugins, *(merged.get("plugins") or [])]))
    load_plugins(merged["plugins"], installed=False)
    if not merged.get("dataset"):
        raise ConfigError("say which dataset to run: --dataset NAME (or dataset in [run])")
    try:
        spec = RunSpec.model_validate(merged)
    except ValidationError as exc:
        where = f"{args.config} or the command line" if args.config else "command line"
        raise ConfigError(validation_message(exc, where)) from None
    spec.check_models()  # a bad model spec fails before any data is touched
    return spec.model_copy(update={"out": spec.out or default_out_dir(spec)})


def task_args(
    args: argparse.Namespace, configured: dict[str, Any], datasets: set[str]
) -> dict[str, Any]:
    """The config file's task arguments with the command line's over them, field by field:
    --task-arg, and the shorthands, which may not disagree with a --task-arg."""
    given: dict[str, dict[str, Any]] = {}
    for name, field, value in args.task_arg or []:
        given.setdefault(name, {})[field] = value
    for flag, (dataset, field) in SHORTHANDS.items():
        value = getattr(args, flag)
        if value is not None and dataset in datasets:  # else it applies to nothing, as before
            shown = f"--{flag.replace('_', '-')} and --task-arg {dataset}.{field}"
            set_task_arg(given, dataset, field, value, shown)
    return {name: {**configured.get(name, {}), **given.get(name, {})}
            for name in {**configured, **given}}  # fmt: skip


def resume_spec(args: argparse.Namespace) -> RunSpec:
    flags = [f for f in RUN_FLAGS if getattr(args, f) is not None] + given_model_flags(args)
    flags += [f for f in SHORTHANDS if getattr(args, f) is not None]
    flags += ["strategy_arg"] if args.strategy_arg else []
    flags += ["task_arg"] if args.task_arg else []
    flags += ["program"] if args.program else []
    flags += given_penalty_flags(args)
    given = [f"--{f.replace('_', '-')}" for f in flags if f not in RESUME_FLAGS]
    if given:
        raise ConfigError(
            f"--resume continues the saved spec of {args.resume}; it cannot take "
            f"{', '.join(given)} (only --concurrency, --max-concurrency, --rpm, --tpm, "
            f"--max-attempts, --budget-usd, --max-calls, --batch-poll, --ray, --workers, "
            f"--base-url for an endpoint's credentials, --shard as saved, --keep-errors, "
            f"--trust-plugins, --no-progress)"
        )
    require_positive(args, "max_calls")
    spec = load_saved_spec(args.resume).run_spec()
    if args.shard is not None:
        check_resumed_shard(args.resume, spec.shard, Shard.parse(args.shard))
    # What the run was started with; a run directory from elsewhere must not run its code.
    load_saved_plugins(args.resume, spec.plugins, trust=args.trust_plugins)
    spec = spec.restore_credentials([args.base_url] if args.base_url else [])
    update: dict[str, Any] = {"out": args.resume}
    for flag, key in (("concurrency", "concurrency"), *RUN_FLAGS.items(), *MODEL_FLAGS.items()):
        if flag in RESUME_FLAGS - {"base_url"} and getattr(args, flag) is not None:
            update[key] = getattr(args, flag)
    if args.max_attempts is not None:
        update["retry"] = (spec.retry or RetryPolicy()).model_copy(
            update={"max_attempts": args.max_attempts}
        )
    return spec.model_copy(update=update)


def check_resumed_shard(out: Path, saved: Shard | None, given: Shard) -> None:
    """A --shard given on resume (an array job's script repeats its flags) must be the one
    the directory holds: a resume goes on with the samples the run was started on."""
    if saved == given:
        return
    holds = f"shard {saved} of its campaign" if saved else "a whole run, not a shard"
    keep = f"give --shard {saved}, or none" if saved else "give no --shard"
    raise ConfigError(f"--shard {given}: {out} holds {holds}; a resume keeps it ({keep})")


def command(args: argparse.Namespace, console: Console, err: Console, plugins: list[str]) -> int:
    for flag in ("keep_errors", "trust_plugins"):
        if getattr(args, flag) and args.resume is None:
            raise ConfigError(f"--{flag.replace('_', '-')} applies only with --resume DIR")
    if args.workers is not None and args.ray is None:
        raise ConfigError("--workers applies only with --ray [ADDRESS]")
    require_positive(args, "workers")
    if args.estimate is not None:
        if args.resume is not None:
            raise ConfigError("--estimate starts a run; --resume DIR goes on with the whole run")
    spec = resume_spec(args) if args.resume is not None else build_spec(args, plugins)
    assert spec.out is not None
    progress = None if args.no_progress or not console.is_terminal else RichProgress()
    try:
        result = signals.run(
            run_evaluation(
                spec,
                PenaltyNotices(err, progress),
                resume=args.resume is not None,
                retry_errors=not args.keep_errors,
                command=["hpt", *sys.argv[1:]],
                estimate=args.estimate,
            )
        )
    except FatalBackendError as exc:
        if not (spec.out / SPEC).is_file():
            raise  # stopped before the run began: nothing to go on with
        # Stopped mid-run (a key refused, a batch that may exist): what was finished is kept.
        raise type(exc)(
            f"{exc}; finished samples are kept in {spec.out}; continue with: "
            f"{spec.resume_command(spec.out)}"
        ) from exc
    except (KeyboardInterrupt, signals.Terminated) as stop:
        if progress is not None:
            progress.stop()
        how = "interrupted" if isinstance(stop, KeyboardInterrupt) else "stopped by SIGTERM"
        err.print(
            f"hpt: {how}; finished samples are kept in {spec.out}. "
            f"Continue with: {spec.resume_command(spec.out)}",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
        return EXIT_INTERRUPTED if isinstance(stop, KeyboardInterrupt) else signals.EXIT_TERMINATED
    finally:
        if progress is not None:
            progress.stop()
    if len(result.summaries) == 1:
        print_table(console, summary_table(result.summary, spec.strategies))
    else:
        print_cells(console, result.summaries)
    limits = [result.generation[s.dataset].asked.max_tokens for s in result.summaries
              if s.cut_off[0] and s.dataset in result.generation]  # fmt: skip
    warning = truncation_warning(result.summaries, limits)
    if warning is not None:
        err.print(f"hpt: warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    # Paths as text: brackets in an --out are not markup.
    console.print(
        f"records: {result.out / SAMPLES}  summary: {result.out / SUMMARY}",
        markup=False,
        soft_wrap=True,
    )
    console.print(
        f"report: hpt report {result.out}  traces: hpt view {result.out}",
        markup=False,
        soft_wrap=True,
    )
    if spec.shard is not None:
        _say(console, f"shard {spec.shard} of its campaign: once every shard has run, join "
             f"them with: hpt merge DIR... --out DIR")  # fmt: skip
    if result.estimate is not None:
        print_estimate(console, err, result.estimate, spec)
    if result.stopped_by is not None:
        print_budget_stop(err, result, spec)
        return EXIT_BUDGET
    return 0


def _say(console: Console, text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def print_estimate(console: Console, err: Console, estimate: Estimate, spec: RunSpec) -> None:
    """Each cell's and the run's projected cost and calls, and how to go on."""
    table = PlainTable(title=f"cost estimate ({estimate.level:.0%} interval)")
    for column in ("cell", "run", "spent", "projected", "interval", "calls", "projected calls"):
        table.add_column(column, justify="left" if column == "cell" else "right")
    for c in estimate.cells:
        table.add_row(c.title, f"{c.run}/{c.planned}", *_costs(c))
    if len(estimate.cells) > 1:
        run = sum(c.run for c in estimate.cells)
        table.add_row("whole run", f"{run}/{sum(c.planned for c in estimate.cells)}",
                      *_costs(estimate))  # fmt: skip
    print_table(console, table)
    if estimate.cached_calls:
        _say(err, f"hpt: note: {estimate.cached_calls} calls of these samples were answered by "
             "the response cache and cost nothing here; a warm cache makes the estimate low "
             "(--no-cache, or a new --epoch, for a cold one)")  # fmt: skip
    assert spec.out is not None
    bound, where = estimate.high_usd, "the interval's upper end"
    if spec.batch and estimate.level_worst_usd:
        # Every climb waits at once: a budget of the upper end alone would stop the run.
        bound += estimate.level_worst_usd
        where = "the interval's upper end and room for batch mode's reservations"
        _say(console, "in batch mode every waiting call reserves its worst case at once: one "
             f"level's calls of every sample left may reserve {usd_text(estimate.level_worst_usd)} "
             "together")  # fmt: skip
    ceiling = spec.resume_command(spec.out, f"--budget-usd {_round_up(bound):g}")
    _say(console, f"continue with: {spec.resume_command(spec.out)}  (or, to stop at {where}: "
         f"{ceiling})")  # fmt: skip


def _costs(c: CellEstimate | Estimate) -> list[str]:
    return [
        usd_text(c.spent_usd),
        usd_text(c.projected_usd),
        f"{usd_text(c.low_usd)}-{usd_text(c.high_usd)}",
        str(c.calls),
        f"{c.projected_calls:.0f}",
    ]


def print_budget_stop(err: Console, result: RunResult, spec: RunSpec) -> None:
    """What the run spent, and the resume command with a higher bound (on stderr)."""
    assert result.spend is not None and spec.out is not None
    spend = result.spend
    if result.stopped_by == "--max-calls":
        bound = f"--max-calls {spec.max_calls}"
    else:
        bound = f"--budget-usd {spec.budget_usd:g}"
    _say(err, f"hpt: the run stopped at its budget ({bound}): "
         f"{spend_text(spend, result.prices or {})}")  # fmt: skip
    # In batch mode every climb waits at once: a resume asks the refused calls again
    # together, each reserving its worst case, so the bound must make room for all of them.
    batched = spec.batch and result.refused_calls > 1
    worst = ""
    if result.stopped_by == "--max-calls":
        assert spec.max_calls is not None
        calls = spec.max_calls * 2
        if batched:
            calls = max(calls, spend.calls + result.refused_calls)
        higher = f"--max-calls {calls}"
    else:
        assert spec.budget_usd is not None
        usd = spec.budget_usd * 2
        if batched:
            usd = max(usd, spend.spent_usd + result.refused_usd)
        higher = f"--budget-usd {_round_up(usd):g}"
        worst = f", at most {usd_text(result.refused_usd)}"
    if batched:
        _say(err, "hpt: in batch mode every waiting call reserves its worst case at once: a "
             f"resume asks the {result.refused_calls} calls refused again together{worst}; "
             "the bound below leaves room for them")  # fmt: skip
    resume = spec.resume_command(spec.out, higher)
    _say(err, f"hpt: finished samples are kept in {spec.out}; continue with a higher "
         f"budget: {resume}")  # fmt: skip


def _round_up(amount: float) -> float:
    """A budget to suggest: ``amount`` rounded up to two significant digits."""
    if amount <= 0:
        return 0.01
    step = 10.0 ** (math.floor(math.log10(amount)) - 1)
    return round(math.ceil(amount / step - 1e-9) * step, 10)
