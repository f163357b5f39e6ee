"""``hpt compare``: paired comparisons of the models in run directories (comparisons.json,
comparisons.md and a forest plot; ``hpt.reports.api.compare``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from hpt.cli.common import installed_descriptions, print_written
from hpt.cli.report import comparison_options


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
    from hpt.reports import api  # numpy: loaded only for reports

    written = api.compare(
        args.run_dirs,
        out=args.out,
        baseline=args.baseline,
        detect=args.detect,
        plots=not args.no_plots,
        describe=installed_descriptions().get,
    )
    print(written.text)
    print_written(console, written.paths)
    return 0
