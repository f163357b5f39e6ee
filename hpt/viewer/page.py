"""``hpt view``: one self-contained HTML file of a run's traces, readable offline.

The page holds a compact index of every sample (for the table and its filters) and the full
records in gzip'd chunks that the browser decodes only when a sample is opened. The file is
written as the records stream past, so memory holds the index, not the run.

An index row is ``[row, cell, sample_id, draw, resolved_level, error?, hpi_score, calls,
tokens]``; a DepthQA record's row adds ``judge_score, depth`` (and its node id when that is
not its sample id), so that a node's neighbours in the question graph are coloured by their
scores without decoding their chunks."""

from __future__ import annotations

import base64
import gzip
import http.server
import json
import threading
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, TextIO

from hpt.results.reader import read_records
from hpt.results.records import Cell, DepthRecord, SampleRecord
from hpt.results.rundir import RunDirError

CHUNK = 200  # records per compressed block: small enough to open a sample at once


def _asset(name: str) -> str:
    return resources.files("hpt.viewer").joinpath("assets", name).read_text("utf-8")


def _script_json(value: Any) -> str:
    # Inside <script>, "</" would end the element; JSON allows "\/" and "\u003c".
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")


def _records(run_dirs: Iterable[Path]) -> Iterator[SampleRecord]:
    """Each directory's records; a cell found in two directories is refused, as reports
    refuse it: its samples would be shown and counted twice."""
    source: dict[Cell, Path] = {}
    for directory in run_dirs:
        for record in read_records(directory):
            first = source.setdefault(record.cell, directory)
            if first != directory:
                raise RunDirError(
                    f"{record.cell.title} is in both {first} and {directory}; view them separately"
                )
            yield record


def write_view(run_dirs: list[Path], out: Path, title: str | None = None) -> int:
    """Write the viewer for ``run_dirs`` to ``out``; return the number of samples. A run
    directory that cannot be read leaves no half-written file behind."""
    name = title or " + ".join(d.name for d in run_dirs)
    tmp = out.with_suffix(out.suffix + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            n = _write_page(fh, run_dirs, name)
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return n


def _write_page(fh: TextIO, run_dirs: list[Path], name: str) -> int:
    cells: dict[Cell, int] = {}
    cell_info: list[dict[str, Any]] = []
    rows: list[list[Any]] = []
    pending: list[str] = []
    page = Template(_asset("view.html"))
    fh.write(page.safe_substitute(title=_escape(name), css=_asset("view.css")))
    for record in _records(run_dirs):
        cell = record.cell
        if cell not in cells:
            cells[cell] = len(cell_info)
            # The labels as hpt spells them everywhere (Cell), not rebuilt in the page.
            cell_info.append(
                {"model": cell.model, "mode": cell.mode, "variant": cell.variant, "m": record.m,
                 "dataset_label": cell.dataset_label, "mode_label": cell.mode_label,
                 "title": cell.title, "reasoning": cell.reasoning_label or None}
            )  # fmt: skip
        rows.append(_row(len(rows), cells[cell], record))
        pending.append(record.model_dump_json())
        if len(pending) == CHUNK:
            _write_chunk(fh, (len(rows) - 1) // CHUNK, pending)
            pending = []
    if pending:
        _write_chunk(fh, (len(rows) - 1) // CHUNK, pending)
    index = {"cells": cell_info, "rows": rows, "chunk": CHUNK, "reasoning": _settings(cells)}
    fh.write(f'<script type="application/json" id="hpt-index">{_script_json(index)}</script>\n')
    fh.write(f"<script>\n{_asset('view.js')}</script>\n</body>\n</html>\n")
    return len(rows)


def _settings(cells: Iterable[Cell]) -> list[str]:
    """The reasoning settings the cells asked ("effort high", ...), each once, from least to
    most."""
    ordered = sorted(cells, key=Cell.reasoning_rank)
    return [label for label in dict.fromkeys(c.reasoning_label for c in ordered) if label]


def _row(n: int, cell: int, record: SampleRecord) -> list[Any]:
    row: list[Any] = [n, cell, record.sample_id, record.draw, record.resolved_level,
                      int(record.error is not None), record.hpi_score, record.calls,
                      record.prompt_tokens + record.completion_tokens]  # fmt: skip
    if isinstance(record, DepthRecord):
        row += [record.judge_score, record.depth]
        if record.node_id != record.sample_id:
            row.append(record.node_id)
    return row


def _write_chunk(fh: TextIO, n: int, lines: list[str]) -> None:
    payload = gzip.compress(("[" + ",".join(lines) + "]").encode("utf-8"), compresslevel=6)
    encoded = base64.b64encode(payload).decode("ascii")
    fh.write(f'<script type="application/gzip-base64" id="hpt-chunk-{n}">{encoded}</script>\n')


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def serve(path: Path, port: int = 0, ready: threading.Event | None = None) -> None:
    """Serve ``path`` at http://127.0.0.1:PORT/ until interrupted."""
    body = path.read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path not in ("/", "/index.html", "/" + path.name):
                self.send_error(404, "the viewer is at /")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would bury the URL

    with http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler) as server:
        print(f"serving {path} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)",
              flush=True)  # fmt: skip
        if ready is not None:
            ready.set()
        server.serve_forever()
