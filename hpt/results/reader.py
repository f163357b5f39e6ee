"""Reading a run directory: ``run.json`` as reports need it, and the records of
``samples.jsonl`` one at a time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpt.results.info import TaskInfo, unknown_task
from hpt.results.records import SampleRecord, parse_record_json
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
    try:
        text = (directory / SPEC).read_text(encoding="utf-8")
    except FileNotFoundError:
        return RunInfo()
    try:
        return RunInfo.model_validate_json(text)
    except ValidationError as exc:
        first = str(exc).splitlines()[0]
        raise RunDirError(f"{directory / SPEC}: not a run description ({first})") from None


def require_run_dirs(*directories: Path) -> None:
    """Fail before any work when one of ``directories`` holds no records."""
    for directory in directories:
        if not (directory / SAMPLES).is_file():
            raise RunDirError(f"{directory} is not a run directory (no {SAMPLES})")


def iter_lines(directory: Path) -> Iterator[tuple[int, str]]:
    require_run_dirs(directory)
    path = directory / SAMPLES
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                yield lineno, line


def parse_record(directory: Path, lineno: int, line: str) -> SampleRecord:
    try:
        return parse_record_json(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(record)"
        where = f"{directory / SAMPLES}:{lineno}"
        raise RunDirError(f"{where}: not a sample record ({field}: {first['msg']})") from None


def read_records(directory: Path) -> Iterator[SampleRecord]:
    """Stream the records of a run directory, one at a time; a corrupt line names its place.
    A torn last line (no newline: the run was killed mid-write) is skipped."""
    path = directory / SAMPLES
    for lineno, line in iter_lines(directory):
        if not line.endswith("\n"):
            try:
                json.loads(line)
            except json.JSONDecodeError:
                return
        yield parse_record(path.parent, lineno, line)
