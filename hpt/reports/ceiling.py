"""The performance ceiling (Aali et al., "Structured Prompting Enables More Robust, Holistic
Evaluation of Language Models", sections 2-3, tables 3-5): a model's best macro-averaged
accuracy over prompting methods, its gain over a fixed baseline prompt, and how model
rankings move when each model is scored at its best instead of at the baseline.

Pure arithmetic over a list of results; reading runs or CSV files and rendering live
elsewhere (``hpt.cli.ceiling``, ``hpt.reports.ceiling_plots``). Accuracies are percentages.

Rules, as the paper computes them (its table 3 follows from tables 4-5 with these rules):

* a model's macro-average for a method is the plain mean over benchmarks (equal weight per
  benchmark); its sigma is the sample standard deviation across benchmarks (ddof=1), null
  with a single benchmark;
* the ceiling is the method with the best macro-average; a tie goes to the baseline, then
  to the method seen first; delta = ceiling - baseline;
* the headline gain: per model, the mean over the headline methods of (macro-average -
  baseline macro-average), then the mean over models (the paper's "+4%");
* ranks (1 = best) per benchmark at the baseline and at the ceiling, where a model's
  ceiling on a benchmark is its best method there; tied accuracies share the average of the
  ranks they span (two models tied for first both get 1.5); a benchmark is a rank flip when
  any model's rank differs between the two rankings.

Every figure carries the count behind it: samples (n) for an accuracy, benchmarks for a
macro-average and its sigma, models for a mean over models. An interval is given only where it
means something: a run's accuracy gets the Wilson score interval of k resolved out of n scored
samples (meaningful at 0/n and n/n too, where a bootstrap or Wald interval collapses to a
point); a published row, whose samples hpt does not see, gets none; nor does a cell whose
samples were drawn more than once (its climbs are not independent). Each missing interval
says why.

Incomplete data: all methods of one model must cover the same benchmarks (a ceiling compares
them), else it is an error. A model may lack benchmarks other models have: its averages are
over the benchmarks it has, and it is flagged (``missing_benchmarks``, a warning)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from hpt.reports import ReportError

DEFAULT_BASELINE = "helm_baseline"
DEFAULT_HEADLINE = ("dspy_cot", "dspy_bfrs", "dspy_mipro")
# Accuracies closer than this are a tie when ranking (percentage points).
TIE_TOLERANCE = 1e-9
TIE_RULE = "tied accuracies share the average of the ranks they span (1 = best)"
CONFIDENCE = 0.95
# The two-sided normal quantile of CONFIDENCE (1.96).
Z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
# Below this many scored samples a percentile bootstrap of a mean (the HPT view's HPI) runs
# noticeably narrow (by ~20% at 10: it ignores the t correction and the n-1), so none is shown.
MIN_BOOTSTRAP_N = 10
INTERVALS = (
    f"{CONFIDENCE:.0%} Wilson score intervals of k resolved out of n scored samples, for run "
    f"results only (defined at 0/n and n/n as well, where a bootstrap or Wald interval "
    f"collapses to a point); none for published (CSV) rows, whose samples hpt does not see, "
    f"nor for cells whose samples were drawn more than once (their climbs are not "
    f"independent). The HPT view's HPI: a {CONFIDENCE:.0%} percentile bootstrap over samples, "
    f"given with at least {MIN_BOOTSTRAP_N} scored samples whose scores differ"
)
NO_SAMPLES = "a published result: hpt does not see the samples behind it"
REPEATED_DRAWS = "samples drawn more than once (--samples-per-task): not independent"


def wilson_interval(k: int, n: int) -> tuple[float, float]:
    """The Wilson score interval (CONFIDENCE) of k successes in n trials, as fractions."""
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"no proportion in {k} of {n}")
    p = k / n
    z2 = Z * Z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # 0/n and n/n: the bound that equals p must be p exactly, not p +- rounding.
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


def hpi_interval_missing(n: int, distinct_scores: int, independent: bool) -> str | None:
    """Why an HPI (a mean of per-sample scores) gets no bootstrap interval, or None when it
    gets one."""
    if not independent:
        return REPEATED_DRAWS
    if n < MIN_BOOTSTRAP_N:
        return f"{n} scored sample(s): a bootstrap needs at least {MIN_BOOTSTRAP_N}"
    if distinct_scores < 2:
        return "every sample scored the same: a bootstrap collapses to that point"
    return None


@dataclass(frozen=True)
class MethodResult:
    """One model's accuracy on one benchmark with one prompting method."""

    model: str
    benchmark: str
    method: str
    accuracy: float  # percent
    # Samples scored, where known.
    n: int | None = None
    # CONFIDENCE Wilson interval (percent), only where hpt saw the samples (a run) ...
    ci: tuple[float, float] | None = None
    # ... and, where there is none, why.
    ci_missing: str | None = None
    # Samples that ended in an error: not scored, excluded from the accuracy.
    errors: int = 0
    # Mean prompt tokens per scored sample, where known.
    prompt_tokens: float | None = None
    source: str = ""


