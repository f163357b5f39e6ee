"""``hpt report``: the paper's tables (Markdown, CSV) and plots from run directories."""

from __future__ import annotations

import argparse
import math
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from hpt.reports import ReportError
from hpt.results.info import TaskInfo
from hpt.results.reader import require_run_dirs
from hpt.results.rundir import RunDirError
from hpt.tasks import TASKS


def add_parser(sub: Any) -> None:
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
    comparison_options(rep)
    rep.add_argument("--no-plots", action="store_true", help="tables only")


def comparison_options(parser: Any) -> None:
    """What ``hpt report`` and ``hpt compare`` both take for paired comparisons."""
    parser.add_argument(
        "--baseline",
        metavar="MODEL",
        help="compare every model with MODEL (default: every pair of models)",
    )
    parser.add_argument(
        "--detect",
        type=positive_float,
        metavar="D",
        help="also say how many samples would detect an HPI difference of D at 80%% power",
    )


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text}")
    return value


def output_folder(given: Path | None, run_dirs: list[Path], name: str) -> Path:
    """--out, else DIR/NAME for one run directory or runs/NAME-TIME for several; created."""
    out = given or (
        run_dirs[0] / name
        if len(run_dirs) == 1
        else Path("runs") / f"{name}-{datetime.now():%Y%m%d-%H%M%S}"
    )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"cannot write report folder {out}: {exc.strerror}") from None
    return out


def installed_descriptions() -> dict[str, TaskInfo]:
    """The installed tasks' descriptions, for run directories saved before run.json
    carried them; a directory's own descriptions always come first."""
    return {name: task.info() for name, task in TASKS.items()}


def command(args: argparse.Namespace, console: Console) -> int:
    from hpt.reports import comparisons, tables  # numpy: loaded only for reports

    prices = tables.load_prices(args.prices) if args.prices else None
    require_run_dirs(*args.run_dirs)
    scores: dict[Any, Any] = {}
    reports = tables.collect(
        args.run_dirs, prices, describe=installed_descriptions().get, scores=scores
    )
    if not reports:
        raise RunDirError(f"no records in {', '.join(map(str, args.run_dirs))}")
    # Several models: how they compare on the samples they share.
    paired: list[comparisons.Comparison] = []
    notes: list[str] = []
    if len({r.summary.model for r in reports}) > 1 or args.baseline:
        try:
            compared = comparisons.compare(scores, baseline=args.baseline, detect=args.detect)
            paired, notes = compared.comparisons, compared.unshared
        except ReportError as exc:  # e.g. two ladders: the rest of the report still stands
            if args.baseline:
                raise
            notes = [f"No paired comparisons: {exc}"]
    del scores  # per-sample scores are not needed past this point
    out = output_folder(args.out, args.run_dirs, "report")
    text = tables.markdown(reports, args.run_dirs, paired, args.detect, notes)
    (out / "report.md").write_text(text, encoding="utf-8")
    tables.write_csv(reports, out / "cells.csv")
    written = [out / "report.md", out / "cells.csv"]
    if paired:
        comparisons.write_json(paired, out / comparisons.COMPARISONS_JSON)
        written.append(out / comparisons.COMPARISONS_JSON)
    if not args.no_plots:
        from hpt.reports import plots

        written += plots.hpi_chart(reports, out) + plots.level_histograms(reports, out)
        written += plots.forest(paired, out)
    print(text)
    console.print(
        "wrote " + ", ".join(str(p) for p in written),
        highlight=False, markup=False, soft_wrap=True,
    )  # fmt: skip
    return 0
