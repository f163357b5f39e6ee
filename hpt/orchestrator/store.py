"""The run directory: ``run.json`` (spec), ``samples.jsonl`` (records, appended as samples
finish), ``summary.json`` (metrics). Writes happen in a worker thread, off the event loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ValidationError

from hpt.orchestrator.records import SampleRecord

SAMPLES = "samples.jsonl"
SUMMARY = "summary.json"
SPEC = "run.json"


class RunDirError(ValueError):
    pass


class RunStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fh: IO[str] | None = None

    def check_free(self) -> None:
        """Refuse a directory that already holds records: never overwrite finished work."""
        samples = self.directory / SAMPLES
        if samples.exists() and samples.stat().st_size > 0:
            raise RunDirError(f"{self.directory} already holds a run; choose another --out")

    def create(self) -> None:
        self.check_free()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._fh = (self.directory / SAMPLES).open("w", encoding="utf-8")
        except OSError as exc:
            raise RunDirError(
                f"cannot write run directory {self.directory}: {exc.strerror}"
            ) from None

    async def append(self, records: list[SampleRecord]) -> None:
        lines = "".join(r.model_dump_json() + "\n" for r in records)
        await asyncio.to_thread(self._write, lines)

    def _write(self, text: str) -> None:
        assert self._fh is not None, "create() first"
        self._fh.write(text)
        self._fh.flush()

    def write_json(self, name: str, model: BaseModel) -> None:
        (self.directory / name).write_text(model.model_dump_json(indent=2) + "\n", encoding="utf-8")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_records(directory: Path) -> Iterator[SampleRecord]:
    """Stream the records of a run directory; a corrupt line names its place."""
    path = directory / SAMPLES
    if not path.is_file():
        raise RunDirError(f"{directory} is not a run directory (no {SAMPLES})")
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield SampleRecord.model_validate(json.loads(line))
            except (json.JSONDecodeError, ValidationError) as exc:
                first = str(exc).splitlines()[0]
                raise RunDirError(f"{path}:{lineno}: not a sample record ({first})") from None