@dataclass(frozen=True)
class LadderResult:
    """An HPT ladder cell (several strategies): its HPI, not a prompting method."""

    model: str
    benchmark: str
    hpi: float | None
    hpi_ci: tuple[float, float] | None = None
    # Why there is no interval, where there is none.
    hpi_ci_missing: str | None = None
    accuracy: float | None = None  # percent resolved at any level
    # A uniform random guesser's HPI on the same samples and ladder (hpt.results.chance).
    chance_hpi: float | None = None
    n: int = 0
    errors: int = 0
    strategies: tuple[str, ...] = ()
    source: str = ""


class MethodStat(BaseModel):
    macro_avg: float
    # Across benchmarks; None with one benchmark.
    sd: float | None
    benchmarks: int
    # Scored samples summed over the benchmarks; None where a result does not say (a CSV
    # row without n).
    n: int | None = None


class Spread(BaseModel):
    """How far apart a model's methods are: the max (the ceiling) is biased upward by
    selection; the median shows what a typical method gives."""

    min: float
    median: float
    max: float
    methods: int


class ModelCeiling(BaseModel):
    methods: dict[str, MethodStat]
    ceiling_method: str
    ceiling: float
    delta: float
    mean_rank_baseline: float
    mean_rank_ceiling: float
    rank_sd_baseline: float | None
    rank_sd_ceiling: float | None
    baseline: float
    baseline_sd: float | None
    ceiling_sd: float | None
    # Mean over the headline methods the model has of (macro-average - baseline).
    headline_delta: float | None
    headline_sd_delta: float | None
    headline_methods: list[str]
    spread: Spread
    benchmarks: list[str]
    missing_benchmarks: list[str]
    # Mean over benchmarks of (method's - baseline's mean prompt tokens per sample).
    extra_prompt_tokens: dict[str, float | None]


class BenchmarkRanking(BaseModel):
    baseline: dict[str, float]
    ceiling: dict[str, float]
    baseline_accuracy: dict[str, float]
    ceiling_accuracy: dict[str, float]
    # The method that gave each model its best accuracy on this benchmark.
    ceiling_methods: dict[str, str]


class ResultRow(BaseModel):
    model: str
    benchmark: str
    method: str
    accuracy: float
    ci_low: float | None
    ci_high: float | None
    ci_missing: str | None = None
    n: int | None
    errors: int
    prompt_tokens: float | None
    source: str


class HpiRow(BaseModel):
    model: str
    benchmark: str
    hpi: float | None
    hpi_ci_low: float | None
    hpi_ci_high: float | None
    hpi_ci_missing: str | None = None
    chance_hpi: float | None = None
    accuracy: float | None
    n: int
    errors: int
    strategies: list[str]
    source: str


