"""``hpt annotate DATASET``: score the dataset's representative set on HPT's four criteria
(appendix A.1), in a browser page, in the terminal or by a model, and measure its
HPI_dataset from every annotation saved so far."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import sys
import threading
import webbrowser
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from hpt.cli import signals
from hpt.cli.common import PlainTable, port, require_positive
from hpt.cli.options import (
    add_generation_options,
    add_model_options,
    merge_model_options,
    model_settings_only,
)
from hpt.errors import validation_message
from hpt.orchestrator.annotate import (
    FRACTION,
    Guide,
    ModelAnnotatorSpec,
    RepresentativeSet,
    SampleView,
    annotate_with_model,
    load_guide,
    model_annotator_name,
    representative_set,
    sample_view,
)
from hpt.orchestrator.config import ConfigError
from hpt.orchestrator.penalties import declared_penalty
from hpt.results.annotations import (
    ANNOTATIONS_ENV,
    annotations_file,
    default_annotations_dir,
    read_annotations,
)
from hpt.results.penalties import annotated_penalties, scored_outside
from hpt.results.rundir import RunDirError
from hpt.tasks import TASKS, get_task, resolve_data_dir


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "annotate",
        help="score a dataset's representative set on HPT's four criteria (appendix A.1) "
        "and measure its HPI_dataset penalty",
    )
    p.add_argument("dataset", help=f"one of {', '.join(TASKS)}")
    p.add_argument(
        "--annotator", help="your name, saved with each of your annotations (default: login)"
    )
    p.add_argument(
        "--terminal", action="store_true", help="score in the terminal instead of a browser page"
    )
    p.add_argument("--port", type=port, default=0, help="the page's port (default: any free one)")
    p.add_argument("--no-open", action="store_true", help="print the page's address, open nothing")
    p.add_argument(
        "--annotator-model",
        metavar="SPEC",
        help="a model scores the set instead of a person (its penalty is labelled a model's)",
    )
    add_model_options(p)
    add_generation_options(p)
    p.add_argument("--concurrency", type=int, default=8, help="--annotator-model calls in flight")
    p.add_argument(
        "--out",
        type=Path,
        help=f"annotations directory, DATASET.jsonl in it (default ${ANNOTATIONS_ENV} or "
        f"{default_annotations_dir()})",
    )
    p.add_argument("--data-dir", type=Path, help="offline data laid out like shared/data")
    p.add_argument("--seed", type=int, default=0, help="seed of the representative set (0)")
    p.add_argument(
        "--fraction", type=float, default=0.05, help="share of the dataset annotated (0.05)"
    )
    p.add_argument(
        "--summary", action="store_true", help="only print the penalty the annotations give"
    )


def _annotator(args: argparse.Namespace) -> str:
    name: str
    if args.annotator is not None:
        name = str(args.annotator).strip()
    else:
        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            name = ""
    if not name:
        raise ConfigError("say who is annotating: --annotator NAME")
    if name.startswith("model:"):
        raise ConfigError(f"--annotator {name}: names beginning 'model:' are model annotators'")
    return name


def _check(args: argparse.Namespace) -> None:
    require_positive(args, "concurrency", "max_concurrency", "rpm", "tpm", "max_attempts")
    if not 0 < args.fraction <= 1:
        raise ConfigError(f"--fraction {args.fraction}: expected a share in (0, 1], e.g. 0.05")
    if args.annotator_model and (args.annotator is not None or args.terminal):
        raise ConfigError("--annotator-model scores by itself: drop --annotator and --terminal")


def command(args: argparse.Namespace, console: Console) -> int:
    _check(args)
    out = (args.out or default_annotations_dir()).expanduser()
    task = get_task(args.dataset, resolve_data_dir(args.data_dir))
    path = annotations_file(out, task.name)
    annotator = None if args.annotator_model or args.summary else _annotator(args)
    chosen = representative_set(task, args.seed, args.fraction)
    if args.summary:
        _print_summary(console, chosen, path)
        return 0
    guide = load_guide()
    views = [sample_view(task, s, chosen.stratum) for s in chosen.samples]
    spread = f", spread over {chosen.strata} {chosen.stratum} values" if chosen.stratum else ""
    console.print(
        f"{task.title}: representative set of {len(views)} of {chosen.population} samples "
        f"({chosen.fraction * 100:g}%, seed {chosen.seed}{spread}); annotations: {path}",
        highlight=False, markup=False, soft_wrap=True,
    )  # fmt: skip
    if args.annotator_model:
        _by_model(args, console, chosen, views, out)
    elif args.terminal:
        from hpt.cli.annotate_terminal import score_in_terminal

        assert annotator is not None
        saved = score_in_terminal(console, sys.stdin, views, guide, path, task.name, annotator)
        console.print(f"saved {saved} annotations by {annotator}", highlight=False, markup=False)
    else:
        assert annotator is not None
        _in_browser(args, console, task.name, chosen.title, annotator, guide, views, path)
    _print_summary(console, chosen, path)
    return 0


def _by_model(
    args: argparse.Namespace, console: Console, chosen: RepresentativeSet,
    views: list[SampleView], out: Path,
) -> None:  # fmt: skip
    settings = model_settings_only(merge_model_options(args))
    try:
        spec = ModelAnnotatorSpec.model_validate(
            {**settings, "annotator_model": args.annotator_model, "concurrency": args.concurrency}
        )
    except ValidationError as exc:
        where = f"{args.config} or the command line" if args.config else "command line"
        raise ConfigError(validation_message(exc, where)) from None
    name = model_annotator_name(spec)  # a bad model spec fails here, before any call
    outcome = signals.run(annotate_with_model(spec, chosen, views, out))
    console.print(
        f"{name}: scored {outcome.scored}, {outcome.already} scored before, "
        f"{len(outcome.failed)} without a valid reply",
        highlight=False, markup=False, soft_wrap=True,
    )  # fmt: skip
    for sample_id, why in list(outcome.failed.items())[:5]:
        console.print(f"  {sample_id}: {why}", highlight=False, markup=False, soft_wrap=True)
    if outcome.failed:
        console.print("run the same command again to retry them", highlight=False)


def _in_browser(
    args: argparse.Namespace, console: Console, dataset: str, title: str, annotator: str,
    guide: Guide, views: list[SampleView], path: Path,
) -> None:  # fmt: skip
    from hpt.viewer.annotate_page import (
        AnnotationServer,
        PageCriterion,
        PageSample,
        PageSession,
        serve_annotations,
    )

    session = PageSession(
        dataset=dataset, title=title, annotator=annotator, guidance=guide.guidance,
        criteria=[PageCriterion(key=c.key, name=c.name, definition=c.definition)
                  for c in guide.criteria],
        samples=[PageSample(id=v.id, blocks=list(v.blocks), answer=v.answer,
                            category=v.category) for v in views],
        path=path,
    )  # fmt: skip
    server = AnnotationServer(session)

    def ready(url: str) -> None:
        console.print(f"annotate at {url} (Ctrl-C stops; each annotation is saved as it is "
                      f"posted)", highlight=False, markup=False, soft_wrap=True)  # fmt: skip
        sys.stdout.flush()
        if not args.no_open:
            _open_browser(console, url)

    try:
        asyncio.run(serve_annotations(server, args.port, ready))
    except OSError as exc:
        raise RunDirError(f"cannot serve on port {args.port}: {exc.strerror}") from None
    except KeyboardInterrupt:
        console.print("stopped", highlight=False)
    console.print(f"saved {server.saved} annotations by {annotator}", highlight=False, markup=False)


def has_display(env: Mapping[str, str], platform: str) -> bool:
    """Whether a browser can show a window here: on Linux only under X11 or Wayland (over SSH
    webbrowser would find a console browser, lynx or w3m, in the terminal we print to)."""
    return not platform.startswith("linux") or bool(
        env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")
    )


def _open_browser(console: Console, url: str) -> None:
    """Open ``url`` off the event loop: webbrowser.open can wait for the browser to exit (a
    browser named in $BROWSER, a console one), and the page must be served meanwhile. A
    daemon thread rather than the loop's executor, which asyncio.run would wait for."""
    if not has_display(os.environ, sys.platform):
        console.print("no display here: open the address in a browser", highlight=False)
        return

    def run() -> None:
        if not webbrowser.open(url):
            console.print("no browser to open it here; open the address in one", highlight=False)

    threading.Thread(target=run, name="hpt-annotate-browser", daemon=True).start()


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _print_summary(console: Console, chosen: RepresentativeSet, path: Path) -> None:
    """HPI_dataset over the samples of ``chosen`` annotated so far, by kind of annotator."""
    dataset = chosen.dataset
    annotations = read_annotations(path)
    ids = [s.id for s in chosen.samples]
    found = annotated_penalties(annotations, dataset, ids)
    outside = scored_outside(annotations, dataset, ids)
    declared = declared_penalty(dataset)
    console.print(
        f"{dataset}'s own penalty: {declared.value:g}, {declared.source.label}",
        highlight=False, markup=False, soft_wrap=True,
    )  # fmt: skip
    if outside:
        console.print(
            f"{outside} sample{'s' if outside != 1 else ''} scored in {path} outside this set "
            f"(another --seed or --fraction) {'are' if outside != 1 else 'is'} not counted",
            highlight=False, markup=False, soft_wrap=True,
        )  # fmt: skip
    if not found:
        console.print(f"no annotations of this set in {path} yet", highlight=False,
                      markup=False, soft_wrap=True)  # fmt: skip
        return
    table = PlainTable(title=Text(f"HPI_dataset of {dataset} from {path}"))
    table.add_column("")
    for result in found:
        table.add_column(f"{result.kind} annotators", justify="right")
    rows = {
        "HPI_dataset": [f"{r.value:.2f}" for r in found],
        "samples": [f"{r.samples} of {r.set_size}" for r in found],
        "annotators": [", ".join(r.annotators) for r in found],
        "sd over samples": [_fmt(r.sd) for r in found],
        "95% interval": [f"{r.ci95[0]:.2f}-{r.ci95[1]:.2f}" if r.ci95 else "-" for r in found],
        "Krippendorff's alpha, ordinal": [_fmt(r.alpha_ordinal, 3) for r in found],
        "Krippendorff's alpha, interval": [_fmt(r.alpha_interval, 3) for r in found],
        "units scored twice or more": [str(r.paired_units) for r in found],
    }
    for label, cells in rows.items():
        table.add_row(label, *cells)
    for criterion in found[0].criteria:
        table.add_row(f"mean {criterion}", *(f"{r.criteria[criterion]:.2f}" for r in found))
    console.print(table)
    lines = ["alpha over (sample, criterion) units"]
    if (chosen.seed, chosen.fraction) != (0, FRACTION):
        lines.append("a run measures on the set drawn without --seed and --fraction, not this one")
    else:
        lines += [f"{r.kind} annotators: a run uses theirs once every sample is scored"
                  for r in found if not r.complete]  # fmt: skip
        if any(r.complete for r in found):
            lines.append(f"use it: hpt run --dataset {dataset} --annotations {path.parent}")
    console.print("; ".join(lines), highlight=False, markup=False, soft_wrap=True)
