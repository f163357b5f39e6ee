"""The performance ceiling (Aali et al., "Structured Prompting Enables More Robust, Holistic
Evaluation of Language Models", sections 2-3, tables 3-5): a model's best macro-averaged
accuracy over prompting methods, its gain over a fixed baseline prompt, and how model
rankings move when each model is scored at its best instead of at the baseline.

Pure arithmetic over a list of results (``hpt.reports.ceiling_types``); reading runs or CSV
files and rendering live elsewhere (``hpt.reports.ceiling_inputs``, ``ceiling_markdown``,
``ceiling_plots``). Accuracies are percentages.

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

import statistics
from collections.abc import Iterable, Sequence

from hpt.reports import ReportError
from hpt.reports.ceiling_intervals import NO_SAMPLES
from hpt.reports.ceiling_types import (
    BenchmarkRanking,
    CeilingReport,
    HpiRow,
    LadderResult,
    MethodResult,
    MethodStat,
    ModelCeiling,
    ResultRow,
    Spread,
)

DEFAULT_BASELINE = "helm_baseline"
DEFAULT_HEADLINE = ("dspy_cot", "dspy_bfrs", "dspy_mipro")
# Accuracies closer than this are a tie when ranking (percentage points).
TIE_TOLERANCE = 1e-9


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