class CeilingReport(BaseModel):
    unit: str = "percent"
    baseline: str
    headline_methods: list[str]
    methods: list[str]
    benchmarks: list[str]
    models: dict[str, ModelCeiling]
    headline_delta: float | None
    headline_sd_delta: float | None
    # The models each of the two averages is over.
    headline_n: int = 0
    headline_sd_n: int = 0
    # Per method, the mean over models of its macro-average (the paper's section 3.2), and
    # the models it is over.
    method_means: dict[str, float]
    method_means_n: dict[str, int] = {}
    # Per method, the mean over models of its extra prompt tokens over the baseline.
    extra_prompt_tokens: dict[str, float | None]
    # Per benchmark, the mean over models of the headline methods' mean gain over the
    # baseline there (the paper's figure 3 and "reasoning tasks gain most").
    benchmark_gains: dict[str, float | None]
    benchmark_gains_n: dict[str, int] = {}
    rank_flips: list[str]
    rankings: dict[str, BenchmarkRanking]
    ties: str = TIE_RULE
    intervals: str = INTERVALS
    results: list[ResultRow]
    # The HPT view: each HPT ladder cell's HPI, {model: {benchmark: value}}.
    hpi: dict[str, dict[str, float | None]]
    hpt_view: list[HpiRow]
    errors_excluded: int
    warnings: list[str]


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def sample_sd(values: Sequence[float]) -> float | None:
    """The sample standard deviation (ddof=1); None (undefined) for fewer than two values."""
    return statistics.stdev(values) if len(values) >= 2 else None


def average_ranks(scores: dict[str, float]) -> dict[str, float]:
    """Rank 1 = highest score; tied scores share the average of the ranks they span."""
    order = sorted(scores, key=lambda k: -scores[k])
    ranks: dict[str, float] = {}
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[i]] - scores[order[j + 1]] <= TIE_TOLERANCE:
            j += 1
        for k in order[i : j + 1]:
            ranks[k] = (i + 1 + j + 1) / 2
        i = j + 1
    return ranks


def first_best(values: dict[str, float]) -> str:
    """The first key whose value is the highest (within TIE_TOLERANCE): ties go to the
    earlier key (the baseline leads the method order)."""
    top = max(values.values())
    return next(k for k, v in values.items() if top - v <= TIE_TOLERANCE)


def _index(
    results: Iterable[MethodResult],
) -> tuple[dict[tuple[str, str, str], MethodResult], list[str], list[str], list[str]]:
    """Results by (model, benchmark, method), refusing duplicates; models, benchmarks and
    methods in order of first appearance."""
    table: dict[tuple[str, str, str], MethodResult] = {}
    models: dict[str, None] = {}
    benchmarks: dict[str, None] = {}
    methods: dict[str, None] = {}
    for r in results:
        key = (r.model, r.benchmark, r.method)
        if key in table:
            raise ReportError(
                f"{r.model} · {r.benchmark} · {r.method} is given twice "
                f"({table[key].source or '?'} and {r.source or '?'}); keep one"
            )
        table[key] = r
        models.setdefault(r.model)
        benchmarks.setdefault(r.benchmark)
        methods.setdefault(r.method)
    return table, list(models), list(benchmarks), list(methods)


