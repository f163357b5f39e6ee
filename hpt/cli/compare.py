"""``hpt compare``: paired comparisons of the models in run directories (comparisons.json,
comparisons.md and a forest plot)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from hpt.cli.report import comparison_options, installed_descriptions, output_folder
from hpt.reports import ReportError
from hpt.results.reader import require_run_dirs
from hpt.results.rundir import RunDirError


def add_parser(sub: Any) -> None:
    cmp = sub.add_parser(
        "compare",
        help="is model A really better than model B? paired tests over the samples both scored",
    )
    cmp.add_argument("run_dirs", nargs="+", type=Path, metavar="DIR")
    cmp.add_argument(
        "--out", type=Path, help="output folder (default DIR/compare, or runs/compare-TIME)"
    )
    comparison_options(cmp)
    cmp.add_argument("--no-plots", action="store_true", help="no forest plot")


def command(args: argparse.Namespace, console: Console) -> int:
    from hpt.reports import comparisons, tables  # numpy: loaded only for reports

    require_run_dirs(*args.run_dirs)
    scores: dict[Any, Any] = {}
    reports = tables.collect(args.run_dirs, describe=installed_descriptions().get, scores=scores)
    if not reports:
        raise RunDirError(f"no records in {', '.join(map(str, args.run_dirs))}")
    models = tables.model_names(reports)
    if len(models) < 2:
        raise ReportError(
            f"nothing to compare: the records hold one model ({models[0]}); "
            "give the run directories of at least two models"
        )
    compared = comparisons.compare(scores, baseline=args.baseline, detect=args.detect)
    found = compared.comparisons
    if not found:
        raise ReportError(
            "; ".join(compared.unshared)
            or "no dataset x mode was run by two of these models"
            + (f" with the baseline {args.baseline}" if args.baseline else "")
        )
    out = output_folder(args.out, args.run_dirs, "compare")
    text = (
        "# Paired comparisons\n\nRuns: "
        + ", ".join(f"`{d}`" for d in args.run_dirs)
        + f"\n\n{comparisons.explanation()}\n\n{comparisons.markdown_table(found)}\n"
        + "".join(f"\n- {note}" for note in compared.unshared)
    )
    written = [out / comparisons.COMPARISONS_JSON, out / comparisons.COMPARISONS_MD]
    comparisons.write_json(found, written[0])
    written[1].write_text(text, encoding="utf-8")
    if not args.no_plots:
        from hpt.reports import plots

        written += plots.forest(found, out)
    print(text)
    console.print(
        "wrote " + ", ".join(str(p) for p in written),
        highlight=False, markup=False, soft_wrap=True,
    )  # fmt: skip
    return 0
