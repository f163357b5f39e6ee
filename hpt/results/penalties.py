"""HPI_dataset, the score of an unresolved sample beyond the ladder's m levels, and where each
dataset's value comes from.

The HPT paper (appendix A.1, table 4) has annotators score a 5% representative set of a
dataset 1-5 on four criteria; a sample's complexity is the mean of its four scores, and the
dataset's penalty the mean over the set. Here only annotations of the set's samples count, a
sample's score is the mean over the
annotators who scored it of their four-criterion mean, and HPI_dataset the mean over the
samples (equal to the mean of every score given when each annotator scored every sample);
its spread is the samples' standard deviation and a 95% bootstrap interval of the mean, and
the annotators' agreement Krippendorff's alpha (ordinal, and interval beside it) over the
units (sample, criterion). Pure functions over saved annotations: nothing here reads a file.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterable, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

# The four criteria of HPT appendix A.1, in the paper's order; their names and definitions
# are in hpt/prompts/templates/annotate.toml.
CRITERIA = ("reproduction", "interpretation", "reasoning", "application")
AnnotatorKind = Literal["human", "model"]
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


class Scores(BaseModel):
    """One annotator's four scores for one sample, 1 (lowest complexity) to 5."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reproduction: int = Field(ge=1, le=5)
    interpretation: int = Field(ge=1, le=5)
    reasoning: int = Field(ge=1, le=5)
    application: int = Field(ge=1, le=5)

    def values(self) -> tuple[int, ...]:
        return tuple(getattr(self, c) for c in CRITERIA)

    def mean(self) -> float:
        return statistics.fmean(self.values())


class Annotation(BaseModel):
    """One line of an annotations file: who scored which sample, and how."""

    model_config = ConfigDict(extra="forbid")

    dataset: str
    sample_id: str
    annotator: str
    kind: AnnotatorKind = "human"
    scores: Scores
    at: str = ""


# -- where a penalty comes from -----------------------------------------------------------
SourceKind = Literal["paper", "human", "model", "set", "unannotated"]


class PenaltySource(BaseModel):
    """``kind``: "paper" (HPT's table 4, human annotators), "human" or "model" (annotations
    made with ``hpt annotate``), "set" (by hand: ``--penalty``), "unannotated" (a stand-in
    nobody measured: borrowed from another dataset, or a convention). ``label`` says it in
    words, as run.json and a run's notice show it; ``note``, when set, why annotations found
    for the dataset were not used (the run's notice says it too)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: SourceKind
    label: str
    note: str | None = None

    @property
    def by_humans(self) -> bool:
        """Measured as the paper measures it: by human annotators."""
        return self.kind in ("paper", "human")


TABLE_4 = PenaltySource(kind="paper", label="HPT paper, table 4 (human annotators)")
UNSTATED = PenaltySource(
    kind="unannotated", label="declared by the dataset's code, source not stated (no annotation)"
)
SET_IN_SPEC = PenaltySource(kind="set", label="set in the run's settings")


def borrowed(dataset: str) -> PenaltySource:
    """The penalty of ``dataset`` (a table-4 dataset), standing in for one never measured."""
    return PenaltySource(kind="unannotated", label=f"borrowed from {dataset} (no annotation)")


def convention(why: str) -> PenaltySource:
    return PenaltySource(kind="unannotated", label=f"{why} (no annotation)")


class Penalty(BaseModel):
    """A dataset's HPI_dataset as a run uses it. A bare number (a config file's
    ``penalties = {boolq = 2.0}``, the Python API) is a value set by hand."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Finite: an infinite penalty would make every HPI of a ladder that misses infinite.
    value: float = Field(ge=0, allow_inf_nan=False)
    source: PenaltySource

    @model_validator(mode="before")
    @classmethod
    def _bare_number(cls, data: Any) -> Any:
        if isinstance(data, int | float) and not isinstance(data, bool):
            return {"value": data, "source": SET_IN_SPEC}
        return data


# -- HPI_dataset from annotations -----------------------------------------------------------
class AnnotatedPenalty(BaseModel):
    """HPI_dataset measured from one kind of annotator's scores of a representative set's
    samples, with its spread and the annotators' agreement."""

    dataset: str
    kind: AnnotatorKind
    value: float
    # Samples of the set scored, of ``set_size`` (its samples).
    samples: int
    set_size: int
    annotators: list[str]
    annotations: int
    # The samples' scores' standard deviation (n - 1), and a 95% percentile bootstrap
    # interval of their mean (resampling samples); None with a single sample.
    sd: float | None
    ci95: tuple[float, float] | None
    # Mean score per criterion over the samples (each sample's annotators averaged first).
    criteria: dict[str, float]
    # Krippendorff's alpha over the units (sample, criterion) two or more annotators scored;
    # None when no unit has two scores or every score is the same.
    alpha_ordinal: float | None
    alpha_interval: float | None
    # Units (sample, criterion) with two or more scores: what alpha is computed over.
    paired_units: int

    @property
    def complete(self) -> bool:
        return self.samples == self.set_size

    def coverage(self, where: str) -> str:
        """What share of the set this kind scored, for a note or a summary."""
        return (f"{self.kind} annotations in {where} score {self.samples} of {self.set_size} "
                f"samples of the representative set")  # fmt: skip

    def source(self, where: str) -> PenaltySource:
        plural = "s" if self.samples != 1 else ""
        if self.kind == "human":
            people = len(self.annotators)
            label = (f"annotated: {people} human{'s' if people != 1 else ''} over "
                     f"{self.samples} sample{plural} ({where})")  # fmt: skip
        else:
            models = ", ".join(a.removeprefix("model:") for a in self.annotators)
            label = f"model annotator: {models} over {self.samples} sample{plural} ({where})"
        return PenaltySource(kind=self.kind, label=label)

    def penalty(self, where: str) -> Penalty:
        return Penalty(value=self.value, source=self.source(where))


