"""``hpt report``: the paper's tables from one or more run directories, read as a stream.

Every number is a pure function of the records. Confidence intervals are percentile
bootstraps over samples; because a resampled mean depends only on how often each distinct
score is drawn, each resample is one multinomial draw over the distinct scores -- exactly the
nonparametric bootstrap, in memory that does not grow with the run."""

from __future__ import annotations

import csv
import io
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpt.errors import validation_message
from hpt.reports import ReportError
from hpt.reports.comparisons import CellScores, Comparison, explanation, markdown_table
from hpt.reports.markdown import number, pipe_table
from hpt.reports.paired import sd
from hpt.results.info import Column, ReportTable, TaskInfo
from hpt.results.reader import read_records, read_run_info
from hpt.results.records import Cell, DepthRecord, SampleRecord
from hpt.results.rundir import RunDirError
from hpt.results.scoring import scored
from hpt.results.tally import Summary, Tally

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
# Where a run directory does not describe a dataset (saved by an older hpt), the caller may
# say what it knows of it (the CLI asks the task registry); None: a generic answer table.
Describe = Callable[[str], TaskInfo | None]


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0.0, description="USD per million prompt tokens")
    output: float = Field(ge=0.0, description="USD per million completion tokens")


def load_prices(path: Path) -> dict[str, Price]:
    """A TOML file of ``["MODEL"] input = USD, output = USD`` per million tokens."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"prices file {path} does not exist") from None
    except OSError as exc:
        raise ReportError(f"cannot read prices file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not UTF-8 text; give a TOML prices file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ReportError(f"{path}: not valid TOML: {exc}") from None
    prices = {}
    for model, entry in data.items():
        try:
            prices[model] = Price.model_validate(entry)
        except ValidationError as exc:
            problem = validation_message(exc, prefix=model, whole="(table)")
            raise ReportError(f"{path}: {problem}") from None
    return prices


def bootstrap_ci(
    counts: Counter[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float] | None:
    """95% percentile bootstrap interval of the mean of values given as {value: count}."""
    n = sum(counts.values())
    if n == 0:
        return None
    if len(counts) == 1:  # no spread; and the float sum below need not return v exactly
        value = float(next(iter(counts)))
        return value, value
    values = np.array(list(counts), dtype=float)
    probs = np.array(list(counts.values()), dtype=float) / n
    draws = np.random.default_rng(seed).multinomial(n, probs, size=resamples)
    means = draws @ values / n
    low, high = np.percentile(means, [2.5, 97.5])
    # The mean itself always lies inside; rounding must not push it out.
    mean = float(values @ probs)
    return min(float(low), mean), max(float(high), mean)


class CellReport(BaseModel):
    """What a report says of one cell: the run summary plus intervals, source and cost."""

    summary: Summary
    # The dataset as the run directory describes it: its table, metric and kind.
    info: TaskInfo
    hpi_ci: tuple[float, float] | None = None
    accuracy_ci: tuple[float, float] | None = None
    # HumanEval's table-2 figure: hpf@1 with repeated draws, else the share resolved.
    pass_at_1: float | None = None
    # Intervals of other columns' values, by the column's value path ("depth_scores.2").
    intervals: dict[str, tuple[float, float]] = {}
    cost_usd: float | None = None
    source: str = ""
    # Records of a (sample, draw) the source held more than once, beyond the one counted.
    duplicates: int = 0
    # The standard deviation of the scored samples' HPI scores (each sample's draws
    # averaged), and the number of those samples: for sizing the next run.
    sample_sd: float | None = None
    distinct_samples: int = 0


@dataclass
class _Acc:
    tally: Tally
    source: Path
    # Per sample and draw: for paired comparisons and for sizing the next run.
    scores: CellScores
    hpi: Counter[float] = field(default_factory=Counter)
    resolved: Counter[float] = field(default_factory=Counter)
    tokens: dict[str, list[int]] = field(default_factory=dict)  # call model -> [in, out]
    # value path -> {value: count}, for the intervals of other columns (DepthQA's depth means)
    spreads: dict[str, Counter[float]] = field(default_factory=dict)

    def add(self, record: SampleRecord) -> None:
        self.tally.add(record)
        # Not an error, nor a climb a judge left undecided (whatever hpi_score it was saved with).
        if scored(record) and record.hpi_score is not None:
            resolved = record.resolved_level is not None
            self.hpi[record.hpi_score] += 1
            self.resolved[float(resolved)] += 1
            self.scores.add(record.sample_id, record.draw, record.hpi_score, resolved)
            if isinstance(record, DepthRecord) and record.judge_score is not None:
                path = f"depth_scores.{record.depth}"
                self.spreads.setdefault(path, Counter())[float(record.judge_score)] += 1
        calls = [c for a in record.attempts for c in a.calls]
        calls += [s.call for s in record.selections if s.call is not None]
        for call in calls:
            used = self.tokens.setdefault(call.model, [0, 0])
            used[0] += call.usage.prompt_tokens
            used[1] += call.usage.completion_tokens


def collect(
    run_dirs: Iterable[Path],
    prices: dict[str, Price] | None = None,
    describe: Describe | None = None,
    scores: dict[Cell, CellScores] | None = None,
) -> list[CellReport]:
    """One CellReport per cell over all the directories, reading each record once. Given
    ``scores``, fills it with every cell's per-sample scores (for paired comparisons)."""
    cells: dict[Cell, _Acc] = {}
    infos: dict[str, TaskInfo] = {}
    duplicates: Counter[Cell] = Counter()
    for directory in run_dirs:
        run = read_run_info(directory)
        seen_here: set[Cell] = set()
        records = read_records(directory)
        for record in records:
            cell = record.cell
            acc = cells.get(cell)
            if acc is None:
                if record.dataset not in infos:
                    info = run.tasks.get(record.dataset)
                    if info is None and describe is not None:
                        info = describe(record.dataset)
                    infos[record.dataset] = info or run.task(record.dataset)
                kept = CellScores(tuple(record.strategies), record.penalty)
                if scores is not None:
                    scores[cell] = kept
                acc = cells[cell] = _Acc(Tally.of(record, infos[record.dataset]), directory, kept)
            elif cell not in seen_here:
                raise RunDirError(
                    f"{cell.title} is in both {acc.source} and {directory}; report them separately"
                )
            seen_here.add(cell)
            acc.add(record)
        duplicates.update(records.duplicates_by_cell)
    reports = []
    for cell in sorted(cells, key=Cell.order):
        acc = cells[cell]
        summary = acc.tally.summary()
        reports.append(
            CellReport(
                summary=summary,
                info=acc.tally.info or TaskInfo(name=summary.dataset),
                hpi_ci=bootstrap_ci(acc.hpi),
                accuracy_ci=bootstrap_ci(acc.resolved),
                pass_at_1=summary.pass_at_k.get("hpf@1", summary.accuracy),
                intervals={
                    path: ci
                    for path, counts in acc.spreads.items()
                    if (ci := bootstrap_ci(counts)) is not None
                },
                cost_usd=_cost(acc.tokens, prices) if prices else None,
                source=str(acc.source),
                duplicates=duplicates[cell],
                **_sizing(acc.scores),
            )
        )
    return reports


