"""What every subcommand shares: exit codes, list arguments, tables of plain text."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from hpt.errors import EXIT_FAILURE as EXIT_FAILURE
from hpt.errors import EXIT_USAGE as EXIT_USAGE
from hpt.orchestrator.spec import ConfigError
from hpt.results.info import TaskInfo
from hpt.tasks import TASKS

EXIT_INTERRUPTED = 130
# The run's budget (--budget-usd, --max-calls) stopped it: what it finished is kept and a
# resume with a higher budget goes on.
EXIT_BUDGET = 3


class PlainTable(Table):
    """A table whose cells are text as given, never markup: cells carry model, dataset,
    strategy and annotator names, which a user or a plugin chooses ("[red]x[/]" and
    ":smile:" show as written)."""

    def add_row(self, *renderables: RenderableType | None, **options: Any) -> None:
        super().add_row(*(Text(r) if isinstance(r, str) else r for r in renderables), **options)


def names(value: str) -> list[str]:
    """A comma-separated list: ``boolq,csqa``."""
    return [s.strip() for s in value.split(",") if s.strip()]


def modes(value: str) -> list[str]:
    chosen = names(value)
    for mode in chosen:
        if mode not in ("standard", "adaptive"):
            raise argparse.ArgumentTypeError(f"{mode!r}: choose standard or adaptive")
    return chosen


def port(value: str) -> int:
    """A TCP port to listen on; 0 lets the system choose a free one."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: expected a port number 0-65535") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(
            f"{value}: a port is 0-65535 (0: any free port; below 1024 needs privileges)"
        )
    return number


def floats(value: str) -> list[float]:
    try:
        return [float(v) for v in names(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: expected numbers such as 0.15,0.2") from None


def positive_number(value: str) -> float:
    """A number above 0 (an amount of money, seconds)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: expected a number such as 2.5") from None
    if not number > 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"{value}: expected a number above 0")
    return number


def require_positive(args: argparse.Namespace, *flags: str) -> None:
    for flag in flags:
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} must be at least 1")


def print_written(console: Console, paths: list[Path]) -> None:
    console.print(
        "wrote " + ", ".join(str(p) for p in paths),
        highlight=False, markup=False, soft_wrap=True,
    )  # fmt: skip


def installed_descriptions() -> dict[str, TaskInfo]:
    """The installed tasks' descriptions, for run directories saved before run.json
    carried them; a directory's own descriptions always come first."""
    return {name: task.info() for name, task in TASKS.items()}
