"""``hpt view --serve``: the trace viewer served live on loopback while a campaign runs.

The server follows each run directory's ``samples.jsonl`` by byte offset: only the bytes
appended since the last look are read, and only whole lines (a last line without its newline
is still being written, so it is not yet a record). Each new record becomes an index row and
goes into its cell's tally (``ViewIndex``); memory holds the rows and each row's place in the
file, and a record is read again from there when the page opens it. The page asks
``/api/updates?since=ROWS&v=VERSION`` a few times a second and gets only the rows it lacks,
and the summary only when it changed; a look at the files happens at most every
``REFRESH_S``, however many pages ask. ``spend.json`` (the cost so far) and ``summary.json``
(written when the run ends) are read when they change."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from hpt.errors import validation_message
from hpt.results.records import parse_record_json
from hpt.results.rundir import SAMPLES, SPEC, SUMMARY, RunDirError
from hpt.viewer.index import CostMeter, ViewIndex
from hpt.viewer.loopback import listening
from hpt.viewer.page import page_head, page_tail

REFRESH_S = 0.1  # the files are looked at no more often than this
SUMMARY_EVERY_S = 0.5  # nor are the summaries recomputed more often than this
ROWS_PER_ANSWER = 5000  # a page catching up on a big run gets it in parts
READ_BYTES = 8 << 20  # nor is more than this read from a file at one look
# What the CLI gives to read a run's spending ledger (spend.json, kept by the orchestrator):
# its content as JSON, None where there is none.
SpendReader = Callable[[Path], dict[str, Any] | None]


@dataclass
class _Followed:
    """One run directory as far as it has been read."""

    directory: Path
    offset: int = 0  # bytes of samples.jsonl read, up to the end of the last whole line
    lineno: int = 0
    spend_stamp: tuple[float, int] | None = None
    spend: dict[str, Any] | None = None
    complete: bool | None = None


class LiveRun:
    """What the server knows of the followed run directories, brought up to date by
    ``refresh`` (in a thread: it reads files and parses records)."""

    def __init__(
        self,
        run_dirs: list[Path],
        spend: SpendReader | None = None,
        cost: CostMeter | None = None,
    ) -> None:
        for directory in run_dirs:
            if not ((directory / SAMPLES).is_file() or (directory / SPEC).is_file()):
                raise RunDirError(f"{directory} is not a run directory (no {SPEC} or {SAMPLES})")
        self.followed = [_Followed(d) for d in run_dirs]
        self.read_spend = spend
        self.index = ViewIndex(cost)
        # Row -> (its directory's place in ``followed``, its line's place in the file).
        self.places: list[tuple[int, int, int]] = []
        self.problem: str | None = None
        self.version = 0  # of the summary: grows when records or the ledgers change
        self._summary: list[dict[str, Any]] = []
        self._summary_version = -1
        self._summary_at = 0.0

    def refresh(self) -> None:
        changed = False
        for k, run in enumerate(self.followed):
            changed |= self._read_records(k, run)
            changed |= self._read_files(run)
        if changed:
            self.version += 1

    def _read_records(self, k: int, run: _Followed) -> bool:
        path = run.directory / SAMPLES
        try:
            with path.open("rb") as fh:
                fh.seek(run.offset)
                chunk = fh.read(READ_BYTES)
        except FileNotFoundError:
            return False  # the run has not written its first record yet
        except OSError as exc:
            self.problem = f"cannot read {path}: {exc.strerror or exc}"
            return False
        end = chunk.rfind(b"\n") + 1  # a torn last line waits for its newline
        if end == 0:
            if len(chunk) == READ_BYTES:
                self.problem = f"{path}: a line longer than {READ_BYTES >> 20} MB; not followed"
            return False
        added = False
        start = 0
        while start < end:
            stop = chunk.index(b"\n", start) + 1
            raw = chunk[start:stop]
            place = run.offset + start
            start = stop
            run.lineno += 1
            if not raw.strip():
                continue
            try:
                record = parse_record_json(raw.decode("utf-8"))
            except UnicodeDecodeError:
                self.problem = f"{path}:{run.lineno}: not UTF-8 text; line skipped"
                continue
            except ValidationError as exc:
                problem = validation_message(exc, whole="(record)")
                self.problem = f"{path}:{run.lineno}: not a sample record ({problem}); skipped"
                continue
            try:
                row = self.index.add(record, run.directory)
            except RunDirError as exc:
                self.problem = str(exc)
                continue
            if row is not None:
                self.places.append((k, place, len(raw)))
                added = True
        run.offset += end
        return added

    def _read_files(self, run: _Followed) -> bool:
        changed = False
        if self.read_spend is not None:
            try:
                stat = (run.directory / "spend.json").stat()
                stamp: tuple[float, int] | None = (stat.st_mtime, stat.st_size)
            except OSError:
                stamp = None
            if stamp != run.spend_stamp:
                try:
                    run.spend = self.read_spend(run.directory) if stamp else None
                except RunDirError:
                    pass  # caught mid-write elsewhere; read again at its next change
                else:
                    run.spend_stamp, changed = stamp, True
        if not run.complete:
            try:
                complete = json.loads((run.directory / SUMMARY).read_bytes()).get("complete")
            except (OSError, ValueError, AttributeError):
                complete = None
            if complete != run.complete:
                run.complete, changed = bool(complete) if complete is not None else None, True
        return changed

    def summary(self) -> list[dict[str, Any]]:
        """The cells' summaries, recomputed when records have come, at most every
        ``SUMMARY_EVERY_S``."""
        now = time.monotonic()
        if self._summary_version != self.version and now - self._summary_at >= SUMMARY_EVERY_S:
            self._summary = self.index.summary()
            self._summary_version, self._summary_at = self.version, now
        return self._summary

    def updates(self, since: int, version: int) -> dict[str, Any]:
        """The rows from ``since`` on (at most ROWS_PER_ANSWER), the cells, and the summary
        when the page's (``version``) is older."""
        rows = self.index.rows[since : since + ROWS_PER_ANSWER]
        answer: dict[str, Any] = {
            "rows": rows,
            "total": len(self.index.rows),
            "cells": self.index.cell_info,
            "reasoning": self.index.settings(),
            "problem": self.problem,
        }
        summary = self.summary()
        if version != self._summary_version:
            answer["summary"] = summary
            answer["spend"] = [
                {"directory": run.directory.name, **run.spend}
                for run in self.followed
                if run.spend is not None
            ]
            answer["complete"] = all(run.complete for run in self.followed)
            answer["version"] = self._summary_version
        return answer

    def record(self, row: int) -> bytes:
        """The JSON of row ``row``'s record, read again from its line."""
        k, place, length = self.places[row]
        with (self.followed[k].directory / SAMPLES).open("rb") as fh:
            fh.seek(place)
            return fh.read(length)


