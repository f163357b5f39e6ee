"""``hpt ceiling``: each model's performance ceiling over prompting methods (Aali et al.,
structured prompting x HELM), from run directories and/or a CSV of published results.

Reads the inputs into ``hpt.reports.ceiling`` results, which does the arithmetic; renders
the report as a rich table, ``ceiling.json``, ``ceiling.md`` and plots."""

from __future__ import annotations

import argparse
import csv
import io
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hpt.cli.common import names
from hpt.reports import ReportError
from hpt.reports.ceiling import (
    DEFAULT_BASELINE,
    DEFAULT_HEADLINE,
    REPEATED_DRAWS,
    CeilingReport,
    LadderResult,
    MethodResult,
    compute,
    hpi_interval_missing,
    wilson_interval,
)
from hpt.reports.ceiling_markdown import delta_cell, headline_names, markdown, n_of, plural, signed
from hpt.results.reader import read_records, read_run_info, require_run_dirs
from hpt.results.records import Cell, SampleRecord
from hpt.results.rundir import RunDirError
from hpt.results.tally import Tally

CSV_REQUIRED = ("model", "benchmark", "method", "accuracy")
CSV_OPTIONAL = ("n", "prompt_tokens")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ceiling",
        help="each model's performance ceiling over prompting methods, its gain over a "
        "baseline prompt and the ranking flips (JSON, Markdown, plots)",
    )
    p.add_argument("run_dirs", nargs="*", type=Path, metavar="RUN_DIR")
    p.add_argument(
        "--scores",
        type=Path,
        action="append",
        default=[],
        metavar="FILE.csv",
        help="external results: columns model, benchmark, method, accuracy (percent), "
        "optional n and prompt_tokens (mean per sample); lines starting with # are skipped. "
        "Repeatable",
    )
    p.add_argument(
        "--baseline",
        default=DEFAULT_BASELINE,
        metavar="METHOD",
        help=f"the fixed-prompt method gains are measured from (default {DEFAULT_BASELINE})",
    )
    p.add_argument(
        "--headline-methods",
        type=names,
        default=list(DEFAULT_HEADLINE),
        metavar="M1,M2",
        help="the methods whose mean gain over the baseline is the headline "
        f"(default {','.join(DEFAULT_HEADLINE)})",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="output folder (default: the first RUN_DIR; with only --scores, the current "
        "directory)",
    )
    p.add_argument("--no-plots", action="store_true", help="JSON and Markdown only")


# ---------------------------------------------------------------- reading


@dataclass
class _CellAcc:
    tally: Tally
    strategies: tuple[str, ...]
    source: Path
    hpi: Counter[float] = field(default_factory=Counter)
    prompt_tokens: int = 0  # over scored samples

    def add(self, record: SampleRecord) -> None:
        self.tally.add(record)
        if record.hpi_score is not None:  # scored: not an error (as hpt report counts)
            self.hpi[record.hpi_score] += 1
            self.prompt_tokens += record.prompt_tokens

    @property
    def independent(self) -> bool:
        """Every scored climb is of a different sample (no repeated draws)."""
        return len(self.tally.draws) == self.tally.n


def benchmark_label(cell: Cell) -> str:
    at = f"@{cell.threshold:g}" if cell.threshold is not None else ""
    variant = f" · {cell.variant}" if cell.variant is not None else ""
    return f"{cell.dataset}{at}{variant}"