def _sizing(scores: CellScores) -> dict[str, Any]:
    """The spread of a cell's per-sample HPI scores (a sample's draws averaged: the sample is
    the unit a paired comparison resamples), and how many samples it has."""
    per_sample = scores.per_sample()
    return {"sample_sd": sd(per_sample), "distinct_samples": len(per_sample)}


def _cost(tokens: dict[str, list[int]], prices: dict[str, Price]) -> float | None:
    """USD at list price for every call, cached or not: what a fresh run would cost. None when
    some model that was called has no price."""
    total = 0.0
    for model, (prompt, completion) in tokens.items():
        price = prices.get(model)
        if price is None:
            return None
        total += (prompt * price.input + completion * price.output) / 1e6
    return total


# ---------------------------------------------------------------- tables


def _ci(ci: tuple[float, float] | None, digits: int = 2) -> str:
    return "" if ci is None else f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def model_names(reports: list[CellReport]) -> list[str]:
    """The reports' models, each once, in report order."""
    return list(dict.fromkeys(r.summary.model for r in reports))


def _pick(reports: list[CellReport], **match: object) -> CellReport | None:
    for r in reports:
        if all(getattr(r.summary, k) == v for k, v in match.items()):
            return r
    return None


def _thresholds(reports: list[CellReport], dataset: str, mode: str) -> list[float]:
    found = {
        r.summary.threshold
        for r in reports
        if r.summary.dataset == dataset and r.summary.mode == mode
    }
    return sorted(t for t in found if t is not None)


