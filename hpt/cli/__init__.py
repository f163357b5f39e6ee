"""The ``hpt`` command line. ``hpt --version`` answers without importing the subcommands
(LangGraph, the backends, the tasks): the rest is imported on the way to a command."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from hpt import __version__


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        print(f"hpt {__version__}")
        return 0
    from hpt.cli.main import main as run_command

    return run_command(args)


__all__ = ["main"]
