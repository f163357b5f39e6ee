"""What ``hpt report``, ``hpt compare`` and ``hpt ceiling`` do, as functions: read the runs
(``hpt.reports.cells``), compute, and write the files into one folder. The CLI parses the
arguments, calls these and prints what they return."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from hpt.reports import ReportError
from hpt.reports.ceiling import compute
from hpt.reports.ceiling_inputs import read_runs, read_scores
from hpt.reports.ceiling_markdown import markdown as ceiling_markdown
from hpt.reports.ceiling_types import CeilingReport
from hpt.reports.cells import CellScores, Describe, collect
from hpt.reports.cells_csv import write_csv
from hpt.reports.comparisons import COMPARISONS_JSON, COMPARISONS_MD, Comparison, write_json
from hpt.reports.comparisons import compare as compare_scores
from hpt.reports.comparisons_markdown import document
from hpt.reports.report_markdown import markdown
from hpt.reports.tables import model_names
from hpt.results.costs import PriceBook
from hpt.results.reader import require_run_dirs
from hpt.results.records import Cell
from hpt.results.rundir import RunDirError


@dataclass
class Written:
    """A report's page (Markdown) and every file written, the page's included."""

    text: str
    paths: list[Path]


def output_folder(given: Path | None, run_dirs: Sequence[Path], name: str) -> Path:
    """``given``, else DIR/NAME for one run directory or runs/NAME-TIME for several; created."""
    out = given or (
        run_dirs[0] / name
        if len(run_dirs) == 1
        else Path("runs") / f"{name}-{datetime.now():%Y%m%d-%H%M%S}"
    )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"cannot write report folder {out}: {exc.strerror}") from None
    return out


def report(
    run_dirs: list[Path],
    *,
    out: Path | None = None,
    prices: Path | None = None,
    baseline: str | None = None,
    detect: float | None = None,
    plots: bool = True,
    describe: Describe | None = None,
) -> Written:
    """``report.md``, ``cells.csv``, ``comparisons.json`` (with several models or a baseline)
    and the plots, into ``out`` (see ``output_folder``). Calls are costed at ``prices`` (a
    TOML file), else at the prices each run recorded, else at litellm's cost map."""
    book = PriceBook.load(prices)
    require_run_dirs(*run_dirs)
    scores: dict[Cell, CellScores] = {}
    reports = collect(run_dirs, book, describe=describe, scores=scores)
    if not reports:
        raise RunDirError(f"no records in {', '.join(map(str, run_dirs))}")
    # Several models: how they compare on the samples they share.
    paired: list[Comparison] = []
    notes: list[str] = []
    if len(model_names(reports)) > 1 or baseline:
        try:
            compared = compare_scores(scores, baseline=baseline, detect=detect)
            paired, notes = compared.comparisons, compared.unshared
        except ReportError as exc:  # e.g. two ladders: the rest of the report still stands
            if baseline:
                raise
            notes = [f"No paired comparisons: {exc}"]
    del scores  # per-sample scores are not needed past this point
    folder = output_folder(out, run_dirs, "report")
    text = markdown(reports, run_dirs, paired, detect, notes)
    (folder / "report.md").write_text(text, encoding="utf-8")
    write_csv(reports, folder / "cells.csv")
    written = [folder / "report.md", folder / "cells.csv"]
    if paired:
        write_json(paired, folder / COMPARISONS_JSON)
        written.append(folder / COMPARISONS_JSON)
    if plots:
        from hpt.reports import plots as figures  # matplotlib: only when drawing

        written += figures.hpi_chart(reports, folder) + figures.level_histograms(reports, folder)
        written += figures.forest(paired, folder)
    return Written(text, written)


def compare(
    run_dirs: list[Path],
    *,
    out: Path | None = None,
    baseline: str | None = None,
    detect: float | None = None,
    plots: bool = True,
    describe: Describe | None = None,
) -> Written:
    """``comparisons.json``, ``comparisons.md`` and a forest plot, into ``out``."""
    require_run_dirs(*run_dirs)
    scores: dict[Cell, CellScores] = {}
    reports = collect(run_dirs, describe=describe, scores=scores)
    if not reports:
        raise RunDirError(f"no records in {', '.join(map(str, run_dirs))}")
    models = model_names(reports)
    if len(models) < 2:
        raise ReportError(
            f"nothing to compare: the records hold one model ({models[0]}); "
            "give the run directories of at least two models"
        )
    compared = compare_scores(scores, baseline=baseline, detect=detect)
    found = compared.comparisons
    if not found:
        raise ReportError(
            "; ".join(compared.unshared)
            or "no dataset x mode was run by two of these models"
            + (f" with the baseline {baseline}" if baseline else "")
        )
    folder = output_folder(out, run_dirs, "compare")
    text = document(found, run_dirs, compared.unshared)
    written = [folder / COMPARISONS_JSON, folder / COMPARISONS_MD]
    write_json(found, written[0])
    written[1].write_text(text, encoding="utf-8")
    if plots:
        from hpt.reports import plots as figures

        written += figures.forest(found, folder)
    return Written(text, written)


def ceiling(
    run_dirs: list[Path],
    scores: Sequence[Path],
    *,
    baseline: str,
    headline_methods: Sequence[str],
    out: Path | None = None,
    plots: bool = True,
) -> tuple[CeilingReport, list[Path]]:
    """``ceiling.json``, ``ceiling.md`` and the plots, into ``out`` (default: the first run
    directory; with only CSV files, the current directory)."""
    if not run_dirs and not scores:
        raise ReportError("give run directories, --scores FILE.csv, or both")
    methods, ladders = read_runs(run_dirs) if run_dirs else ([], [])
    for path in scores:
        methods += read_scores(path)
    result = compute(methods, baseline=baseline, headline_methods=headline_methods, ladders=ladders)
    folder = out or (run_dirs[0] if run_dirs else Path.cwd())
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot write to {folder}: {exc.strerror}") from None
    sources = [str(d) for d in run_dirs] + [str(p) for p in scores]
    json = result.model_dump_json(indent=2) + "\n"
    (folder / "ceiling.json").write_text(json, encoding="utf-8")
    (folder / "ceiling.md").write_text(ceiling_markdown(result, sources), encoding="utf-8")
    written = [folder / "ceiling.json", folder / "ceiling.md"]
    if plots:
        from hpt.reports import ceiling_plots

        written += ceiling_plots.methods_chart(result, folder)
        written += ceiling_plots.delta_heatmap(result, folder)
        written += ceiling_plots.tokens_chart(result, folder)
    return result, written