def compute(
    results: Sequence[MethodResult],
    *,
    baseline: str = DEFAULT_BASELINE,
    headline_methods: Sequence[str] = DEFAULT_HEADLINE,
    ladders: Sequence[LadderResult] = (),
) -> CeilingReport:
    """The ceiling report of ``results`` (and the HPT view of ``ladders``)."""
    if not results:
        raise ReportError(
            "no method results: give CSV rows or runs with one-strategy cells "
            "(a run with a ladder of several strategies is only shown in the HPT view)"
        )
    table, models, all_benchmarks, methods = _index(results)
    if baseline in methods:  # the baseline first: it wins ties and leads every table
        methods = [baseline] + [m for m in methods if m != baseline]
    warnings: list[str] = []

    # Which benchmarks and methods each model has; every method must cover them all.
    have: dict[str, dict[str, set[str]]] = {m: {} for m in models}
    for model, benchmark, method in table:
        have[model].setdefault(method, set()).add(benchmark)
    no_baseline = [m for m in models if baseline not in have[m]]
    if no_baseline:
        raise ReportError(
            "no baseline ("
            + baseline
            + ") results for "
            + "; ".join(f"{m} (it has {', '.join(sorted(have[m]))})" for m in no_baseline)
            + "; name the baseline method with --baseline"
        )
    model_benchmarks: dict[str, list[str]] = {}
    for model in models:
        mine = set().union(*have[model].values())
        for method in methods:
            got = have[model].get(method)
            if got is not None and got != mine:
                lacking = ", ".join(b for b in all_benchmarks if b in mine - got)
                raise ReportError(
                    f"{model}: method {method} lacks {lacking}, which its other methods have; "
                    f"a ceiling compares macro-averages over the same benchmarks, so give "
                    f"{method} on every benchmark of {model} or leave it out"
                )
        model_benchmarks[model] = [b for b in all_benchmarks if b in mine]
        missing = [b for b in all_benchmarks if b not in mine]
        if missing:
            warnings.append(
                f"{model} has no results on {', '.join(missing)}: its averages and mean ranks "
                f"are over its {len(mine)} benchmark(s) only"
            )

    # Rankings per benchmark: at the baseline and at each model's best method there.
    rankings: dict[str, BenchmarkRanking] = {}
    for benchmark in all_benchmarks:
        present = [m for m in models if benchmark in model_benchmarks[m]]
        base_acc = {m: table[m, benchmark, baseline].accuracy for m in present}
        best_method: dict[str, str] = {}
        for m in present:
            best_method[m] = first_best(
                {x: table[m, benchmark, x].accuracy for x in methods if (m, benchmark, x) in table}
            )
        best_acc = {m: table[m, benchmark, best_method[m]].accuracy for m in present}
        rankings[benchmark] = BenchmarkRanking(
            baseline=average_ranks(base_acc),
            ceiling=average_ranks(best_acc),
            baseline_accuracy=base_acc,
            ceiling_accuracy=best_acc,
            ceiling_methods=best_method,
        )
    rank_flips = [b for b, r in rankings.items() if len(r.baseline) > 1 and r.baseline != r.ceiling]

    out_models: dict[str, ModelCeiling] = {}
    for model in models:
        benches = model_benchmarks[model]
        stats: dict[str, MethodStat] = {}
        tokens: dict[str, float | None] = {}
        for method in methods:
            if method not in have[model]:
                continue
            values = [table[model, b, method].accuracy for b in benches]
            counts = [table[model, b, method].n for b in benches]
            stats[method] = MethodStat(
                macro_avg=statistics.fmean(values),
                sd=sample_sd(values),
                benchmarks=len(values),
                n=None if None in counts else sum(c for c in counts if c is not None),
            )
            extra = [
                t - tb
                for b in benches
                if (t := table[model, b, method].prompt_tokens) is not None
                and (tb := table[model, b, baseline].prompt_tokens) is not None
            ]
            tokens[method] = _mean(extra)
        best = first_best({x: stat.macro_avg for x, stat in stats.items()})
        base = stats[baseline]
        chosen = [h for h in headline_methods if h in stats]
        absent = [h for h in headline_methods if h not in stats]
        if absent:
            warnings.append(f"{model} has no {', '.join(absent)}: not in its headline gain")
        deltas = [stats[h].macro_avg - base.macro_avg for h in chosen]
        sd_deltas = [
            s - base.sd for h in chosen if (s := stats[h].sd) is not None and base.sd is not None
        ]
        averages = [s.macro_avg for s in stats.values()]
        ranks_b = [rankings[b].baseline[model] for b in benches]
        ranks_c = [rankings[b].ceiling[model] for b in benches]
        ceiling_sd = stats[best].sd
        out_models[model] = ModelCeiling(
            methods=stats,
            ceiling_method=best,
            ceiling=stats[best].macro_avg,
            delta=stats[best].macro_avg - base.macro_avg,
            mean_rank_baseline=statistics.fmean(ranks_b),
            mean_rank_ceiling=statistics.fmean(ranks_c),
            rank_sd_baseline=sample_sd(ranks_b),
            rank_sd_ceiling=sample_sd(ranks_c),
            baseline=base.macro_avg,
            baseline_sd=base.sd,
            ceiling_sd=ceiling_sd,
            headline_delta=_mean(deltas),
            headline_sd_delta=_mean(sd_deltas),
            headline_methods=chosen,
            spread=Spread(
                min=min(averages),
                median=statistics.median(averages),
                max=max(averages),
                methods=len(averages),
            ),
            benchmarks=benches,
            missing_benchmarks=[b for b in all_benchmarks if b not in benches],
            extra_prompt_tokens=tokens,
        )

    headline = [d for m in out_models.values() if (d := m.headline_delta) is not None]
    headline_sd = [d for m in out_models.values() if (d := m.headline_sd_delta) is not None]
    per_method = {x: [m.methods[x].macro_avg for m in out_models.values() if x in m.methods]
                  for x in methods}  # fmt: skip
    method_means = {x: statistics.fmean(v) for x, v in per_method.items() if v}
    extra_tokens = {
        x: _mean(
            [t for m in out_models.values() if (t := m.extra_prompt_tokens.get(x)) is not None]
        )
        for x in methods
    }
    benchmark_gains: dict[str, float | None] = {}
    benchmark_gains_n: dict[str, int] = {}
    for b in all_benchmarks:
        per_model = []
        for model in models:
            gains = [
                table[model, b, h].accuracy - table[model, b, baseline].accuracy
                for h in out_models[model].headline_methods
                if (model, b, h) in table
            ]
            if gains:
                per_model.append(statistics.fmean(gains))
        benchmark_gains[b] = _mean(per_model)
        benchmark_gains_n[b] = len(per_model)
    errors = sum(r.errors for r in results)
    if errors:
        warnings.append(f"{errors} sample(s) ended in an error: excluded, not counted as wrong")
    return CeilingReport(
        baseline=baseline,
        headline_methods=list(headline_methods),
        methods=methods,
        benchmarks=all_benchmarks,
        models=out_models,
        headline_delta=_mean(headline),
        headline_sd_delta=_mean(headline_sd),
        headline_n=len(headline),
        headline_sd_n=len(headline_sd),
        method_means=method_means,
        method_means_n={x: len(v) for x, v in per_method.items() if v},
        extra_prompt_tokens=extra_tokens,
        benchmark_gains=benchmark_gains,
        benchmark_gains_n=benchmark_gains_n,
        rank_flips=rank_flips,
        rankings=rankings,
        results=[_row(r) for r in results],
        hpi=hpi_view(ladders),
        hpt_view=[_hpi_row(r) for r in ladders],
        errors_excluded=errors,
        warnings=warnings,
    )