class LiveServer:
    def __init__(self, run: LiveRun, title: str) -> None:
        self.run = run
        self.title = title
        self._lock = asyncio.Lock()
        self._looked = 0.0

    async def _fresh(self) -> None:
        async with self._lock:
            if time.monotonic() - self._looked >= REFRESH_S:
                await asyncio.to_thread(self.run.refresh)
                self._looked = time.monotonic()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_get("/api/updates", self._updates)
        app.router.add_get("/api/record/{row}", self._record)
        return app

    async def _index(self, request: web.Request) -> web.Response:
        # Empty at first: the page fills itself from /api/updates.
        data = {"live": True, "cells": [], "rows": [], "reasoning": [], "summary": [],
                "spend": [], "complete": None}  # fmt: skip
        return web.Response(text=page_head(self.title) + page_tail(data), content_type="text/html")

    async def _updates(self, request: web.Request) -> web.Response:
        try:
            since = max(0, int(request.query.get("since", "0")))
            version = int(request.query.get("v", "-1"))
        except ValueError:
            raise web.HTTPBadRequest(text="since and v are numbers") from None
        await self._fresh()
        return web.json_response(self.run.updates(since, version), headers=_NO_STORE)

    async def _record(self, request: web.Request) -> web.Response:
        try:
            row = int(request.match_info["row"])
            body = self.run.record(row)
        except (ValueError, IndexError):
            raise web.HTTPNotFound(text="no such row") from None
        return web.Response(body=body, content_type="application/json", headers=_NO_STORE)


_NO_STORE = {"Cache-Control": "no-store"}


async def serve_live(
    server: LiveServer, port: int = 0, ready: Callable[[str], None] | None = None
) -> None:
    """Serve the live page on 127.0.0.1:``port`` (0: any free port) until cancelled;
    ``ready`` gets its URL once it listens."""
    async with listening(server.app(), port) as url:
        if ready is not None:
            ready(url)
        await asyncio.Event().wait()  # until cancelled (Ctrl-C)
