"""What the DSPy strategies share across the samples of a run: one optimisation per
dataset x model x reasoning setting x strategy (single-flight), the program files, and the
calls/tokens meters."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hpt.backends import Backend, FatalBackendError
from hpt.errors import StorageError
from hpt.structured.engine import Meter

T = TypeVar("T")
PROGRAMS_DIR = "programs"
USAGE_FILE = "usage.json"


class OptimisationError(FatalBackendError):
    """An optimiser could not produce a program for a cell. It stops the run with one
    message (the samples already finished are kept; ``hpt run --resume`` continues)."""


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "_"


class ProgramStore:
    """Run-wide: the optimised programs (each made once, shared by every sample and mode of
    its dataset x model x reasoning setting), the program files given with ``--program``,
    and the meters."""

    def __init__(self, out: Path | None, given: Mapping[str, Path] | None = None) -> None:
        self.out = out
        self.given = dict(given or {})
        self._lock = asyncio.Lock()
        self._memo: dict[tuple[str, ...], asyncio.Future[Any]] = {}
        self.meters: dict[tuple[str, ...], Meter] = {}

    async def once(self, key: tuple[str, ...], make: Callable[[], Awaitable[T]]) -> T:
        """``make()``'s result, computed by the first caller of ``key`` and awaited by the
        rest (its exception too)."""
        async with self._lock:
            future = self._memo.get(key)
            if future is None:
                future = asyncio.ensure_future(make())
                self._memo[key] = future
        result: T = await asyncio.shield(future)
        return result

    def meter(self, cell: tuple[str, ...], strategy: str) -> Meter:
        return self.meters.setdefault((*cell, strategy), Meter())

    @property
    def directory(self) -> Path | None:
        return None if self.out is None else self.out / PROGRAMS_DIR

    def usage(self) -> dict[str, Any]:
        return {
            _name(key): {p: u.model_dump() for p, u in meter.snapshot().items()}
            for key, meter in self.meters.items()
        }

    def write_usage(self) -> None:
        """``programs/usage.json``: calls and tokens of optimisation vs evaluation, by cell
        and strategy (accumulated over this session of the run)."""
        if self.directory is None or not self.meters:
            return
        text = json.dumps(self.usage(), indent=2)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            # Whole or not at all, as the run's own JSON files.
            tmp = self.directory / f"{USAGE_FILE}.tmp"
            try:
                tmp.write_text(text + "\n", encoding="utf-8")
                tmp.replace(self.directory / USAGE_FILE)
            finally:
                tmp.unlink(missing_ok=True)
        except OSError as exc:
            raise StorageError("the programs' usage", self.directory / USAGE_FILE, exc) from exc


def _name(key: tuple[str, ...]) -> str:
    """A cell's strategy as file names and usage.json name it: its parts joined by "__"
    ("gsm8k__openai_gpt-4o__dspy_bfrs", "gsm8k__openai_o3__effort_high__dspy_bfrs")."""
    *cell, strategy = key
    return "__".join([*(_safe(part) for part in cell if part), strategy])


@dataclass
class CellRuntime:
    """What a strategy needs beyond one sample: the cell it is in, the run's program store,
    the model that proposes instructions (MIPROv2's prompt model) and the run's epoch."""

    dataset: str
    model: str  # the evaluated model's label
    store: ProgramStore = field(default_factory=lambda: ProgramStore(None))
    prompt_model: Backend | None = None
    epoch: int = 0
    # The cell's reasoning settings (``Cell.reasoning_label``: "effort high"; "" where it has
    # none). Cells of other settings ask the model otherwise: each optimises its own program,
    # under its own file and meter; "" keeps the names runs saved before.
    reasoning: str = ""

    @property
    def cell(self) -> tuple[str, ...]:
        return self.dataset, self.model, self.reasoning

    def program_file(self, strategy: str) -> Path | None:
        directory = self.store.directory
        if directory is None:
            return None
        return directory / f"{_name((*self.cell, strategy))}.json"

    def given_program(self, strategy: str) -> Path | None:
        """The ``--program`` file for ``strategy`` in this cell: ``STRATEGY:DATASET=FILE``
        before ``STRATEGY=FILE``."""
        given = self.store.given
        return given.get(f"{strategy}:{self.dataset}") or given.get(strategy)

    def meter(self, strategy: str) -> Meter:
        return self.store.meter(self.cell, strategy)

    async def once(self, strategy: str, make: Callable[[], Awaitable[T]]) -> T:
        return await self.store.once((*self.cell, strategy), make)
