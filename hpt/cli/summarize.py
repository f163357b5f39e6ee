"""``hpt summarize``: a run's metrics recomputed from its records alone."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from rich.console import Console

from hpt.cli.common import installed_descriptions
from hpt.cli.progress import print_table, summary_table
from hpt.results.reader import read_records, read_run_info, require_run_dirs
from hpt.results.tally import Summary, summarize_cells


def add_parser(sub: Any) -> None:
    summ = sub.add_parser("summarize", help="recompute a run's metrics from its records")
    summ.add_argument("run_dir", type=Path)


def command(args: argparse.Namespace, console: Console) -> int:
    require_run_dirs(args.run_dir)
    run = read_run_info(args.run_dir)
    summaries = summarize_cells(
        read_records(args.run_dir), {**installed_descriptions(), **run.tasks}
    )
    for summary in summaries:
        # Each cell's own ladder (from its records), not the run's --strategies.
        print_table(console, summary_table(summary))
    print(TypeAdapter(list[Summary]).dump_json(summaries, indent=2).decode())
    return 0