def _lookup(summary: Summary, path: str) -> float | int | None:
    """A dotted path into the summary: "depth_scores.2", "forward_discrepancy.overall.value"."""
    value: Any = summary
    for part in path.split("."):
        if value is None:
            return None
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _value(r: CellReport | None, column: Column) -> str:
    """One cell of a declared table: the value, scaled, with its interval where it has one."""
    if r is None:
        return "-"
    s = r.summary
    known: dict[str, tuple[float | int | None, tuple[float, float] | None]] = {
        "hpi": (s.hpi, r.hpi_ci),
        "accuracy": (s.accuracy, r.accuracy_ci),
        "pass_at_1": (r.pass_at_1, r.accuracy_ci),
    }
    value, ci = known.get(column.value) or (_lookup(s, column.value),
                                            r.intervals.get(column.value))  # fmt: skip
    if column.percent:
        value = None if value is None else 100 * value
        ci = (100 * ci[0], 100 * ci[1]) if ci else None
    if isinstance(value, int):  # a count
        return str(value)
    text = number(value) + (_ci(ci) if column.interval else "")
    if column.value == "hpi" and s.chance_hpi is not None:
        text += f" (chance {s.chance_hpi:.2f})"
    return text


def _label(column: Column, info: TaskInfo) -> str:
    return column.label.replace("{metric}", info.corpus_metric or info.metric)


def declared_tables(reports: list[CellReport], mode: str = "standard") -> list[ReportTable]:
    """The tables the reported datasets declare, in their declared order."""
    found: dict[str, ReportTable] = {}
    for r in reports:
        if r.summary.mode == mode:
            for table in r.info.tables:
                found.setdefault(table.key, table)
    return sorted(found.values(), key=lambda t: t.order)


def declared_table(
    reports: list[CellReport], table: ReportTable, mode: str = "standard"
) -> str | None:
    """One declared table over the cells of ``mode`` whose datasets joined it."""
    mine = [
        r for r in reports
        if r.summary.mode == mode and any(t.key == table.key for t in r.info.tables)
    ]  # fmt: skip
    if not mine:
        return None
    infos: dict[str, TaskInfo] = {}
    for r in mine:
        infos.setdefault(r.summary.dataset, r.info)
    # The declared rank first (the paper's column order), then first appearance.
    datasets = sorted(infos, key=lambda d: infos[d].rank)
    if table.layout == "cells":
        several = len(datasets) > 1
        variants = any(r.summary.variant is not None for r in mine)
        header = (["dataset"] if several else []) + ["model"] + (["variant"] if variants else [])
        header += [_label(c, infos[datasets[0]]) for c in table.columns]
        rows = []
        for r in sorted(mine, key=lambda r: infos[r.summary.dataset].rank):
            s = r.summary
            at = f" @{s.threshold:g}" if s.threshold is not None else ""
            row = ([s.dataset + at] if several else []) + [s.model]
            row += [s.variant or "ladder"] if variants else []
            rows.append(row + [_value(r, c) for c in table.columns])
        return pipe_table(header, rows)
    groups: list[tuple[str, float | None]] = []
    for d in datasets:
        thresholds: list[float | None] = [None]
        if table.per_threshold:
            thresholds = list(_thresholds(mine, d, mode)) or [None]
        groups += [(d, t) for t in thresholds]
    header = ["model"]
    for d, t in groups:
        at = f" @{t:g}" if t is not None else ""
        header += [f"{d} {_label(c, infos[d])}{at}" for c in table.columns]
    rows = []
    for model in model_names(reports):
        row = [model]
        for d, t in groups:
            match: dict[str, object] = {"dataset": d, "model": model, "mode": mode}
            if table.per_threshold:
                match["threshold"] = t
            found = _pick(mine, **match)
            row += [_value(found, c) for c in table.columns]
        rows.append(row)
    return pipe_table(header, rows)


def table_adaptive_hpi(reports: list[CellReport]) -> str | None:
    """Table 6: adaptive HPF's HPI per model x dataset (with thresholds)."""
    columns: list[tuple[str, float | None]] = []
    for r in reports:
        s = r.summary
        if s.mode == "adaptive" and (s.dataset, s.threshold) not in columns:
            columns.append((s.dataset, s.threshold))
    if not columns:
        return None
    header = ["model"] + [d + (f" ({t:g})" if t is not None else "") for d, t in columns]
    rows = []
    for model in model_names(reports):
        row = [model]
        for d, t in columns:
            cell = _pick(reports, dataset=d, model=model, mode="adaptive", threshold=t)
            row.append(
                number(cell.summary.hpi if cell else None, 3) + _ci(cell.hpi_ci if cell else None)
            )
        rows.append(row)
    return pipe_table(header, rows)


