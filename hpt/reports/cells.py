"""Every cell's figures over one or more run directories, each record read once: the tally's
summary, bootstrap intervals, per-sample scores (for paired comparisons and for sizing the
next run) and calls by level (for the cost). ``hpt report``, ``hpt compare`` and ``hpt ceiling`` all
read runs through ``collect``.

Every number is a pure function of the records. Confidence intervals are percentile
bootstraps over samples; because a resampled mean depends only on how often each distinct
score is drawn, each resample is one multinomial draw over the distinct scores -- exactly the
nonparametric bootstrap, in memory that does not grow with the run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from hpt.reports.paired import sd
from hpt.reports.spending import CellSpend, LevelCost
from hpt.results.costs import ModelPrice, PriceBook, RunPrices, read_run_prices
from hpt.results.info import TaskInfo
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
    # In value order, not the order values were first met: the interval must not depend on
    # the order records were written (a merged run's shards, a resumed run).
    ordered = sorted(counts.items())
    values = np.array([v for v, _ in ordered], dtype=float)
    probs = np.array([c for _, c in ordered], dtype=float) / n
    draws = np.random.default_rng(seed).multinomial(n, probs, size=resamples)
    means = draws @ values / n
    low, high = np.percentile(means, [2.5, 97.5])
    # The mean itself always lies inside; rounding must not push it out.
    mean = float(values @ probs)
    return min(float(low), mean), max(float(high), mean)


@dataclass
class CellScores:
    """A cell's scored samples, and the ladder that scored them (HPIs of different ladders
    are on different scales)."""

    strategies: tuple[str, ...]
    penalty: float
    # sample id -> draw -> (HPI score, resolved)
    samples: dict[str, dict[int, tuple[float, bool]]] = field(default_factory=dict)

    def add(self, sample_id: str, draw: int, score: float, resolved: bool) -> None:
        self.samples.setdefault(sample_id, {})[draw] = (score, resolved)

    def per_sample(self) -> list[float]:
        """Each sample's HPI score (the mean of its scored draws), in sample-id order."""
        return [mean([s for s, _ in d.values()]) for _, d in sorted(self.samples.items())]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


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
    # USD of the calls sent, by token class (batched ones at batch prices), and the list
    # price of those hpt's response cache answered; None: unpriced (a model without a price,
    # or a report without prices).
    cost_usd: float | None = None
    saved_usd: float | None = None
    # Of ``cost_usd``: the calls an identical call in flight answered (threshold cells ask
    # each call once): in each such cell's cost, once in a total over cells.
    shared_usd: float | None = None
    # Calls, tokens and cost per level (the selector's last); the prices used, and the called
    # models without one (why, and how to price them), by label.
    levels: list[LevelCost] = []
    prices: dict[str, ModelPrice] = {}
    unpriced: dict[str, str] = {}
    source: str = ""
    # Records of a (sample, draw) the source held more than once, beyond the one counted.
    duplicates: int = 0
    # The standard deviation of the scored samples' HPI scores (each sample's draws
    # averaged), and the number of those samples: for sizing the next run.
    sample_sd: float | None = None
    distinct_samples: int = 0
    # The ladder the records climbed (run.json's where records do not name it), how many
    # different HPI scores the scored samples have (a bootstrap needs two), and the prompt
    # tokens of the scored samples' calls: what the ceiling reads of a cell.
    ladder: tuple[str, ...] = ()
    distinct_scores: int = 0
    scored_prompt_tokens: int = 0

    @property
    def cell(self) -> Cell:
        return self.summary.cell

    @property
    def cost_per_resolved(self) -> float | None:
        """USD spent per sample resolved (draws count each)."""
        resolved = sum(self.summary.level_counts.values())
        return None if self.cost_usd is None or not resolved else self.cost_usd / resolved

    @property
    def independent(self) -> bool:
        """Every scored climb is of a different sample (no repeated draws)."""
        return self.distinct_samples == self.summary.n


