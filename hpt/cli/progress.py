"""The live terminal view of a run, and its closing summary table (rich)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.segment import Segments
from rich.table import Table
from rich.text import Text

from hpt.backends import BackendStats
from hpt.cli.common import PlainTable
from hpt.orchestrator.budget import Spend, usd_text
from hpt.orchestrator.observer import WorkerStats
from hpt.orchestrator.spec import RunSpec
from hpt.reports.truncation import TRUNCATION_WARNING_SHARE, counted, heavily_cut, truncations
from hpt.results.records import Attempt, SampleRecord
from hpt.results.tally import Summary, Tally

if TYPE_CHECKING:
    from hpt.results.runfile import RunSummary


MAX_CELLS_SHOWN = 8
MAX_WORKERS_SHOWN = 8
UNBOUNDED = 100_000  # columns to measure a table in: wider than any table's content


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def batches_line(b: BackendStats) -> str:
    """Batch mode's queue, open and collected batches, each with its requests."""
    return (
        f"batches: {b.batches_waiting:,} waiting ({b.batch_requests_waiting:,} req) · "
        f"{b.batches_in_progress:,} in progress ({b.batch_requests_in_progress:,} req) · "
        f"{b.batches_done:,} done ({b.batch_requests_done:,} req)"
    )


class CountColumn(MofNCompleteColumn):
    """M/N of a task with a total; a bare count of one without (the model calls, whose
    number the ladders decide as they climb)."""

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text(f"{int(task.completed):,}", style="progress.download")
        return super().render(task)


def attempts_line(tried: Mapping[int, int], resolved: Mapping[int, int]) -> str:
    """Attempts finished per level, climbs in flight included: "L1 5/2 L2 3/1" is five
    tried at level 1, two of them resolved, three at level 2, one resolved."""
    levels = sorted(tried)
    return "  ".join(f"L{k} {tried[k]}/{resolved.get(k, 0)}" for k in levels)


def worker_line(w: WorkerStats) -> str:
    """One worker of a run spread over several."""
    where = f" on {w.node}" if w.node else ""
    return (
        f"{w.name}{where}: {w.state}  samples {w.samples}  in flight {w.in_flight}  "
        f"calls {w.calls}  restarts {w.restarts}"
    )


def more_workers_line(hidden: Sequence[WorkerStats]) -> str:
    """The workers past the ones shown, counted by state: a dead one among them still shows."""
    states: dict[str, int] = {}
    for w in hidden:
        states[w.state] = states.get(w.state, 0) + 1
    by_state = ", ".join(f"{n} {state}" for state, n in states.items())
    return f"... and {len(hidden)} more workers: {by_state}"