def table_adaptive_scores(reports: list[CellReport]) -> str | None:
    """Table 7: adaptive HPF's performance: accuracy, or the text metric per threshold."""
    adaptive = [r for r in reports if r.summary.mode == "adaptive"]
    if not adaptive:
        return None
    models = model_names(adaptive)
    keys = list(dict.fromkeys((r.summary.dataset, r.summary.threshold) for r in adaptive))
    rows = []
    for d, t in keys:
        any_r = _pick(adaptive, dataset=d, threshold=t)
        assert any_r is not None
        metric = any_r.summary.text_metric or any_r.info.metric
        row = [d, metric, "-" if t is None else f"{t:g}"]
        for model in models:
            r = _pick(adaptive, dataset=d, model=model, threshold=t)
            s = r.summary if r else None
            value = s.text_score if s and s.text_metric else (s.accuracy if s else None)
            row.append(number(value, 4))
        rows.append(row)
    return pipe_table(["dataset", "metric", "threshold", *models], rows)


def table_levels(reports: list[CellReport]) -> str:
    """Where samples were resolved: counts per level, unresolved and errors, per cell."""
    m = max(r.summary.m for r in reports)
    # Judged tasks: the climbs the judge left without a score, in no other column.
    judged = any(r.summary.judge_missing is not None for r in reports)
    header = ["dataset", "model", "mode", *[f"L{k}" for k in range(1, m + 1)]]
    header += ["unresolved", "errors", *(["judge missing"] if judged else []),
               "selector hallucination %"]  # fmt: skip
    rows = []
    for r in reports:
        s = r.summary
        at = f" @{s.threshold:g}" if s.threshold is not None else ""
        mode = s.mode + (f" · {s.variant}" if s.variant else "")
        levels = [str(s.level_counts.get(k, 0)) if k <= s.m else "" for k in range(1, m + 1)]
        missing = [str(s.judge_missing or 0)] if judged else []
        rate = None if s.hallucination_rate is None else 100 * s.hallucination_rate
        rows.append([s.dataset + at, s.model, mode, *levels, str(s.unresolved), str(s.errors),
                     *missing, number(rate, 1)])  # fmt: skip
    return pipe_table(header, rows)


def table_usage(reports: list[CellReport]) -> str:
    """Calls, tokens and, with prices, cost per cell."""
    priced = any(r.cost_usd is not None for r in reports)
    header = ["dataset", "model", "mode", "samples", "calls (not sent)", "prompt tokens",
              "completion tokens"] + (["cost USD"] if priced else [])  # fmt: skip
    rows = []
    for r in reports:
        s = r.summary
        at = f" @{s.threshold:g}" if s.threshold is not None else ""
        mode = s.mode + (f" · {s.variant}" if s.variant else "")
        row = [s.dataset + at, s.model, mode, str(s.samples), f"{s.calls} ({s.cached_calls})",
               str(s.prompt_tokens), str(s.completion_tokens)]  # fmt: skip
        if priced:
            row.append("-" if r.cost_usd is None else f"{r.cost_usd:.4f}")
        rows.append(row)
    if priced:
        total = sum(r.cost_usd or 0.0 for r in reports)
        rows.append(["**total**", "", "", "", "", "", "", f"{total:.4f}"])
    return pipe_table(header, rows)


# Over every dataset, whatever table it declares: adaptive HPF (the paper's tables 6 and 7).
ADAPTIVE_SECTIONS = (
    ("Table 6 · Adaptive HPF: HPI", table_adaptive_hpi),
    ("Table 7 · Adaptive HPF: performance", table_adaptive_scores),
)


