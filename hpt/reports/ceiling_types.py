"""What goes into the ceiling arithmetic (hpt.reports.ceiling) and what comes out of it:
one model's result per benchmark and method (or an HPT ladder cell's), and the report that
``ceiling.json`` saves."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from hpt.reports.ceiling_intervals import INTERVALS

TIE_RULE = "tied accuracies share the average of the ranks they span (1 = best)"


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
