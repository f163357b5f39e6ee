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
from hpt.tasks import Sample


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


class FinishedRecords:
    """The keys (``Cell.key``) of a run's finished records: ``key in finished``, ``len``.
    A key of a planned sample is a byte at the sample's place in its cell's plan, one
    bytearray per cell and draw, the places found through one index of sample ids per
    dataset (the plan's own id strings): resuming a million-record run holds ~1 MB of marks
    and ~70 MB of index a dataset, not ~200 MB of key tuples a cell. Keys of samples the
    plan does not hold (a data file changed since) are kept whole."""

    def __init__(self, plans: Mapping[Cell, CellPlan] = {}) -> None:
        # cell's part of a key -> (its samples, marks by draw)
        self._cells = {
            cell.key("", 0)[:-2]: (plan.samples, dict[int, bytearray]())
            for cell, plan in plans.items()
        }
        # id(samples) -> (samples, sample id -> place); the cells of a dataset share one list
        self._places: dict[int, tuple[list[Sample], dict[str, int]]] = {}
        self._others: set[tuple[Any, ...]] = set()
        self._count = 0

    def _slot(self, key: tuple[Any, ...]) -> tuple[dict[int, bytearray], int, int] | None:
        """Where ``key`` is marked: its cell's marks by draw, its place and its cell's size."""
        cell = self._cells.get(key[:-2])
        if cell is None:
            return None
        samples, marks = cell
        indexed = self._places.get(id(samples))
        if indexed is None:
            places = {sample.id: place for place, sample in enumerate(samples)}
            indexed = self._places[id(samples)] = samples, places
        place = indexed[1].get(key[-2])
        return None if place is None else (marks, place, len(samples))

    def add(self, key: tuple[Any, ...]) -> None:
        slot = self._slot(key)
        if slot is None:
            self._count += key not in self._others
            self._others.add(key)
            return
        marks, place, size = slot
        drawn = marks.get(key[-1])
        if drawn is None:
            drawn = marks[key[-1]] = bytearray(size)
        self._count += not drawn[place]
        drawn[place] = 1

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple):
            return False
        slot = self._slot(key)
        if slot is None:
            return key in self._others
        marks, place, _ = slot
        drawn = marks.get(key[-1])
        return drawn is not None and drawn[place] == 1

    def __len__(self) -> int:
        return self._count


def read_back(out: Path, plans: Mapping[Cell, CellPlan], retry_errors: bool) -> FinishedRecords:
    """Count a run's finished records into the tallies and return their keys. Records of
    samples that ended in an error are dropped (rewriting the file) when they will be rerun."""
    done = FinishedRecords(plans)
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