def hpi_view(ladders: Iterable[LadderResult]) -> dict[str, dict[str, float | None]]:
    view: dict[str, dict[str, float | None]] = {}
    for r in ladders:
        view.setdefault(r.model, {})[r.benchmark] = r.hpi
    return view


def _row(r: MethodResult) -> ResultRow:
    return ResultRow(
        model=r.model,
        benchmark=r.benchmark,
        method=r.method,
        accuracy=r.accuracy,
        ci_low=r.ci[0] if r.ci else None,
        ci_high=r.ci[1] if r.ci else None,
        ci_missing=None if r.ci else (r.ci_missing or NO_SAMPLES),
        n=r.n,
        errors=r.errors,
        prompt_tokens=r.prompt_tokens,
        source=r.source,
    )


def _hpi_row(r: LadderResult) -> HpiRow:
    return HpiRow(
        model=r.model,
        benchmark=r.benchmark,
        hpi=r.hpi,
        hpi_ci_low=r.hpi_ci[0] if r.hpi_ci else None,
        hpi_ci_high=r.hpi_ci[1] if r.hpi_ci else None,
        hpi_ci_missing=None if r.hpi_ci else r.hpi_ci_missing,
        chance_hpi=r.chance_hpi,
        accuracy=r.accuracy,
        n=r.n,
        errors=r.errors,
        strategies=list(r.strategies),
        source=r.source,
    )
