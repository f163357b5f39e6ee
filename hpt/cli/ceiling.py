"""``hpt ceiling``: each model's performance ceiling over prompting methods (Aali et al.,
structured prompting x HELM), from run directories and/or a CSV of published results.

``hpt.reports.api.ceiling`` reads the inputs, computes and writes ``ceiling.json``,
``ceiling.md`` and the plots; this prints the report as a rich table and its headline."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hpt.cli.common import names, print_written
from hpt.reports.ceiling import DEFAULT_BASELINE, DEFAULT_HEADLINE
from hpt.reports.ceiling_markdown import delta_cell, headline, n_of, signed
from hpt.reports.ceiling_types import CeilingReport


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ceiling",
        help="each model's performance ceiling over prompting methods, its gain over a "
        "baseline prompt and the ranking flips (JSON, Markdown, plots)",
    )
    p.add_argument("run_dirs", nargs="*", type=Path, metavar="RUN_DIR")
    p.add_argument(
        "--scores",
        type=Path,
        action="append",
        default=[],
        metavar="FILE.csv",
        help="external results: columns model, benchmark, method, accuracy (percent), "
        "optional n and prompt_tokens (mean per sample); lines starting with # are skipped. "
        "Repeatable",
    )
    p.add_argument(
        "--baseline",
        default=DEFAULT_BASELINE,
        metavar="METHOD",
        help=f"the fixed-prompt method gains are measured from (default {DEFAULT_BASELINE})",
    )
    p.add_argument(
        "--headline-methods",
        type=names,
        default=list(DEFAULT_HEADLINE),
        metavar="M1,M2",
        help="the methods whose mean gain over the baseline is the headline "
        f"(default {','.join(DEFAULT_HEADLINE)})",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="output folder (default: the first RUN_DIR; with only --scores, the current "
        "directory)",
    )
    p.add_argument("--no-plots", action="store_true", help="JSON and Markdown only")


def command(args: argparse.Namespace, console: Console) -> int:
    from hpt.reports import api  # numpy: loaded only for reports

    report, written = api.ceiling(
        args.run_dirs,
        args.scores,
        baseline=args.baseline,
        headline_methods=args.headline_methods,
        out=args.out,
        plots=not args.no_plots,
    )
    console.print(rich_table(report))
    console.print(headline(report), highlight=False, markup=False)
    for warning in report.warnings:
        console.print(f"warning: {warning}", highlight=False, markup=False, style="yellow")
    print_written(console, written)
    return 0


def rich_table(report: CeilingReport) -> Table:
    table = Table(title=f"Performance ceiling (accuracy %, baseline {report.baseline})")
    table.add_column("model (k benchmarks)", overflow="fold")
    for method in report.methods:
        table.add_column(escape(method), justify="right", overflow="fold")
    for column in ("Δ", "spread min/med", "rank base→ceil"):
        table.add_column(column, justify="right", overflow="fold")
    for model, m in report.models.items():
        cells = []
        for method in report.methods:
            stat = m.methods.get(method)
            text = ("-" if stat is None else
                    f"{stat.macro_avg:.2f} ±{signed(stat.sd, 1)} {n_of(stat.n)}")  # fmt: skip
            cells.append(f"[bold green]{text}[/]" if method == m.ceiling_method else text)
        flag = " ⚠" if m.missing_benchmarks else ""
        table.add_row(f"{escape(model)} ({len(m.benchmarks)}){flag}", *cells,
                      delta_cell(m, report.baseline),
                      f"{m.spread.min:.1f}/{m.spread.median:.1f}",
                      f"{m.mean_rank_baseline:.2f}→{m.mean_rank_ceiling:.2f}")  # fmt: skip
    return table
