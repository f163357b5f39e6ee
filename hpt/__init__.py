"""hpt: evaluate language models with the Hierarchical Prompting Taxonomy.

Scripts: ``results = await hpt.evaluate(models=[...], datasets=[...], mode=[...])``."""

from __future__ import annotations

from typing import Any

__version__ = "0.3.0"

# Loaded on first use, so that ``import hpt`` (and ``hpt --version``) stays light.
_LAZY = {
    "evaluate": "hpt.orchestrator.api",
    "resume": "hpt.orchestrator.api",
    "RunSpec": "hpt.orchestrator.spec",
    "RunResult": "hpt.orchestrator.runner",
    "RunObserver": "hpt.orchestrator.observer",
    "SilentObserver": "hpt.orchestrator.observer",
    "Summary": "hpt.results.tally",
    "SampleRecord": "hpt.results.records",
    "read_records": "hpt.results.reader",
    "summarize_cells": "hpt.results.tally",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hpt' has no attribute {name!r}")