def read_runs(run_dirs: list[Path]) -> tuple[list[MethodResult], list[LadderResult]]:
    """A run cell whose ladder is one strategy is a method result (method = the strategy);
    a cell with a ladder of several strategies (or adaptive) goes to the HPT view."""
    from hpt.reports.tables import bootstrap_ci  # numpy: loaded only for reports

    for directory in run_dirs:
        if not directory.is_dir():
            raise RunDirError(f"run directory {directory} does not exist")
    require_run_dirs(*run_dirs)
    # A cell's identity does not name its ladder: runs of different strategies on the same
    # dataset and model are different results.
    cells: dict[tuple[Cell, tuple[str, ...]], _CellAcc] = {}
    for directory in run_dirs:
        run = read_run_info(directory)
        seen_here: set[tuple[Cell, tuple[str, ...]]] = set()
        for record in read_records(directory):
            key = (record.cell, tuple(record.strategies) or tuple(run.strategies))
            acc = cells.get(key)
            if acc is None:
                acc = cells[key] = _CellAcc(Tally.of(record), key[1], directory)
            elif key not in seen_here:
                raise RunDirError(
                    f"{record.cell.title} ({', '.join(key[1])}) is in both {acc.source} and "
                    f"{directory}; keep one"
                )
            seen_here.add(key)
            acc.add(record)
    methods: list[MethodResult] = []
    ladders: list[LadderResult] = []
    for cell, strategies in sorted(cells, key=lambda k: (k[0].order(), k[1])):
        acc = cells[cell, strategies]
        s = acc.tally.summary()
        where = f"{acc.source} ({cell.title})"
        if len(acc.strategies) == 1 and cell.mode == "standard":
            if not s.n or s.accuracy is None:
                raise ReportError(
                    f"{where}: all {s.samples} sample(s) ended in an error; nothing to score"
                )
            resolved = sum(s.level_counts.values())  # the accuracy's own k of n
            ci = wilson_interval(resolved, s.n) if acc.independent else None
            methods.append(
                MethodResult(
                    model=cell.model,
                    benchmark=benchmark_label(cell),
                    method=acc.strategies[0],
                    accuracy=100 * s.accuracy,
                    n=s.n,
                    ci=(100 * ci[0], 100 * ci[1]) if ci else None,
                    ci_missing=None if ci else REPEATED_DRAWS,
                    errors=s.errors,
                    prompt_tokens=acc.prompt_tokens / s.n,
                    source=str(acc.source),
                )
            )
        else:
            adaptive = " (adaptive)" if cell.mode == "adaptive" else ""
            missing = hpi_interval_missing(s.n, len(acc.hpi), acc.independent)
            ladders.append(
                LadderResult(
                    model=cell.model,
                    benchmark=benchmark_label(cell) + adaptive,
                    hpi=s.hpi,
                    hpi_ci=bootstrap_ci(acc.hpi) if missing is None else None,
                    hpi_ci_missing=missing,
                    accuracy=None if s.accuracy is None else 100 * s.accuracy,
                    chance_hpi=s.chance_hpi,
                    n=s.n,
                    errors=s.errors,
                    strategies=acc.strategies,
                    source=str(acc.source),
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


# ---------------------------------------------------------------- rendering


def rich_table(report: CeilingReport) -> Table:
    table = Table(title=f"Performance ceiling (accuracy %, baseline {report.baseline})")
    table.add_column("model (k benchmarks)", overflow="fold")
    for method in report.methods:
        table.add_column(escape(method), justify="right", overflow="fold")
    for column in ("Δ", "spread min/med", "rank base→ceil"):
        table.add_column(column, justify="right", overflow="fold")
    for model, m in report.models.items():
        cells = []
        for method in report.methods:
            stat = m.methods.get(method)
            text = ("-" if stat is None else
                    f"{stat.macro_avg:.2f} ±{signed(stat.sd, 1)} {n_of(stat.n)}")  # fmt: skip
            cells.append(f"[bold green]{text}[/]" if method == m.ceiling_method else text)
        flag = " ⚠" if m.missing_benchmarks else ""
        table.add_row(f"{escape(model)} ({len(m.benchmarks)}){flag}", *cells,
                      delta_cell(m, report.baseline),
                      f"{m.spread.min:.1f}/{m.spread.median:.1f}",
                      f"{m.mean_rank_baseline:.2f}→{m.mean_rank_ceiling:.2f}")  # fmt: skip
    return table


# ---------------------------------------------------------------- command


def command(args: argparse.Namespace, console: Console) -> int:
    if not args.run_dirs and not args.scores:
        raise ReportError("give run directories, --scores FILE.csv, or both")
    methods, ladders = read_runs(args.run_dirs) if args.run_dirs else ([], [])
    for path in args.scores:
        methods += read_scores(path)
    report = compute(
        methods, baseline=args.baseline, headline_methods=args.headline_methods, ladders=ladders
    )
    out: Path = args.out or (args.run_dirs[0] if args.run_dirs else Path.cwd())
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot write to {out}: {exc.strerror}") from None
    sources = [str(d) for d in args.run_dirs] + [str(p) for p in args.scores]
    (out / "ceiling.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / "ceiling.md").write_text(markdown(report, sources), encoding="utf-8")
    written = [out / "ceiling.json", out / "ceiling.md"]
    if not args.no_plots:
        from hpt.reports import ceiling_plots

        written += ceiling_plots.methods_chart(report, out)
        written += ceiling_plots.delta_heatmap(report, out)
        written += ceiling_plots.tokens_chart(report, out)
    console.print(rich_table(report))
    console.print(
        f"headline: mean gain of {headline_names(report)} over {report.baseline}: "
        f"{signed(report.headline_delta, sign=True)} points over "
        f"{plural(report.headline_n, 'model')}; rank flips on "
        f"{len(report.rank_flips)}/{len(report.benchmarks)} benchmarks"
        + (f" ({', '.join(report.rank_flips)})" if report.rank_flips else ""),
        highlight=False,
        markup=False,
    )
    for warning in report.warnings:
        console.print(f"warning: {warning}", highlight=False, markup=False, style="yellow")
    console.print("wrote " + ", ".join(str(p) for p in written), highlight=False, soft_wrap=True)
    return 0