def latest(annotations: Iterable[Annotation]) -> list[Annotation]:
    """One annotation per (annotator, sample): a later line replaces an earlier one."""
    kept: dict[tuple[str, str], Annotation] = {}
    for a in annotations:
        kept.pop((a.annotator, a.sample_id), None)  # re-inserted: keeps file order
        kept[(a.annotator, a.sample_id)] = a
    return list(kept.values())


def annotated_penalties(
    annotations: Iterable[Annotation], dataset: str, within: Collection[str]
) -> list[AnnotatedPenalty]:
    """HPI_dataset of ``dataset`` over the samples of ``within`` (its representative set's
    ids): human annotators' first, then a model annotator's, each only where it scored one
    of them."""
    given = list(annotations)
    kinds: tuple[AnnotatorKind, ...] = ("human", "model")
    found = (annotated_penalty(given, dataset, kind, within) for kind in kinds)
    return [f for f in found if f is not None]


def annotated_penalty(
    annotations: Iterable[Annotation], dataset: str, kind: AnnotatorKind, within: Collection[str]
) -> AnnotatedPenalty | None:
    """HPI_dataset from ``kind``'s annotations of the samples of ``within`` (``dataset``'s
    representative set); None when they scored none of them."""
    members = set(within)
    mine = latest(
        a for a in annotations if a.dataset == dataset and a.kind == kind and a.sample_id in members
    )
    if not mine:
        return None
    by_sample: dict[str, list[Annotation]] = {}
    for a in mine:
        by_sample.setdefault(a.sample_id, []).append(a)
    per_sample = [statistics.fmean(a.scores.mean() for a in group) for group in by_sample.values()]
    per_criterion = {
        c: statistics.fmean(
            statistics.fmean(getattr(a.scores, c) for a in group) for group in by_sample.values()
        )
        for c in CRITERIA
    }
    units = [[float(getattr(a.scores, c)) for a in g] for g in by_sample.values() for c in CRITERIA]
    return AnnotatedPenalty(
        dataset=dataset,
        kind=kind,
        value=statistics.fmean(per_sample),
        samples=len(per_sample),
        set_size=len(members),
        annotators=sorted({a.annotator for a in mine}),
        annotations=len(mine),
        sd=statistics.stdev(per_sample) if len(per_sample) > 1 else None,
        ci95=bootstrap_ci95(per_sample),
        criteria=per_criterion,
        alpha_ordinal=krippendorff_alpha(units, "ordinal"),
        alpha_interval=krippendorff_alpha(units, "interval"),
        paired_units=sum(len(u) > 1 for u in units),
    )


def scored_outside(annotations: Iterable[Annotation], dataset: str, within: Collection[str]) -> int:
    """How many samples of ``dataset`` were scored that are not in the set ``within`` (drawn
    with another --seed or --fraction): counted in no penalty."""
    members = set(within)
    return len({a.sample_id for a in annotations if a.dataset == dataset} - members)


def bootstrap_ci95(values: Sequence[float]) -> tuple[float, float] | None:
    """95% percentile bootstrap interval of the mean (seeded: the same every time)."""
    if len(values) < 2:
        return None
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = data[rng.integers(0, len(data), size=(BOOTSTRAP_RESAMPLES, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    mean = float(data.mean())
    return min(float(low), mean), max(float(high), mean)


def krippendorff_alpha(
    units: Sequence[Sequence[float]], metric: Literal["ordinal", "interval"]
) -> float | None:
    """Krippendorff's alpha (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability")
    for units each holding the values its coders gave (any number, missing ones left out).

    Through the coincidence matrix: every ordered pair of values from two coders of a unit
    with m_u values counts 1 / (m_u - 1); alpha = 1 - (n - 1) * sum(o_ck d_ck) /
    sum(n_c n_k d_ck), where n_c are the matrix's marginals, n their total and d the squared
    distance: (c - k)^2 for interval, and for ordinal (sum of n_g for g from c to k, minus
    (n_c + n_k) / 2)^2. None when no unit has two values or every value is the same."""
    pairable = [list(u) for u in units if len(u) > 1]
    values = sorted({v for u in pairable for v in u})
    if len(values) < 2:
        return None
    index = {v: i for i, v in enumerate(values)}
    o = np.zeros((len(values), len(values)))
    for unit in pairable:
        share = 1.0 / (len(unit) - 1)
        for i, a in enumerate(unit):
            for j, b in enumerate(unit):
                if i != j:
                    o[index[a], index[b]] += share
    n_c = o.sum(axis=1)
    n = float(n_c.sum())
    v = np.asarray(values)
    if metric == "interval":
        d = (v[:, None] - v[None, :]) ** 2
    else:
        cumulative = np.concatenate(([0.0], np.cumsum(n_c)))
        low = np.minimum.outer(np.arange(len(v)), np.arange(len(v)))
        high = np.maximum.outer(np.arange(len(v)), np.arange(len(v)))
        between = cumulative[high + 1] - cumulative[low]
        d = (between - (n_c[:, None] + n_c[None, :]) / 2) ** 2
    expected = float((np.outer(n_c, n_c) * d).sum())
    if expected == 0.0:
        return None
    return 1.0 - (n - 1) * float((o * d).sum()) / expected
