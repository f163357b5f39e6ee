"""``hpt agreement RUN RUN``: judge agreement between two DepthQA runs (the paper's table 14)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from hpt.results.reader import require_run_dirs


def add_parser(sub: Any) -> None:
    agree = sub.add_parser(
        "agreement",
        help="Krippendorff's alpha (ordinal) between the judge scores of two DepthQA runs "
        "on the same nodes, e.g. judged by two models",
    )
    agree.add_argument("run_dirs", nargs=2, type=Path, metavar="DIR")
    agree.add_argument("--out", type=Path, help="also write the result as JSON to this file")


def command(args: argparse.Namespace, console: Console) -> int:
    from hpt.reports.agreement import agreement, save

    require_run_dirs(*args.run_dirs)
    result = agreement(*args.run_dirs)

    def show(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    console.print(
        f"units scored in both: {result.units}  unmatched or missing: {result.unmatched}\n"
        f"Krippendorff's alpha (ordinal): {show(result.alpha)}  exact agreement: "
        f"{show(result.exact)}\n"
        + "  ".join(f"D{d}: {show(v)}" for d, v in result.by_depth.items()),
        highlight=False,
    )
    if args.out is not None:
        save(result, args.out)
    return 0
