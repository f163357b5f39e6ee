"""``hpt merge``: join the shards of a campaign (``hpt run --shard I/N``) into one run
directory (``hpt.orchestrator.merge``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from hpt.cli.progress import print_cells, print_table, summary_table
from hpt.orchestrator.merge import merge_shards
from hpt.results.rundir import SAMPLES


def add_parser(sub: Any) -> None:
    merge = sub.add_parser(
        "merge",
        help="join the run directories of hpt run --shard I/N into one run that reports, "
        "views, compares and resumes as a single process's would",
    )
    merge.add_argument(
        "shard_dirs", nargs="+", type=Path, metavar="DIR",
        help="the shards' run directories (hpt run --shard I/N), each index once",
    )  # fmt: skip
    merge.add_argument(
        "--out", type=Path, required=True, help="the merged run's directory (new or empty)"
    )
    merge.add_argument(
        "--partial",
        action="store_true",
        help="merge even where shards are missing or unfinished: the merged run is "
        "incomplete, and hpt run --resume OUT runs what they lacked",
    )


def command(args: argparse.Namespace, console: Console) -> int:
    result = merge_shards(
        args.shard_dirs, args.out, partial=args.partial, command=["hpt", *sys.argv[1:]]
    )
    err = Console(stderr=True, emoji=False)
    for warning in result.warnings:
        err.print(f"hpt: warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if len(result.summaries) == 1:
        print_table(console, summary_table(result.summaries[0]))
    elif result.summaries:
        print_cells(console, result.summaries)
    shards = ", ".join(f"{i}/{result.count}" for i in result.merged)
    _say(console, f"merged shards {shards}: {result.records} records in "
         f"{result.out / SAMPLES}")  # fmt: skip
    if not result.complete:
        _say(err, f"hpt: note: the merged run is incomplete: {'; '.join(result.missing)}; finish "
             f"it with: {result.resume_command}")  # fmt: skip
    _say(console, f"report: hpt report {result.out}  traces: hpt view {result.out}")
    return 0


def _say(console: Console, text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)
