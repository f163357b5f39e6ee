"""Resuming a run: its saved spec and plugins, and its finished records counted back in."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hpt.errors import validation_message
from hpt.orchestrator.planning import (
    CellPlan,
)
from hpt.orchestrator.spec import SavedSpec
from hpt.plugins import PluginError, installed_plugins, load_plugins
from hpt.results.reader import iter_lines, parse_record
from hpt.results.records import Cell
from hpt.results.rundir import SAMPLES, SPEC, RunDirError
from hpt.results.store import drop_lines


def load_saved_spec(directory: Path) -> SavedSpec:
    try:
        raw = (directory / SPEC).read_bytes()
    except FileNotFoundError:
        raise RunDirError(f"{directory} is not a run directory (no {SPEC})") from None
    except OSError as exc:
        raise RunDirError(f"cannot read {directory / SPEC}: {exc.strerror}") from None
    try:  # as bytes: text that is not UTF-8 is a ValidationError too
        return SavedSpec.model_validate_json(raw)
    except ValidationError as exc:
        problem = validation_message(exc, whole="(document)")
        raise RunDirError(f"{directory / SPEC}: not a run spec ({problem})") from None


def load_saved_plugins(directory: Path, modules: Sequence[str], *, trust: bool) -> None:
    """Import the plugins a saved run names (its ``plugins``). Importing runs a module's code,
    and a run directory may come from anyone: without ``trust``, every one of them must be
    installed as an ``hpt.plugins`` entry point or already imported (``--plugin``)."""
    known = {ep.module for ep in installed_plugins()}
    strangers = [m for m in modules if m not in known and m not in sys.modules]
    if strangers and not trust:
        raise PluginError(
            f"{directory / SPEC} names plugins that resuming would import, running their "
            f"code: {', '.join(strangers)}; resume with --trust-plugins if you trust them"
        )
    load_plugins(modules, installed=False)


def read_back(
    out: Path, plans: Mapping[Cell, CellPlan], retry_errors: bool
) -> set[tuple[Any, ...]]:
    """Count a run's finished records into the tallies and return their keys. Records of
    samples that ended in an error are dropped (rewriting the file) when they will be rerun."""
    done: set[tuple[Any, ...]] = set()
    dropped: set[int] = set()
    samples = out / SAMPLES
    if not samples.exists():
        return done
    for lineno, line in iter_lines(out):
        if not line.endswith("\n"):
            break  # torn by a crash; reopen() cuts it
        record = parse_record(out, lineno, line)
        plan = plans.get(record.cell)
        if plan is None:
            raise RunDirError(
                f"{samples}:{lineno}: a record of {record.cell.title}, "
                f"which this run's spec does not include"
            )
        if (retry_errors and record.error is not None) or record.key in done:
            dropped.add(lineno)
            continue
        done.add(record.key)
        plan.tally.add(record)
    if dropped:  # rare: rewrite only then
        drop_lines(out, dropped)
    return done
