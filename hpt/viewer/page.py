"""``hpt view``: one self-contained HTML file of a run's traces, readable offline.

The page opens on the run's summary (each cell's figures from hpt's own tally, embedded as
data) and holds a compact index of every sample (for the table and its filters) and the full
records in gzip'd chunks that the browser decodes only when a sample is opened. The file is
written as the records stream past, so memory holds the index, not the run. Index rows:
``hpt.viewer.index``. ``hpt view --serve`` serves the same page live instead
(``hpt.viewer.live``)."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, TextIO

from hpt.results.reader import read_records
from hpt.results.records import SampleRecord
from hpt.viewer.index import CostMeter, ViewIndex

CHUNK = 200  # records per compressed block: small enough to open a sample at once


def _asset(name: str) -> str:
    return resources.files("hpt.viewer").joinpath("assets", name).read_text("utf-8")


def _script_json(value: Any) -> str:
    # Inside <script>, "</" would end the element; JSON allows "\/" and "\u003c".
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")


def _records(run_dirs: Iterable[Path]) -> Iterator[tuple[Path, SampleRecord]]:
    for directory in run_dirs:
        for record in read_records(directory):
            yield directory, record


def page_head(name: str) -> str:
    """The page up to its data: its title, style, header, table and panes."""
    return Template(_asset("view.html")).safe_substitute(
        title=_escape(name), css=_asset("view.css")
    )


def page_tail(data: dict[str, Any]) -> str:
    """The page's data (cells, index rows, summary, ...) and its script."""
    return (
        f'<script type="application/json" id="hpt-index">{_script_json(data)}</script>\n'
        f"<script>\n{_asset('view.js')}</script>\n</body>\n</html>\n"
    )


def write_view(
    run_dirs: list[Path],
    out: Path,
    title: str | None = None,
    spend: list[dict[str, Any]] | None = None,
    cost: CostMeter | None = None,
) -> int:
    """Write the viewer for ``run_dirs`` to ``out``; return the number of samples. ``spend``:
    what the runs' ledgers (spend.json) say was spent, shown beside the summary; ``cost``:
    each cell's cost, shown in the summary. A run
    directory that cannot be read leaves no half-written file behind."""
    name = title or " + ".join(d.name for d in run_dirs)
    tmp = out.with_suffix(out.suffix + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            n = _write_page(fh, run_dirs, name, spend or [], cost)
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return n


def _write_page(
    fh: TextIO,
    run_dirs: list[Path],
    name: str,
    spend: list[dict[str, Any]],
    cost: CostMeter | None,
) -> int:
    index = ViewIndex(cost)
    pending: list[str] = []
    fh.write(page_head(name))
    for directory, record in _records(run_dirs):
        if index.add(record, directory) is None:
            continue
        pending.append(record.model_dump_json())
        if len(pending) == CHUNK:
            _write_chunk(fh, (len(index.rows) - 1) // CHUNK, pending)
            pending = []
    if pending:
        _write_chunk(fh, (len(index.rows) - 1) // CHUNK, pending)
    data = {"cells": index.cell_info, "rows": index.rows, "chunk": CHUNK,
            "reasoning": index.settings(), "summary": index.summary(), "spend": spend,
            "complete": None}  # fmt: skip
    fh.write(page_tail(data))
    return len(index.rows)


def _write_chunk(fh: TextIO, n: int, lines: list[str]) -> None:
    payload = gzip.compress(("[" + ",".join(lines) + "]").encode("utf-8"), compresslevel=6)
    encoded = base64.b64encode(payload).decode("ascii")
    fh.write(f'<script type="application/gzip-base64" id="hpt-chunk-{n}">{encoded}</script>\n')


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
