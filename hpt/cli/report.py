"""``hpt report``: the paper's tables (Markdown, CSV) and plots from run directories."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from hpt.results.info import TaskInfo
from hpt.results.store import RunDirError, require_run_dirs
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
    rep.add_argument("--no-plots", action="store_true", help="tables only")


def installed_descriptions() -> dict[str, TaskInfo]:
    """The installed tasks' descriptions, for run directories saved before run.json
    carried them; a directory's own descriptions always come first."""
    return {name: task.info() for name, task in TASKS.items()}


def command(args: argparse.Namespace, console: Console) -> int:
    from hpt.reports import tables  # numpy: loaded only for reports

    prices = tables.load_prices(args.prices) if args.prices else None
    require_run_dirs(*args.run_dirs)
    reports = tables.collect(args.run_dirs, prices, describe=installed_descriptions().get)
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
    text = tables.markdown(reports, args.run_dirs)
    (out / "report.md").write_text(text, encoding="utf-8")
    tables.write_csv(reports, out / "cells.csv")
    written = [out / "report.md", out / "cells.csv"]
    if not args.no_plots:
        from hpt.reports import plots

        written += plots.hpi_chart(reports, out) + plots.level_histograms(reports, out)
    print(text)
    console.print("wrote " + ", ".join(str(p) for p in written), highlight=False, soft_wrap=True)
    return 0