@dataclass
class _Acc:
    tally: Tally
    source: Path
    ladder: tuple[str, ...]
    # Per sample and draw: for paired comparisons and for sizing the next run.
    scores: CellScores
    hpi: Counter[float] = field(default_factory=Counter)
    resolved: Counter[float] = field(default_factory=Counter)
    # What run.json says of prices and where models were served (for the cost).
    run_prices: RunPrices = field(default_factory=RunPrices)
    spend: CellSpend = field(default_factory=CellSpend)
    scored_prompt_tokens: int = 0
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
            self.scored_prompt_tokens += record.prompt_tokens
            if isinstance(record, DepthRecord) and record.judge_score is not None:
                path = f"depth_scores.{record.depth}"
                self.spreads.setdefault(path, Counter())[float(record.judge_score)] += 1
        self.spend.add(record)

    def report(self, prices: PriceBook | None, duplicates: int) -> CellReport:
        summary = self.tally.summary()
        per_sample = self.scores.per_sample()
        run = self.run_prices
        cost = self.spend.priced(
            None if prices is None
            else lambda label: run.price(prices, label) or run.unknown(prices, label)
        )  # fmt: skip
        return CellReport(
            summary=summary,
            info=self.tally.info or TaskInfo(name=summary.dataset),
            hpi_ci=bootstrap_ci(self.hpi),
            accuracy_ci=bootstrap_ci(self.resolved),
            pass_at_1=summary.pass_at_k.get("hpf@1", summary.accuracy),
            intervals={
                path: ci
                for path, counts in self.spreads.items()
                if (ci := bootstrap_ci(counts)) is not None
            },
            cost_usd=cost.cost_usd,
            saved_usd=cost.saved_usd,
            shared_usd=cost.shared_usd,
            levels=cost.levels,
            prices=cost.prices,
            unpriced=cost.unpriced,
            source=str(self.source),
            duplicates=duplicates,
            # A sample's draws averaged: the sample is the unit a paired comparison resamples.
            sample_sd=sd(per_sample),
            distinct_samples=len(per_sample),
            ladder=self.ladder,
            distinct_scores=len(self.hpi),
            scored_prompt_tokens=self.scored_prompt_tokens,
        )


# A cell, and the ladder its records climbed where reports tell ladders apart.
_Key = tuple[Cell, tuple[str, ...]]


def collect(
    run_dirs: Iterable[Path],
    prices: PriceBook | None = None,
    describe: Describe | None = None,
    scores: dict[Cell, CellScores] | None = None,
    *,
    by_ladder: bool = False,
) -> list[CellReport]:
    """One CellReport per cell over all the directories, reading each record once, in
    ``Cell.order``. A cell found in two directories is an error; with ``by_ladder`` (the
    ceiling's methods: one run per prompting method) only when both climbed the same ladder.
    Given ``scores``, fills it with every cell's per-sample scores (for paired comparisons;
    not with ``by_ladder``, where one cell may have several). Given ``prices``, costs each
    cell's calls at them, with the prices each run directory recorded between the user's and
    the cost map's; costs are left out where no call has a per-token price."""
    cells: dict[_Key, _Acc] = {}
    infos: dict[str, TaskInfo] = {}
    duplicates: Counter[_Key] = Counter()
    for directory in run_dirs:
        run = read_run_info(directory)
        run_prices = read_run_prices(directory) if prices is not None else RunPrices()
        seen_here: set[_Key] = set()
        records = read_records(directory)
        for record in records:
            cell = record.cell
            ladder = tuple(record.strategies) or tuple(run.strategies)
            key = (cell, ladder if by_ladder else ())
            acc = cells.get(key)
            if acc is None:
                if record.dataset not in infos:
                    info = run.tasks.get(record.dataset)
                    if info is None and describe is not None:
                        info = describe(record.dataset)
                    infos[record.dataset] = info or run.task(record.dataset)
                kept = CellScores(tuple(record.strategies), record.penalty)
                if scores is not None:
                    scores[cell] = kept
                tally = Tally.of(record, infos[record.dataset])
                acc = cells[key] = _Acc(tally, directory, ladder, kept, run_prices=run_prices)
            elif key not in seen_here:
                what, advice = cell.title, "report them separately"
                if by_ladder:
                    what, advice = f"{what} ({', '.join(ladder)})", "keep one"
                raise RunDirError(f"{what} is in both {acc.source} and {directory}; {advice}")
            seen_here.add(key)
            acc.add(record)
        for key in seen_here:
            duplicates[key] += records.duplicates_by_cell[key[0]]
    reports = [cells[key].report(prices, duplicates[key]) for key in sorted(cells, key=_order)]
    if not any(not p.free for r in reports for p in r.prices.values()):
        # Only self-hosted models (free) or none priced: a report as without prices.
        for r in reports:
            r.cost_usd = r.saved_usd = r.shared_usd = None
            r.prices, r.unpriced = {}, {}
            for level in r.levels:
                level.cost_usd = level.saved_usd = level.shared_usd = None
    return reports


def _order(key: _Key) -> tuple[object, ...]:
    return key[0].order(), key[1]
