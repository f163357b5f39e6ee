"""The ``hpt`` command line."""

from hpt.cli.main import main

__all__ = ["main"]
