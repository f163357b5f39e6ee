"""The ceiling's inputs (hpt.reports.ceiling): run directories, each cell a method result (a
one-strategy ladder) or an HPT ladder for the HPT view, and CSV files of published results."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from pathlib import Path

from hpt.reports import ReportError
from hpt.reports.ceiling_intervals import REPEATED_DRAWS, hpi_interval_missing, wilson_interval
from hpt.reports.ceiling_types import LadderResult, MethodResult
from hpt.reports.cells import collect
from hpt.reports.efforts import apart
from hpt.results.reader import require_run_dirs
from hpt.results.rundir import RunDirError

CSV_REQUIRED = ("model", "benchmark", "method", "accuracy")
CSV_OPTIONAL = ("n", "prompt_tokens")


def read_runs(run_dirs: list[Path]) -> tuple[list[MethodResult], list[LadderResult]]:
    """A run cell whose ladder is one strategy is a method result (method = the strategy);
    a cell with a ladder of several strategies (or adaptive) goes to the HPT view. A cell's
    identity does not name its ladder: runs of different strategies on the same dataset and
    model are different results. A reasoning setting goes with the model ("gpt-5 · effort
    high"), not the benchmark: each setting has its own ceiling and ranks, and no
    macro-average mixes efforts."""
    for directory in run_dirs:
        if not directory.is_dir():
            raise RunDirError(f"run directory {directory} does not exist")
    require_run_dirs(*run_dirs)
    methods: list[MethodResult] = []
    ladders: list[LadderResult] = []
    for r in collect(run_dirs, by_ladder=True):
        s, cell = r.summary, r.cell
        model = cell.model + (f" · {cell.reasoning_label}" if cell.reasoning_label else "")
        benchmark = apart(cell).label
        if len(r.ladder) == 1 and cell.mode == "standard":
            if not s.n or s.accuracy is None:
                raise ReportError(
                    f"{r.source} ({cell.title}): all {s.samples} sample(s) ended in an error; "
                    "nothing to score"
                )
            resolved = sum(s.level_counts.values())  # the accuracy's own k of n
            ci = wilson_interval(resolved, s.n) if r.independent else None
            methods.append(
                MethodResult(
                    model=model,
                    benchmark=benchmark,
                    method=r.ladder[0],
                    accuracy=100 * s.accuracy,
                    n=s.n,
                    ci=(100 * ci[0], 100 * ci[1]) if ci else None,
                    ci_missing=None if ci else REPEATED_DRAWS,
                    errors=s.errors,
                    prompt_tokens=r.scored_prompt_tokens / s.n,
                    source=r.source,
                )
            )
        else:
            adaptive = " (adaptive)" if cell.mode == "adaptive" else ""
            missing = hpi_interval_missing(s.n, r.distinct_scores, r.independent)
            ladders.append(
                LadderResult(
                    model=model,
                    benchmark=benchmark + adaptive,
                    hpi=s.hpi,
                    hpi_ci=r.hpi_ci if missing is None else None,
                    hpi_ci_missing=missing,
                    accuracy=None if s.accuracy is None else 100 * s.accuracy,
                    chance_hpi=s.chance_hpi,
                    n=s.n,
                    errors=s.errors,
                    strategies=r.ladder,
                    source=r.source,
                )
            )
    return methods, ladders


def _text(path: Path) -> str:
    """The scores file as text; unreadable or not UTF-8: one error naming the file (and the
    line of the first bad byte)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ReportError(f"cannot read scores file {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ReportError(f"{path}:{line}: not UTF-8 text; give a CSV file") from None


def _lines(text: str, position: list[int]) -> Iterator[str]:
    """The text's lines without comments, noting in ``position`` the number of the line
    last handed out (for file:line messages)."""
    for lineno, line in enumerate(io.StringIO(text, newline=""), 1):
        if line.lstrip().startswith("#") or not line.strip():
            continue
        position[0] = lineno
        yield line


def _number(value: str, where: str, column: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ReportError(f"{where}: {column} {value.strip()!r} is not a number") from None
    if not math.isfinite(number):
        raise ReportError(f"{where}: {column} {value.strip()!r} is not a finite number")
    return number


def _rows(path: Path, lines: Iterator[str], position: list[int]) -> Iterator[list[str]]:
    """CSV rows; what the csv module refuses (a field past its size limit, a NUL byte) is
    one error naming the line."""
    reader = csv.reader(lines)
    while True:
        try:
            row = next(reader, None)
        except csv.Error as exc:
            raise ReportError(f"{path}:{position[0]}: not CSV ({exc})") from None
        if row is None:
            return
        yield row


def read_scores(path: Path) -> list[MethodResult]:
    """A CSV of results: model, benchmark, method, accuracy (percent), optional n and
    prompt_tokens. Blank lines and lines starting with # are skipped."""
    if not path.is_file():
        raise ReportError(f"scores file {path} does not exist")
    position = [0]
    rows = _rows(path, _lines(_text(path), position), position)
    header = [h.strip() for h in next(rows, [])]
    missing = [c for c in CSV_REQUIRED if c not in header]
    if missing:
        raise ReportError(
            f"{path}:{position[0]}: missing column(s) {', '.join(missing)} "
            f"(needs {', '.join(CSV_REQUIRED)}; has {', '.join(header) or 'none'})"
        )
    col = {name: header.index(name) for name in (*CSV_REQUIRED, *CSV_OPTIONAL) if name in header}
    results = []
    for row in rows:
        where = f"{path}:{position[0]}"
        if len(row) < len(header):
            raise ReportError(f"{where}: {len(row)} field(s), the header has {len(header)}")
        text = {name: row[i].strip() for name, i in col.items()}
        for name in ("model", "benchmark", "method"):
            if not text[name]:
                raise ReportError(f"{where}: empty {name}")
        accuracy = _number(text["accuracy"], where, "accuracy")
        if not 0.0 <= accuracy <= 100.0:
            raise ReportError(f"{where}: accuracy {accuracy:g} is not a percentage (0-100)")
        n: int | None = None
        if text.get("n"):
            count = _number(text["n"], where, "n")
            if count < 1 or count != int(count):
                raise ReportError(f"{where}: n {text['n']!r} is not a count of samples")
            n = int(count)
        tokens = _number(text["prompt_tokens"], where, "prompt_tokens") if text.get(
            "prompt_tokens") else None  # fmt: skip
        results.append(
            MethodResult(
                model=text["model"],
                benchmark=text["benchmark"],
                method=text["method"],
                accuracy=accuracy,
                n=n,
                prompt_tokens=tokens,
                source=where,
            )
        )
    return results
