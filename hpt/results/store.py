"""Writing a run directory (``hpt.results.rundir`` names its files): ``samples.jsonl`` is
appended as samples finish, JSON files are replaced whole.

Durability: every batch is written whole and flushed, and fsync'ed at least once a second, so
a crash loses at most the samples in flight and, at worst, tears the last line; resuming cuts a
torn tail off. Writes happen in a worker thread, off the event loop.

A write that fails (disk full, read-only, I/O error) raises ``StorageError`` and leaves nothing
half-written: a batch cut short is cut off the records, a JSON file's temporary file removed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import IO

from pydantic import BaseModel

from hpt.errors import StorageError
from hpt.results.reader import iter_lines
from hpt.results.records import SampleRecord
from hpt.results.rundir import SAMPLES, SPEC, SUMMARY, RunDirError

FSYNC_EVERY_S = 1.0
# What each JSON file is, for a failure to name.
JSON_FILES = {SPEC: "the run spec", SUMMARY: "the summary"}


class RunStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.samples = directory / SAMPLES
        # Unbuffered: each batch is one write, and a failed one is known to the byte.
        self._fh: IO[bytes] | None = None
        self._synced = 0.0
        self._size = 0  # bytes of whole records in the file
        self.appended = 0  # records appended since create() or reopen()

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
            self._fh = self.samples.open(how + "b", buffering=0)
            self._size = os.fstat(self._fh.fileno()).st_size
        except OSError as exc:
            raise RunDirError(
                f"cannot write run directory {self.directory}: {exc.strerror}"
            ) from None

    async def append(self, records: list[SampleRecord]) -> None:
        lines = "".join(r.model_dump_json() + "\n" for r in records).encode()
        await asyncio.to_thread(self._write, lines)
        self.appended += len(records)

    def _write(self, data: bytes) -> None:
        fh = self._fh
        assert fh is not None, "create() or reopen() first"
        try:
            view = memoryview(data)
            while view:  # a write may take part of the batch (a signal, a nearly full disk)
                view = view[fh.write(view) :]
            now = time.monotonic()
            if now - self._synced >= FSYNC_EVERY_S:
                os.fsync(fh.fileno())
                self._synced = now
        except OSError as exc:
            # The records of a batch cut short are cut off again: none of it was counted.
            with contextlib.suppress(OSError):
                os.ftruncate(fh.fileno(), self._size)
            raise StorageError("a record", self.samples, exc) from None
        self._size += len(data)

    def write_json(self, name: str, model: BaseModel) -> None:
        """Whole or not at all: a crash or a failed write leaves the previous file, and no
        temporary one."""
        path = self.directory / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        try:
            tmp.unlink(missing_ok=True)  # a leftover, or a link: the new file is our own
            # O_EXCL|O_NOFOLLOW: written only into a file this call made.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with open(fd, "w", encoding="utf-8") as fh:
                fh.write(model.model_dump_json(indent=2) + "\n")
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise StorageError(JSON_FILES.get(name, name), path, exc) from None

    def close(self) -> None:
        fh, self._fh = self._fh, None
        if fh is None:
            return
        try:
            os.fsync(fh.fileno())
        except OSError as exc:
            raise StorageError("a record", self.samples, exc) from None
        finally:
            fh.close()


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


def drop_lines(out: Path, dropped: set[int]) -> None:
    """Rewrite ``out``'s records without the lines numbered in ``dropped`` (and without a
    torn last line), whole or not at all: the new file replaces the old only once it is
    written and on disk."""
    samples = out / SAMPLES
    keep = samples.with_suffix(".jsonl.resume")
    try:
        with keep.open("w", encoding="utf-8") as kept:
            for lineno, line in iter_lines(out):
                if lineno not in dropped and line.endswith("\n"):
                    kept.write(line)
            kept.flush()
            os.fsync(kept.fileno())
        os.replace(keep, samples)
    except OSError as exc:
        with contextlib.suppress(OSError):
            keep.unlink(missing_ok=True)
        raise StorageError("the records to run again", samples, exc) from None
