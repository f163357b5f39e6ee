"""Paired comparisons of models that answered the same samples: for every pair of models (or
every model against a baseline) on each dataset x mode, over the samples both scored, the
HPI difference with a paired bootstrap interval and a permutation p-value, the accuracy
difference with McNemar's exact test, Holm-adjusted p-values across the comparisons, and the
power arithmetic that sizes the next run.

The unit is the sample. With repeated draws (--samples-per-task) a sample contributes the
mean of each model's scored draws (draws are independent climbs: draw d of one model has
nothing to do with draw d of the other); McNemar's test needs one draw per sample and is
then left out."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from hpt.reports import ReportError
from hpt.reports.markdown import number, pipe_table
from hpt.reports.paired import (
    ALPHA,
    EXACT_UP_TO,
    PERMUTATIONS,
    POWER,
    RESAMPLES,
    SEED,
    detectable_difference,
    holm,
    mcnemar_exact,
    paired_bootstrap_ci,
    permutation_p,
    samples_needed,
    sd,
)
from hpt.results.records import Cell


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
        return [_mean([s for s, _ in d.values()]) for _, d in sorted(self.samples.items())]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


COMPARISONS_JSON = "comparisons.json"
COMPARISONS_MD = "comparisons.md"


class Comparison(BaseModel):
    dataset: str
    mode: str
    threshold: float | None = None
    variant: str | None = None
    model_a: str
    model_b: str
    # Samples both models scored (errors and samples only one ran are left out).
    n: int
    # Each model's HPI and accuracy over those shared samples.
    hpi_a: float | None = None
    hpi_b: float | None = None
    hpi_diff: float | None = None  # a - b: negative means a climbs less, i.e. is better
    hpi_diff_low: float | None = None
    hpi_diff_high: float | None = None
    hpi_p: float | None = None  # paired permutation test of hpi_diff = 0
    accuracy_a: float | None = None
    accuracy_b: float | None = None
    accuracy_diff: float | None = None
    # Shared samples only a resolved, only b resolved (McNemar's discordant pairs).
    only_a_resolved: int | None = None
    only_b_resolved: int | None = None
    mcnemar_p: float | None = None
    # Holm-adjusted across every comparison written together: hpi_p's, then mcnemar_p's.
    p_holm: float | None = None
    mcnemar_p_holm: float | None = None
    # The standard deviation of the per-sample HPI differences, the smallest difference
    # this many samples detect at 80% power (two-sided, alpha 0.05), and, for a difference
    # the user named (--detect), the samples that would take.
    hpi_diff_sd: float | None = None
    hpi_mde: float | None = None
    detect: float | None = None
    n_to_detect: int | None = None
    draws: int = 1  # the most draws a shared sample contributed


def _key(cell: Cell) -> tuple[str, str, float | None, str | None]:
    return cell.dataset, cell.mode, cell.threshold, cell.variant


def _order(cell: Cell) -> tuple[str, str, float, str, str]:
    threshold = -1.0 if cell.threshold is None else cell.threshold
    return cell.dataset, cell.mode, threshold, cell.variant or "", cell.model


def compare_cells(
    a: CellScores, b: CellScores, detect: float | None = None
) -> dict[str, float | int | None]:
    """The statistics of one pair of cells over the samples both scored."""
    hpi_a: list[float] = []
    hpi_b: list[float] = []
    acc_a: list[float] = []
    acc_b: list[float] = []
    draws = 1
    # Sorted: a set's order varies between processes, and the seeded draws follow the order.
    for sample_id in sorted(a.samples.keys() & b.samples.keys()):
        mine, theirs = a.samples[sample_id].values(), b.samples[sample_id].values()
        draws = max(draws, len(mine), len(theirs))
        hpi_a.append(_mean([score for score, _ in mine]))
        hpi_b.append(_mean([score for score, _ in theirs]))
        acc_a.append(_mean([float(resolved) for _, resolved in mine]))
        acc_b.append(_mean([float(resolved) for _, resolved in theirs]))
    n = len(hpi_a)
    if n == 0:
        return {"n": 0}
    diffs = [x - y for x, y in zip(hpi_a, hpi_b, strict=True)]
    low_high = paired_bootstrap_ci(diffs)
    spread = sd(diffs)
    stats: dict[str, float | int | None] = {
        "n": n,
        "draws": draws,
        "hpi_a": sum(hpi_a) / n,
        "hpi_b": sum(hpi_b) / n,
        "hpi_diff": sum(diffs) / n,
        "hpi_diff_low": low_high[0] if low_high else None,
        "hpi_diff_high": low_high[1] if low_high else None,
        "hpi_p": permutation_p(diffs),
        "accuracy_a": sum(acc_a) / n,
        "accuracy_b": sum(acc_b) / n,
        "accuracy_diff": (sum(acc_a) - sum(acc_b)) / n,
        "hpi_diff_sd": spread,
        "hpi_mde": detectable_difference(spread, n) if spread is not None else None,
        "detect": detect,
        "n_to_detect": samples_needed(spread, detect) if spread and detect else None,
    }
    if draws == 1:
        only_a = sum(x > y for x, y in zip(acc_a, acc_b, strict=True))
        only_b = sum(y > x for x, y in zip(acc_a, acc_b, strict=True))
        stats |= {
            "only_a_resolved": only_a,
            "only_b_resolved": only_b,
            "mcnemar_p": mcnemar_exact(only_a, only_b),
        }
    return stats


@dataclass
class Compared:
    comparisons: list[Comparison]
    # Pairs left out because the two models share no scored sample there.
    unshared: list[str]


def compare(
    scores: Mapping[Cell, CellScores],
    *,
    baseline: str | None = None,
    detect: float | None = None,
) -> Compared:
    """Every pair of models, or every model against ``baseline`` (then model_b is the
    baseline), on each dataset x mode (x threshold x variant) that more than one model ran;
    Holm's adjustment over the whole list. Records arrive in the order samples finished, so
    the list is sorted (datasets, then models by name): the same runs give the same file.
    Models that climbed different ladders are refused: their HPIs are on different scales."""
    groups: dict[tuple[str, str, float | None, str | None], dict[str, Cell]] = {}
    for cell in sorted(scores, key=_order):
        groups.setdefault(_key(cell), {})[cell.model] = cell
    models = sorted({cell.model for cell in scores})
    if baseline is not None and baseline not in models:
        raise ReportError(
            f"--baseline {baseline} is not a model of these runs; they hold: {', '.join(models)}"
        )
    out: list[Comparison] = []
    unshared: list[str] = []
    for (dataset, mode, threshold, variant), cells in groups.items():
        if baseline is None:
            pairs = list(itertools.combinations(cells, 2))
        else:
            pairs = [(m, baseline) for m in cells if m != baseline and baseline in cells]
        for model_a, model_b in pairs:
            a, b = scores[cells[model_a]], scores[cells[model_b]]
            if (a.strategies, a.penalty) != (b.strategies, b.penalty):
                raise ReportError(
                    f"{model_a} and {model_b} climbed different ladders on {dataset} "
                    f"({','.join(a.strategies)}, penalty {a.penalty:g} against "
                    f"{','.join(b.strategies)}, penalty {b.penalty:g}): their HPIs are on "
                    "different scales; compare runs made with the same --strategies"
                )
            stats = compare_cells(a, b, detect)
            if stats["n"] == 0:
                where = cell_label(dataset, threshold, variant)
                unshared.append(f"{model_a} and {model_b} share no scored sample on {where}")
                continue
            out.append(
                Comparison(
                    dataset=dataset,
                    mode=mode,
                    threshold=threshold,
                    variant=variant,
                    model_a=model_a,
                    model_b=model_b,
                    **stats,
                )
            )
    for c, p in zip(out, holm([c.hpi_p for c in out]), strict=True):
        c.p_holm = p
    for c, p in zip(out, holm([c.mcnemar_p for c in out]), strict=True):
        c.mcnemar_p_holm = p
    return Compared(out, unshared)


def independent_mde(score_sd: float, n: int) -> float | None:
    """Sizing from a single model's run: the smallest HPI difference a paired comparison on
    n samples would detect if the other model's per-sample scores spread like these
    (standard deviation ``score_sd``) and were uncorrelated with them: the differences'
    variance is then twice the scores'. Models that find the same samples hard do better;
    a paired run shows by how much."""
    return detectable_difference(math.sqrt(2) * score_sd, n)


def independent_samples_needed(score_sd: float, delta: float) -> int | None:
    return samples_needed(math.sqrt(2) * score_sd, delta)


# ---------------------------------------------------------------- writing


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def cell_label(dataset: str, threshold: float | None, variant: str | None) -> str:
    """A dataset as report rows show it: with its threshold and variant, where it has them."""
    at = f" @{threshold:g}" if threshold is not None else ""
    return dataset + at + (f" · {variant}" if variant is not None else "")


def where(c: Comparison) -> str:
    return cell_label(c.dataset, c.threshold, c.variant)


def markdown_table(comparisons: Sequence[Comparison]) -> str:
    detect = next((c.detect for c in comparisons if c.detect is not None), None)
    header = ["dataset", "mode", "A", "B", "n", "HPI A", "HPI B", "HPI A − B [95% CI]",
              "p", "p Holm", "accuracy A − B", "McNemar p", "McNemar p Holm",
              "smallest detectable"]  # fmt: skip
    if detect is not None:
        header.append(f"n to detect {detect:g}")
    rows = []
    for c in comparisons:
        interval = (
            f" [{c.hpi_diff_low:+.3f}, {c.hpi_diff_high:+.3f}]"
            if c.hpi_diff_low is not None and c.hpi_diff_high is not None
            else ""
        )
        diff = "-" if c.hpi_diff is None else f"{c.hpi_diff:+.3f}{interval}"
        acc = "-" if c.accuracy_diff is None else f"{100 * c.accuracy_diff:+.1f} pts"
        row = [where(c), c.mode, c.model_a, c.model_b, str(c.n), number(c.hpi_a, 3),
               number(c.hpi_b, 3), diff, _p(c.hpi_p), _p(c.p_holm), acc, _p(c.mcnemar_p),
               _p(c.mcnemar_p_holm), number(c.hpi_mde, 3)]  # fmt: skip
        if detect is not None:
            row.append("-" if c.n_to_detect is None else str(c.n_to_detect))
        rows.append(row)
    return pipe_table(header, rows)


def explanation() -> str:
    return (
        f"Paired over the samples both models scored. HPI A − B below 0: A resolved its "
        f"samples at lower levels. Brackets: 95% paired percentile bootstrap ({RESAMPLES} "
        f"resamples, seed {SEED}); p: two-sided paired permutation test (sign flips; exact up "
        f"to {EXACT_UP_TO} differing samples, else {PERMUTATIONS:,} seeded draws); McNemar: "
        f"exact, on the samples "
        f"only one model resolved; Holm: adjusted over every comparison in this table. "
        f"Smallest detectable: the HPI difference these samples find with {POWER:.0%} power "
        f"at α = {ALPHA:g} (paired, normal approximation)."
    )


def write_json(comparisons: Sequence[Comparison], path: Path) -> None:
    path.write_text(
        json.dumps([c.model_dump() for c in comparisons], indent=2) + "\n", encoding="utf-8"
    )