def markdown(
    reports: list[CellReport],
    sources: list[Path],
    comparisons: list[Comparison] | None = None,
    detect: float | None = None,
    unpaired: Sequence[str] = (),
) -> str:
    from hpt.reports import floors

    out = io.StringIO()
    out.write("# HPT report\n\n")
    out.write("Runs: " + ", ".join(f"`{s}`" for s in sources) + "\n\n")
    out.write(
        f"Brackets are 95% percentile-bootstrap intervals over samples "
        f"({BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED}). Samples that ended in an "
        f"error, or that a judge left without a valid score, are not scored.\n"
    )
    for table in declared_tables(reports):
        body = declared_table(reports, table)
        if body:
            out.write(f"\n## {table.title}\n\n{body}\n")
    for title, make in ADAPTIVE_SECTIONS:
        body = make(reports)
        if body:
            out.write(f"\n## {title}\n\n{body}\n")
    chance = floors.table_chance(reports)
    if chance:
        out.write(f"\n## Chance levels\n\n{floors.CHANCE_NOTE}\n\n{chance}\n")
    if comparisons or unpaired:
        out.write(f"\n## Paired comparisons\n\n{explanation()}\n\n")
        if comparisons:
            out.write(markdown_table(comparisons) + "\n")
        out.write("".join(f"\n- {note}" for note in unpaired) + ("\n" if unpaired else ""))
    out.write(f"\n## Sizing the next run\n\n{floors.SIZING_NOTE}\n\n")
    out.write(floors.table_sizing(reports, detect) + "\n")
    out.write(f"\n## Resolved per level\n\n{table_levels(reports)}\n")
    out.write(f"\n## Calls, tokens and cost\n\n{table_usage(reports)}\n")
    notes = {(r.info.title or r.info.name, n): None for r in reports for n in r.info.notes}
    for r in reports:
        if r.duplicates:
            notes[r.info.title or r.info.name, duplicates_note(r)] = None
    if notes:
        out.write("\n## Notes on the data\n\n")
        out.write("".join(f"- {title}: {note}\n" for title, note in notes))
    return out.getvalue()


def duplicates_note(report: CellReport) -> str:
    s, n = report.summary, report.duplicates
    cell = Cell(s.dataset, s.model, s.mode, s.threshold, s.variant)
    return (
        f"{report.source} holds {n} duplicate record{'s' if n != 1 else ''} of the same sample "
        f"and draw in {cell.title}; each (sample, draw) was counted once, its first record kept"
    )


# Columns added later go at the end: scripts may read the file by position.
CSV_COLUMNS = (
    "dataset", "threshold", "model", "mode", "samples", "scored", "errors", "hpi", "hpi_low",
    "hpi_high", "chance_hpi", "hpi_skill", "accuracy", "accuracy_low", "accuracy_high",
    "chance_accuracy", "level1_accuracy", "chance_level1_accuracy", "pass_at_1",
    "text_metric", "text_score", "unresolved", "level_counts", "calls", "cached_calls",
    "prompt_tokens", "completion_tokens", "cost_usd", "hallucination_rate", "source",
    "variant", "judge_missing",
)  # fmt: skip


def csv_rows(reports: list[CellReport]) -> Iterator[dict[str, object]]:
    for r in reports:
        s = r.summary
        yield {
            "dataset": s.dataset, "threshold": s.threshold, "model": s.model, "mode": s.mode,
            "variant": s.variant, "samples": s.samples, "scored": s.n, "errors": s.errors,
            "judge_missing": s.judge_missing, "hpi": s.hpi,
            "hpi_low": r.hpi_ci[0] if r.hpi_ci else None,
            "hpi_high": r.hpi_ci[1] if r.hpi_ci else None,
            "chance_hpi": s.chance_hpi, "hpi_skill": s.hpi_skill, "accuracy": s.accuracy,
            "accuracy_low": r.accuracy_ci[0] if r.accuracy_ci else None,
            "accuracy_high": r.accuracy_ci[1] if r.accuracy_ci else None,
            "chance_accuracy": s.chance_accuracy, "level1_accuracy": s.level1_accuracy,
            "chance_level1_accuracy": s.chance_level1_accuracy, "pass_at_1": r.pass_at_1,
            "text_metric": s.text_metric, "text_score": s.text_score, "unresolved": s.unresolved,
            "level_counts": " ".join(f"{k}:{v}" for k, v in s.level_counts.items()),
            "calls": s.calls, "cached_calls": s.cached_calls, "prompt_tokens": s.prompt_tokens,
            "completion_tokens": s.completion_tokens, "cost_usd": r.cost_usd,
            "hallucination_rate": s.hallucination_rate, "source": r.source,
        }  # fmt: skip


def write_csv(reports: list[CellReport], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in csv_rows(reports):
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
