"""Reading a run directory: ``run.json`` as reports need it, and the records of
``samples.jsonl`` one at a time, each (sample, draw) of a cell once.

Every way a file can be broken (not UTF-8, not JSON, a JSON value of the wrong type, cut
short, unreadable) is one ``RunDirError`` naming the file, and the line for ``samples.jsonl``."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpt.errors import validation_message
from hpt.results.info import TaskInfo, unknown_task
from hpt.results.records import Cell, SampleRecord, parse_record_json
from hpt.results.rundir import SAMPLES, SPEC, RunDirError


class RunInfo(BaseModel):
    """What readers of a run take from ``run.json``; the run room writes the whole spec."""

    model_config = ConfigDict(extra="ignore")

    hpt_version: str = ""
    strategies: list[str] = Field(default_factory=list)
    # Each dataset as reports see it (kind, metrics, corpus rule, table).
    tasks: dict[str, TaskInfo] = Field(default_factory=dict)

    def task(self, name: str) -> TaskInfo:
        return self.tasks.get(name) or unknown_task(name)


def read_run_info(directory: Path) -> RunInfo:
    """``run.json`` as readers need it; an empty description when there is none."""
    path = directory / SPEC
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return RunInfo()
    except OSError as exc:
        raise RunDirError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise RunDirError(f"{path}:{line}: not UTF-8 text; is it a run directory's?") from None
    try:
        return RunInfo.model_validate_json(text)
    except ValidationError as exc:
        problem = validation_message(exc, whole="(file)")
        raise RunDirError(f"{path}: not a run description ({problem})") from None


def require_run_dirs(*directories: Path) -> None:
    """Fail before any work when one of ``directories`` holds no records."""
    for directory in directories:
        if not (directory / SAMPLES).is_file():
            raise RunDirError(f"{directory} is not a run directory (no {SAMPLES})")


def iter_lines(directory: Path) -> Iterator[tuple[int, str]]:
    """The non-blank lines of ``samples.jsonl`` with their numbers. A last line without a
    newline is torn (the run was killed mid-write): it is yielded, for the caller to judge,
    only when it is text, since a write cut inside a character is not."""
    require_run_dirs(directory)
    path = directory / SAMPLES
    try:
        with path.open("rb") as fh:
            # Bytes, split on b"\n" only: a decoding error then names its line.
            for lineno, raw in enumerate(fh, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    if not raw.endswith(b"\n"):
                        return
                    raise RunDirError(f"{path}:{lineno}: not UTF-8 text") from None
                if line.strip():
                    yield lineno, line
    except OSError as exc:
        raise RunDirError(f"cannot read {path}: {exc.strerror or exc}") from None


def parse_record(directory: Path, lineno: int, line: str) -> SampleRecord:
    try:
        return parse_record_json(line)
    except ValidationError as exc:
        where = f"{directory / SAMPLES}:{lineno}"
        problem = validation_message(exc, whole="(record)")
        raise RunDirError(f"{where}: not a sample record ({problem})") from None


def note_duplicates(path: Path, count: int) -> None:
    """What every reader says when it dropped records: one line on stderr."""
    print(
        f"hpt: note: {path} holds {count} duplicate record{'s' if count != 1 else ''} of the "
        f"same sample and draw; each was counted once",
        file=sys.stderr,
        flush=True,
    )


class RecordReader:
    """The records of one run directory, streamed, each (sample, draw) of a cell once.

    Two writers, or hand-merged files, can leave a sample's record twice. The first one is
    kept: it is the one ``hpt run --resume --keep-errors`` keeps (a plain resume first drops
    records that ended in an error, to run them again), and deciding at the first sight keeps
    the stream a stream. Memory holds each cell's (sample, draw) keys, never the records.

    After a full pass ``duplicates`` (and ``duplicates_by_cell``) say how many were dropped,
    and ``on_duplicates(path, count)`` has been told, when there were any (by default: one
    note on stderr; None: say nothing). Each pass reads the file afresh."""

    def __init__(
        self,
        directory: Path,
        on_duplicates: Callable[[Path, int], None] | None = note_duplicates,
    ) -> None:
        self.directory = directory
        self.on_duplicates = on_duplicates
        self.duplicates_by_cell: Counter[Cell] = Counter()

    @property
    def path(self) -> Path:
        return self.directory / SAMPLES

    @property
    def duplicates(self) -> int:
        return self.duplicates_by_cell.total()

    def __iter__(self) -> Iterator[SampleRecord]:
        self.duplicates_by_cell = Counter()
        seen: dict[Cell, set[tuple[str, int]]] = {}
        for lineno, line in iter_lines(self.directory):
            if not line.endswith("\n"):
                try:
                    json.loads(line)
                except json.JSONDecodeError:
                    break
            record = parse_record(self.directory, lineno, line)
            cell = record.cell
            keys = seen.setdefault(cell, set())
            key = (record.sample_id, record.draw)
            if key in keys:
                self.duplicates_by_cell[cell] += 1
                continue
            keys.add(key)
            yield record
        if self.duplicates and self.on_duplicates is not None:
            self.on_duplicates(self.path, self.duplicates)


def read_records(
    directory: Path, on_duplicates: Callable[[Path, int], None] | None = note_duplicates
) -> RecordReader:
    """The records of a run directory, one at a time, each (sample, draw) of a cell once; a
    corrupt line names its place. A torn last line (no newline: the run was killed
    mid-write) is skipped."""
    return RecordReader(directory, on_duplicates)