class RichProgress:
    """Samples done, model calls and attempts per level as they finish, each worker of a
    run spread over several, running HPI, tokens and errors, refreshed live."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, emoji=False)
        self._bar = Progress(
            # The description names models: text, never markup.
            TextColumn("{task.description}", style="bold", markup=False),
            BarColumn(),
            CountColumn(),
            TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(),
            console=self.console,
        )
        self._task = self._bar.add_task("samples", total=None, note="")
        # Moves with every call that lands: a slow model (the embedded one) shows its work
        # between samples.
        self._calls = self._bar.add_task("model calls", total=None, note="")
        self._stats = Table.grid(padding=(0, 2))
        self._live: Live | None = None
        self._strategies: list[str] = []
        self._backends: Mapping[str, BackendStats] = {}
        self._tallies: dict[int, Tally] = {}
        # A run with a budget: its live ledger and bounds (SpendWatcher).
        self._spend: tuple[Spend, float | None, int | None] | None = None
        # Attempts finished per cell (by id of its tally) and level: tried, and resolved.
        self._tried: dict[int, dict[int, int]] = {}
        self._resolved: dict[int, dict[int, int]] = {}
        self._workers: Mapping[str, WorkerStats] = {}

    def watch(self, backends: Mapping[str, BackendStats]) -> None:
        self._backends = backends

    def watch_spend(self, spend: Spend, budget_usd: float | None, max_calls: int | None) -> None:
        self._spend = (spend, budget_usd, max_calls)

    def watch_workers(self, workers: Mapping[str, WorkerStats]) -> None:
        self._workers = workers

    def attempted(self, tally: Tally, attempt: Attempt) -> None:
        key = id(tally)
        self._tallies.setdefault(key, tally)  # the cell shows before its first record
        tried = self._tried.setdefault(key, {})
        tried[attempt.level] = tried.get(attempt.level, 0) + 1
        if attempt.resolved:
            resolved = self._resolved.setdefault(key, {})
            resolved[attempt.level] = resolved.get(attempt.level, 0) + 1

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        self._strategies = list(spec.strategies)
        self._bar.update(self._task, total=total, completed=done, description=spec.title)
        again = f" (resumed: {done} of {total} samples already recorded)" if done else ""
        self.console.print(Text.assemble("writing records to ", (str(out), "bold"), again))
        # get_renderable re-reads the backend counters on every refresh, not only per sample.
        self._live = Live(console=self.console, refresh_per_second=4, get_renderable=self._current)
        self._live.start()

    def _current(self) -> Group:
        return self._render(list(self._tallies.values()))

    def _render(self, tallies: list[Tally]) -> Group:
        # Read from the refresh thread while the run's loop updates them: copies, each taken
        # at once.
        workers = list(self._workers.values())
        self._update_calls(list(self._backends.values()), workers)
        grid = PlainTable.grid(padding=(0, 2))
        for name, b in self._backends.items():
            cap = "" if b.concurrency is None else f"/{b.concurrency}"
            grid.add_row(
                f"{name}: in flight {b.in_flight}{cap}  calls {b.calls}  "
                f"cache hits {b.cache_hits}  retries {b.retries}  rate-limited {b.rate_limited}  "
                f"held back {b.rate_limit_wait_s:.1f} s  failed {b.errors}"
            )
            if b.batching:
                grid.add_row(f"{name}: {batches_line(b)}")
        if self._spend is not None:
            grid.add_row(spend_line(*self._spend))
        for w in workers[:MAX_WORKERS_SHOWN]:
            grid.add_row(worker_line(w))
        if len(workers) > MAX_WORKERS_SHOWN:
            grid.add_row(more_workers_line(workers[MAX_WORKERS_SHOWN:]))
        for tally in tallies[:MAX_CELLS_SHOWN]:
            levels = " ".join(str(tally.level_counts[k]) for k in range(1, tally.m + 1))
            missing = f"  judge gave no score {tally.judge_missing}" if tally.judge_missing else ""
            thinking = (
                "" if tally.reasoning_tokens is None else f" (thinking {tally.reasoning_tokens})"
            )
            cut = sum(tally.truncated.values())
            truncated = f"  truncated {cut}" if cut else ""
            grid.add_row(
                f"{tally.cell.title}: HPI "
                f"{_fmt(tally.hpi)} (scored {tally.n})  per level [{levels}] unresolved "
                f"{tally.unresolved}  calls {tally.calls}  tokens "
                f"{tally.prompt_tokens}+{tally.completion_tokens}{thinking}{truncated}  "
                f"errors {tally.errors}{missing}"
            )
            tried = self._tried.get(id(tally))
            if tried:
                resolved = dict(self._resolved.get(id(tally), {}))
                grid.add_row(f"  levels tried/resolved  {attempts_line(dict(tried), resolved)}")
        if len(tallies) > MAX_CELLS_SHOWN:
            grid.add_row(f"... and {len(tallies) - MAX_CELLS_SHOWN} more cells")
        return Group(self._bar, grid)

    def _update_calls(self, backends: list[BackendStats], workers: list[WorkerStats]) -> None:
        """The model calls row: calls that came back (a retry is a call of its own) and those
        in flight; in a run spread over workers, the calls of the records they sent back
        (this process's backends call nothing there)."""
        if workers:
            self._bar.update(self._calls, completed=sum(w.calls for w in workers), note="")
            return
        # A call is counted as it is sent (BackendStats.calls): those still out are not back.
        back = sum(max(0, b.calls - b.in_flight) for b in backends)
        out = sum(b.in_flight for b in backends)
        self._bar.update(self._calls, completed=back, note=f"({out} in flight)" if out else "")

    def recorded(self, record: SampleRecord, tally: Tally) -> None:
        self._bar.advance(self._task)
        self._tallies.setdefault(id(tally), tally)

    def finished(self, result: RunSummary) -> None:
        self.stop()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def spend_line(spend: Spend, budget_usd: float | None, max_calls: int | None) -> str:
    """What a run with a budget has spent so far, against its bounds."""
    of_usd = "" if budget_usd is None else f" of {usd_text(budget_usd)}"
    of_calls = "" if max_calls is None else f" of {max_calls}"
    return f"spent {usd_text(spend.spent_usd)}{of_usd} · calls {spend.calls}{of_calls}"


def _chance(value: float | None) -> str:
    """A random guesser's figure beside the model's."""
    return "" if value is None else f" (chance {_fmt(value)})"


def _scored(value: float | None, n: int) -> str:
    """A figure over the scored samples; with none scored there is no figure at all."""
    return _fmt(value) if n else "- (nothing scored)"


def _levels(summary: Summary, strategies: Sequence[str]) -> list[str]:
    """The names of the cell's own levels: its ladder, not the run's (a DepthQA mode's cell
    is one level, whatever --strategies said)."""
    names = summary.strategies or strategies
    if len(names) != summary.m:
        names = [""] * summary.m
    return list(names)


def summary_table(summary: Summary, strategies: Sequence[str] = ()) -> Table:
    """One cell's figures, each only where it means something for the cell (no level-1
    accuracy in adaptive mode, no level the ladder lacks)."""
    kind = "adaptive HPF" if summary.mode == "adaptive" else "HPF"
    cell = summary.cell
    variant = "".join(f" · {part}" for part in (cell.variant, cell.reasoning_label) if part)
    table = PlainTable(
        title=Text(f"{kind} · {cell.dataset_label} · {cell.model}{variant}"),
        show_header=False,
    )
    table.add_column(style="bold")
    table.add_column(justify="right")
    n = summary.n
    table.add_row("HPI (lower is better)", _scored(summary.hpi, n) + _chance(summary.chance_hpi))
    table.add_row("HPF accuracy", _scored(summary.accuracy, n) + _chance(summary.chance_accuracy))
    if summary.mode == "standard":
        table.add_row(
            "level-1 accuracy (single prompt)",
            _scored(summary.level1_accuracy, n) + _chance(summary.chance_level1_accuracy),
        )
    if summary.chance_hpi is not None:
        table.add_row("skill (chance 0, all at level 1: 1)", _fmt(summary.hpi_skill))
    for level, name in enumerate(_levels(summary, strategies), 1):
        table.add_row(f"resolved at L{level} {name}".rstrip(),
                      str(summary.level_counts.get(level, 0)))  # fmt: skip
    table.add_row("unresolved", str(summary.unresolved))
    if summary.text_metric is not None:
        table.add_row(summary.text_metric, _fmt(summary.text_score))
    if summary.depth_scores is not None:
        nodes = summary.depth_nodes or {}
        for depth, mean in summary.depth_scores.items():
            table.add_row(f"mean judge score, depth {depth}", _depth_mean(mean, nodes.get(depth)))
    if summary.judge_missing is not None:
        table.add_row("judge gave no score (not scored)", str(summary.judge_missing))
    if summary.mode == "adaptive":
        table.add_row(
            "selector hallucinations / turns",
            f"{summary.hallucinations} / {summary.selector_turns} "
            f"({_fmt(summary.hallucination_rate)})",
        )
    for name, value in summary.pass_at_k.items():
        table.add_row(f"pass@{name.split('@')[1]} ({name.split('@')[0]})", _fmt(value))
    for name, reading in summary.readings.items():
        table.add_row(
            f"{name} reader disagrees (attempts)",
            f"{reading.disagreements} / {reading.attempts} ({_fmt(reading.disagreement_rate)})",
        )
        table.add_row(f"{name} reader would flip the verdict", str(reading.resolved_flips))
        if reading.level1_accuracy is not None:
            table.add_row(f"level-1 accuracy, {name} reader", _fmt(reading.level1_accuracy))
    table.add_row("errors (not scored)", str(summary.errors))
    table.add_row("samples scored / recorded", f"{summary.n} / {summary.samples}")
    table.add_row("m, HPI_dataset penalty", f"{summary.m}, {summary.penalty}")
    table.add_row(
        "model calls (not sent: cache or shared)", f"{summary.calls} ({summary.cached_calls})"
    )
    table.add_row(
        "tokens (prompt + completion)", f"{summary.prompt_tokens} + {summary.completion_tokens}"
    )
    if summary.reasoning_tokens is not None:
        table.add_row("of which thinking (reasoning tokens)", str(summary.reasoning_tokens))
    if summary.cut_off[0]:
        table.add_row(f"cut off at the token limit ({counted(summary)})", truncations(summary))
    return table


def truncation_warning(summaries: Sequence[Summary], max_tokens: Sequence[int]) -> str | None:
    """One line when a cell had many of its attempts (and selector turns) cut off at the token
    limit (at least ``TRUNCATION_WARNING_SHARE``): a reasoning model thinking within the
    paper's budget is cut off mid-thought, and what the cell then measures is the budget. By
    cell, since one cell badly cut is hidden in a run's total; the line names the worst.
    ``max_tokens``: the limits the cut-off cells asked for."""
    high = [(s.truncated_share or 0.0, s) for s in summaries if heavily_cut(s)]
    if not high:
        return None
    share, worst = max(high, key=lambda pair: pair[0])
    cut, made = worst.cut_off
    others = len(high) - 1
    plural = "s" if others > 1 else ""
    also = f", and {others} more cell{plural} at {TRUNCATION_WARNING_SHARE:.0%} or more"
    also = also if others else ""
    limits = f" (max_tokens {', '.join(map(str, sorted(set(max_tokens))))})" if max_tokens else ""
    return (
        f"{share:.0%} of {counted(worst)} in {worst.cell.title} ({cut} of {made}) were cut off "
        f"at the token limit{limits}{also}; each counts as unresolved, so the HPI then measures "
        f"the token budget, not the model: raise --max-tokens"
    )


def _depth_mean(mean: float | None, nodes: int | None) -> str:
    """A depth's mean judge score and the nodes it rests on (unknown in old summaries)."""
    if nodes is None:
        return _fmt(mean)
    if not nodes:
        return "- (no scored node)"
    return f"{_fmt(mean)} ({nodes} node{'' if nodes == 1 else 's'})"


@dataclass(frozen=True)
class _Column:
    """One column of the closing cells table: its full header, the short one a narrow
    terminal gets (explained under the table), and its text in each row."""

    name: str
    short: str
    values: list[str]
    legend: str = ""  # what the short header means, when it says less than the name

    @property
    def label(self) -> bool:  # names (dataset, model, mode), not figures
        return self.name in _LABELS


_LABELS = ("dataset", "model", "mode")
CELLS_TITLE = "HPF runs (HPI: lower is better)"


def _cell_columns(summaries: list[Summary]) -> list[_Column]:
    """The closing table's columns, each only where some cell has its figures."""

    def metric(s: Summary) -> str:
        if s.depth_scores is not None:
            nodes = s.depth_nodes or {}
            means = "  ".join(f"D{d} {_depth_mean(v, nodes.get(d))}"
                              for d, v in s.depth_scores.items())  # fmt: skip
            return f"judge {means}  judge missing {s.judge_missing}"
        return f"{s.text_metric} {_fmt(s.text_score)}" if s.text_metric else "-"

    columns = [
        _Column("dataset", "dataset", [s.cell.dataset_label for s in summaries]),
        _Column("model", "model", [s.model for s in summaries]),
        _Column("mode", "mode", [s.cell.mode_label for s in summaries]),
        _Column("scored", "n", [str(s.n) for s in summaries], "n samples scored"),
        _Column("HPI", "HPI", [_fmt(s.hpi) for s in summaries]),
        _Column(
            "chance HPI",
            "chance",
            [_fmt(s.chance_hpi) for s in summaries],
            "chance a guesser's HPI",
        ),
        _Column("accuracy", "acc", [_fmt(s.accuracy) for s in summaries], "acc accuracy"),
        _Column(
            "L1 accuracy", "L1", [_fmt(s.level1_accuracy) for s in summaries], "L1 level-1 accuracy"
        ),
        _Column("metric", "metric", [metric(s) for s in summaries]),
    ]
    if any(s.reasoning_tokens is not None for s in summaries):
        columns.append(_Column(
            "thinking tokens", "thinking",
            [str(s.reasoning_tokens) if s.reasoning_tokens is not None else "-"
             for s in summaries],
            "thinking thinking tokens",
        ))  # fmt: skip
    if any(s.cut_off[0] for s in summaries):
        columns.append(_Column("truncated", "cut", [truncations(s) for s in summaries],
                               "cut truncated at the token limit"))  # fmt: skip
    columns.append(_Column("errors", "err", [str(s.errors) for s in summaries], "err errors"))
    return columns


def cells_table(summaries: list[Summary]) -> Table:
    """A campaign at a glance: one row per cell, every column under its full name."""
    columns = _cell_columns(summaries)
    table = PlainTable(title=CELLS_TITLE)
    for column in columns:
        table.add_column(column.name, justify="left" if column.label else "right")
    for row in zip(*(c.values for c in columns), strict=True):
        table.add_row(*row)
    return table


def compact_cells_table(summaries: list[Summary]) -> tuple[Table, str]:
    """The cells table for a narrow terminal, and the line that explains its short headers:
    names the cells share go into the title, the rest fold rather than being cut, headers
    are short, and no rules stand between the columns."""
    columns = _cell_columns(summaries)
    shared = [c for c in columns if c.label and len(set(c.values)) == 1]
    columns = [c for c in columns if c not in shared]
    title = CELLS_TITLE
    if shared:
        title = f"HPF runs · {' · '.join(c.values[0] for c in shared)} (HPI: lower is better)"
    table = PlainTable(title=Text(title), box=box.SIMPLE_HEAD, padding=(0, 1),
                       collapse_padding=True, pad_edge=False, show_edge=False)  # fmt: skip
    for column in columns:
        if column.label or column.name == "metric":
            table.add_column(column.short, justify="left", overflow="fold")
        else:
            table.add_column(column.short, justify="right", no_wrap=True)
    for row in zip(*(c.values for c in columns), strict=True):
        table.add_row(*row)
    legend = " · ".join(c.legend for c in columns if c.legend)
    return table, legend


def stacked_cells(summaries: list[Summary], width: int) -> Group:
    """The cells one after another, each figure named in full and packed into lines of
    ``width``: what a terminal too narrow for any table gets. A line breaks between figures,
    never inside one (a name longer than the line folds)."""
    columns = _cell_columns(summaries)
    parts: list[RenderableType] = [Text(CELLS_TITLE, style="bold")]
    for i in range(len(summaries)):
        parts.append(Text(" · ".join(c.values[i] for c in columns if c.label), style="bold",
                          overflow="fold"))  # fmt: skip
        figures = [f"{c.name} {c.values[i]}" for c in columns if not c.label]
        line = ""
        for figure in figures:
            if line and len(line) + 3 + len(figure) > width:
                parts.append(Text(line, overflow="fold"))
                line = ""
            line = f"{line}   {figure}" if line else f"  {figure}"
        parts.append(Text(line, overflow="fold"))
    return Group(*parts)


def print_cells(console: Console, summaries: list[Summary]) -> None:
    """The closing cells table as wide as the screen allows: whole (off a terminal always,
    see print_table); on a terminal too narrow for it, compact; narrower still, stacked.
    No name or header is ever cut to "…"."""
    full = cells_table(summaries)
    if not console.is_terminal or _fits(console, full, minimum=False):
        print_table(console, full)
        return
    compact, legend = compact_cells_table(summaries)
    if _fits(console, compact, minimum=True):
        console.print(compact)
        if legend:
            console.print(Text(legend, style="dim", overflow="fold"))
        return
    console.print(stacked_cells(summaries, console.width))


def _fits(console: Console, table: Table, *, minimum: bool) -> bool:
    """Whether ``table`` fits the console's width: as laid out whole, or (``minimum``) with
    its folding columns folded."""
    measured = Measurement.get(console, console.options.update_width(UNBOUNDED), table)
    width = measured.minimum if minimum else measured.maximum
    return width <= console.width


def print_table(console: Console, table: Table) -> None:
    """Print ``table``; off a terminal (a file, a pipe, a CI log) at its full width.

    On a terminal rich fits the table to the window. Elsewhere the console is 80 columns by
    default, and rich would squeeze the table into them, cutting headers and cells with "…"
    ("datas…", "accur…"); a log has no such limit, so there the table is laid out as wide as its
    content (title included) and printed without cropping."""
    if console.is_terminal:
        console.print(table)
        return
    wide = console.options.update_width(UNBOUNDED)
    width = Measurement.get(console, wide, table).maximum
    if table.title is not None:
        title = Measurement.get(console, wide, table.title).maximum
        if title > width:  # keep the title on one line: widen the table to it
            table.min_width = max(table.min_width or 0, title)
            width = title
    if width <= console.width:
        console.print(table)
        return
    console.print(Segments(console.render(table, console.options.update_width(width))), crop=False)
