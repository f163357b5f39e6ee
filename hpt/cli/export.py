"""``hpt export``: a run directory into another tool's format (``hpt.exports``): an inspect_ai
eval log, a Hugging Face dataset, a W&B run or an MLflow run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from hpt.cli.common import installed_descriptions


def add_parser(sub: Any) -> None:
    from hpt.exports import EXPORTS_DIR, FORMATS

    exp = sub.add_parser(
        "export",
        help="export a run to inspect_ai's log viewer, a Hugging Face dataset, W&B or MLflow",
    )
    exp.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    exp.add_argument(
        "--to",
        required=True,
        choices=list(FORMATS),
        metavar="FORMAT",
        help="inspect (an eval log for inspect view), hf (a datasets folder with a dataset "
        "card), wandb (an offline W&B run), mlflow (an MLflow run in a local file store)",
    )
    exp.add_argument(
        "--out", type=Path, help=f"where the export goes (default RUN_DIR/{EXPORTS_DIR}/)"
    )
    exp.add_argument(
        "--push",
        metavar="TARGET",
        help="send it: hf: a Hub dataset repo (USER/NAME); wandb: ENTITY/PROJECT or PROJECT; "
        "mlflow: a tracking URI. Without it nothing leaves the machine",
    )


def command(args: argparse.Namespace, console: Console) -> int:
    from hpt.exports import export

    done = export(
        args.run_dir, args.to, out=args.out, push=args.push, describe=installed_descriptions().get
    )
    records = f"{done.samples} sample record{'s' if done.samples != 1 else ''}"
    where = f"{done.path}" + (f" and pushed to {done.target}" if done.target else "")
    console.print(
        f"exported {records} as {done.format} to {where}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return 0
