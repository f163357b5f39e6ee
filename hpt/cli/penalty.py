"""``hpt run``'s penalty options: ``--penalty [DATASET=]VALUE`` sets HPI_dataset by hand,
``--annotations [DIR]`` measures it from ``hpt annotate``'s files; and the run's one notice
per dataset whose penalty no human measured, said as the run starts."""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from hpt.backends import BackendStats
from hpt.orchestrator.budget import Spend
from hpt.orchestrator.observer import RunObserver, SilentObserver, SpendWatcher
from hpt.orchestrator.penalties import penalty_notices
from hpt.orchestrator.spec import ConfigError, RunSpec
from hpt.results.annotations import ANNOTATIONS_ENV, default_annotations_dir
from hpt.results.penalties import Penalty, PenaltySource
from hpt.results.records import SampleRecord
from hpt.results.runfile import RunSummary
from hpt.results.tally import Tally

BY_FLAG = PenaltySource(kind="set", label="set by --penalty")


def penalty_arg(value: str) -> tuple[str | None, float]:
    """``VALUE`` (every dataset of the run) or ``DATASET=VALUE``; VALUE finite and >= 0 (an
    infinite penalty would make every HPI of a ladder that misses infinite)."""
    name, sep, raw = value.rpartition("=")
    try:
        number = float(raw)
    except ValueError:
        number = -1.0
    if (sep and not name.strip()) or not (math.isfinite(number) and number >= 0):
        raise argparse.ArgumentTypeError(
            f"{value!r}: expected [DATASET=]VALUE with VALUE a finite number >= 0, e.g. 2.5 or "
            "gpqa=3.1"
        )
    return (name.strip() or None), number


def add_penalty_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--penalty",
        action="append",
        type=penalty_arg,
        metavar="[DATASET=]VALUE",
        help="HPI_dataset, what an unresolved sample scores beyond the ladder's m levels: for "
        "every dataset of the run, or DATASET= one; repeatable (default: annotated, else the "
        "dataset's own, with its source)",
    )
    p.add_argument(
        "--annotations",
        nargs="?",
        type=Path,
        const=default_annotations_dir(),
        metavar="DIR",
        help=f"measure each dataset's HPI_dataset from the hpt annotate files in DIR (alone: "
        f"${ANNOTATIONS_ENV} or {default_annotations_dir()})",
    )


def apply_penalty_flags(args: argparse.Namespace, merged: dict[str, Any]) -> None:
    """Put ``--penalty`` and ``--annotations`` into the run's settings ``merged``."""
    if args.annotations is not None:
        merged["annotations"] = args.annotations
    if not args.penalty:
        return
    named = merged.get("dataset") or []
    datasets = [named] if isinstance(named, str) else list(named)
    given = dict(merged.get("penalties") or {})
    for name, value in args.penalty:
        if name is not None and name not in datasets:
            raise ConfigError(
                f"--penalty {name}={value:g}: the run has no dataset {name!r} "
                f"({', '.join(datasets) or 'none named'})"
            )
        for dataset in [name] if name else datasets:
            given[dataset] = Penalty(value=value, source=BY_FLAG)
    merged["penalties"] = given


def given_penalty_flags(args: argparse.Namespace) -> list[str]:
    return [f for f in ("penalty", "annotations") if getattr(args, f) is not None]


class PenaltyNotices(SilentObserver):
    """Passes a run's progress on to ``inner``; when the run starts (its settings checked,
    every penalty fixed) it first says, once per dataset, which penalty it uses where no
    human measured it and nobody set one."""

    def __init__(self, err: Console, inner: RunObserver | None) -> None:
        self._err = err
        self._inner = inner or SilentObserver()

    def watch(self, backends: Mapping[str, BackendStats]) -> None:
        self._inner.watch(backends)

    def watch_spend(self, spend: Spend, budget_usd: float | None, max_calls: int | None) -> None:
        if isinstance(self._inner, SpendWatcher):
            self._inner.watch_spend(spend, budget_usd, max_calls)

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        for line in penalty_notices(spec.penalties):
            self._err.print(f"hpt: note: {line}", markup=False, highlight=False, soft_wrap=True)
        self._inner.started(spec, total, out, done)

    def recorded(self, record: SampleRecord, tally: Tally) -> None:
        self._inner.recorded(record, tally)

    def finished(self, result: RunSummary) -> None:
        self._inner.finished(result)
