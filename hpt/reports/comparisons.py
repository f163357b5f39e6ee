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

import dataclasses
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from hpt.reports import ReportError
from hpt.reports.cells import CellScores, mean
from hpt.reports.efforts import setting, setting_order
from hpt.reports.paired import (
    detectable_difference,
    holm,
    mcnemar_exact,
    paired_bootstrap_ci,
    permutation_p,
    samples_needed,
    sd,
)
from hpt.results.records import Cell
from hpt.types import unset

COMPARISONS_JSON = "comparisons.json"
COMPARISONS_MD = "comparisons.md"


class Comparison(BaseModel):
    dataset: str
    mode: str
    threshold: float | None = None
    variant: str | None = None
    # Reasoning models: both cells' effort and thinking budget (a pair differs only by model).
    reasoning_effort: str | None = Field(None, exclude_if=unset)
    thinking_budget: int | None = Field(None, exclude_if=unset)
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

    @property
    def cell(self) -> Cell:
        """Model A's cell; B's is the same but for the model."""
        return Cell(self.dataset, self.model_a, self.mode, self.threshold, self.variant,
                    self.reasoning_effort, self.thinking_budget)  # fmt: skip


def _order(cell: Cell) -> tuple[object, ...]:
    threshold = -1.0 if cell.threshold is None else cell.threshold
    return (cell.dataset, cell.mode, threshold, cell.variant or "",
            setting_order(setting(cell)), cell.model)  # fmt: skip


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
        hpi_a.append(mean([score for score, _ in mine]))
        hpi_b.append(mean([score for score, _ in theirs]))
        acc_a.append(mean([float(resolved) for _, resolved in mine]))
        acc_b.append(mean([float(resolved) for _, resolved in theirs]))
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
    baseline), on each dataset x mode (x threshold x variant x reasoning effort and budget)
    that more than one model ran; Holm's adjustment over the whole list. Records arrive in the
    order samples finished, so the list is sorted (datasets, then efforts, then models by
    name): the same runs give the same file.
    Models that climbed different ladders are refused: their HPIs are on different scales."""
    # What the models compared share: the cell but for its model.
    groups: dict[Cell, dict[str, Cell]] = {}
    for cell in sorted(scores, key=_order):
        groups.setdefault(dataclasses.replace(cell, model=""), {})[cell.model] = cell
    models = sorted({cell.model for cell in scores})
    if baseline is not None and baseline not in models:
        raise ReportError(
            f"--baseline {baseline} is not a model of these runs; they hold: {', '.join(models)}"
        )
    out: list[Comparison] = []
    unshared: list[str] = []
    for group, cells in groups.items():
        if baseline is None:
            pairs = list(itertools.combinations(cells, 2))
        else:
            pairs = [(m, baseline) for m in cells if m != baseline and baseline in cells]
        for model_a, model_b in pairs:
            a, b = scores[cells[model_a]], scores[cells[model_b]]
            if (a.strategies, a.penalty) != (b.strategies, b.penalty):
                raise ReportError(
                    f"{model_a} and {model_b} climbed different ladders on {group.dataset} "
                    f"({','.join(a.strategies)}, penalty {a.penalty:g} against "
                    f"{','.join(b.strategies)}, penalty {b.penalty:g}): their HPIs are on "
                    "different scales; compare runs made with the same --strategies"
                )
            stats = compare_cells(a, b, detect)
            if stats["n"] == 0:
                unshared.append(f"{model_a} and {model_b} share no scored sample on {group.label}")
                continue
            out.append(
                Comparison(
                    dataset=group.dataset,
                    mode=group.mode,
                    threshold=group.threshold,
                    variant=group.variant,
                    reasoning_effort=group.reasoning_effort,
                    thinking_budget=group.thinking_budget,
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


def write_json(comparisons: Sequence[Comparison], path: Path) -> None:
    path.write_text(
        json.dumps([c.model_dump() for c in comparisons], indent=2) + "\n", encoding="utf-8"
    )
