"""Writing a run directory (``hpt.results.rundir`` names its files): ``samples.jsonl`` is
appended as samples finish, JSON files are replaced whole.

Durability: every batch is written whole and flushed, and fsync'ed at least once a second, so
a crash loses at most the samples in flight and, at worst, tears the last line; resuming cuts a
torn tail off. Writes happen in a worker thread, off the event loop."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import IO

from pydantic import BaseModel

from hpt.results.records import SampleRecord
from hpt.results.rundir import SAMPLES, RunDirError

FSYNC_EVERY_S = 1.0


class RunStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.samples = directory / SAMPLES
        self._fh: IO[str] | None = None
        self._synced = 0.0

    def check_free(self) -> None:
        """Refuse a directory that already holds records: never overwrite finished work."""
        if self.samples.exists() and self.samples.stat().st_size > 0:
            raise RunDirError(
                f"{self.directory} already holds a run; choose another --out, or continue it "
                f"with: hpt run --resume {self.directory}"
            )

    def create(self) -> None:
        self.check_free()
        self._open("w")

    def reopen(self) -> None:
        """Append to an existing run, after cutting off a line torn by a crash."""
        repair_torn_tail(self.samples)
        self._open("a")

    def _open(self, how: str) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._fh = self.samples.open(how, encoding="utf-8")
        except OSError as exc:
            raise RunDirError(
                f"cannot write run directory {self.directory}: {exc.strerror}"
            ) from None

    async def append(self, records: list[SampleRecord]) -> None:
        lines = "".join(r.model_dump_json() + "\n" for r in records)
        await asyncio.to_thread(self._write, lines)

    def _write(self, text: str) -> None:
        assert self._fh is not None, "create() or reopen() first"
        self._fh.write(text)
        self._fh.flush()
        now = time.monotonic()
        if now - self._synced >= FSYNC_EVERY_S:
            os.fsync(self._fh.fileno())
            self._synced = now

    def write_json(self, name: str, model: BaseModel) -> None:
        """Whole or not at all: a crash mid-write leaves the previous file."""
        path = self.directory / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(model.model_dump_json(indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None


def repair_torn_tail(path: Path) -> int:
    """Cut a last line that has no newline (a write cut short); return the bytes removed."""
    if not path.exists():
        return 0
    with path.open("rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        # Walk back to the previous newline in blocks; records can be long.
        end = size
        while end > 0:
            start = max(0, end - 65536)
            fh.seek(start)
            block = fh.read(end - start)
            cut = block.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        else:
            keep = 0
        fh.truncate(keep)
        return size - keep
