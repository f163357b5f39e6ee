"""What every subcommand shares: the errors a user can cause, exit codes, list arguments."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from hpt.backends import BackendError, CacheError, UnknownModelSpecError
from hpt.depth.graph import GraphError
from hpt.graphs import UnknownStrategyError
from hpt.plugins import PluginError
from hpt.prompts import PromptError
from hpt.reports import ReportError
from hpt.results.rundir import RunDirError
from hpt.runs.spec import ConfigError
from hpt.tasks import DatasetError, UnknownTaskError

# Each is reported as one line, "hpt: error: ...", with exit status 2.
USER_ERRORS: tuple[type[Exception], ...] = (
    PluginError,
    BackendError,
    CacheError,
    ConfigError,
    DatasetError,
    GraphError,
    PromptError,
    ReportError,
    RunDirError,
    UnknownModelSpecError,
    UnknownStrategyError,
    UnknownTaskError,
)
EXIT_FAILURE = 1  # the machine's failure (a full disk) or hpt's own (a bug)
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


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


def require_positive(args: argparse.Namespace, *flags: str) -> None:
    for flag in flags:
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} must be at least 1")
