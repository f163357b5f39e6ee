"""``hpt report``: the paper's tables (Markdown, CSV) and plots from run directories
(``hpt.reports.api.report``)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from rich.console import Console

from hpt.cli.common import installed_descriptions, print_written


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
        help='TOML of USD per million tokens per model label or id: ["openai:gpt-4o"] input = 2.5, '
        "output = 10 (optional: cache_read, cache_write, batch_input, batch_output, "
        "batch_cache_read, batch_cache_write); over the prices the run recorded and litellm's "
        "cost map (hpt[prices])",
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


def command(args: argparse.Namespace, console: Console) -> int:
    from hpt.reports import api  # numpy: loaded only for reports

    written = api.report(
        args.run_dirs,
        out=args.out,
        prices=args.prices,
        baseline=args.baseline,
        detect=args.detect,
        plots=not args.no_plots,
        describe=installed_descriptions().get,
    )
    print(written.text)
    print_written(console, written.paths)
    return 0
