"""What a report needs to know of a dataset, saved in ``run.json`` so that reports, summaries
and the viewer work from a run directory alone: its kind, its metric names, its corpus
scoring rule, and the table it contributes to (declared by the task, not by report code)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# The values a column can show with a 95% bootstrap interval: the HPI, the share resolved,
# and HumanEval's pass@1 (hpf@1 with repeated draws). Any other value is a dotted path into
# the cell's summary ("text_score", "depth_scores.2", "forward_discrepancy.overall.value").
WITH_INTERVALS = ("hpi", "accuracy", "pass_at_1")


class Column(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # The header; "{metric}" stands for the dataset's corpus metric ("corpus BLEU").
    label: str
    value: str
    # Shown x100 (accuracy as a percentage).
    percent: bool = False
    # With its 95% bootstrap interval, where the value has one.
    interval: bool = True


class ReportTable(BaseModel):
    """A table of the report that datasets declare they belong to. Datasets with the same
    ``key`` share the table; the first declaration seen gives its title and columns."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    title: str
    # Tables appear in this order (the paper's table numbers for HPT's own).
    order: int = 100
    columns: tuple[Column, ...]
    # "wide": a row per model, a column group per dataset (and threshold); "cells": a row
    # per cell, with a dataset column when the table holds several datasets.
    layout: Literal["wide", "cells"] = "wide"
    # A column group per threshold, for datasets resolved by a score.
    per_threshold: bool = False


DEFAULT_TABLE = ReportTable(
    key="answers",
    title="Table 1 · HPI (lower is better) and accuracy",
    order=1,
    columns=(
        Column(label="HPI", value="hpi"),
        Column(label="accuracy %", value="accuracy", percent=True),
    ),
)


class TaskInfo(BaseModel):
    """A dataset as reports see it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    title: str = ""
    # "answer" (an exact answer), "code" (tests pass), "text" (a score over a threshold).
    kind: str = "answer"
    # The headline performance figure beside the HPI ("accuracy", "pass@1", "corpus BLEU").
    metric: str = "accuracy"
    # Each attempt's graded score, where resolution is by threshold ("sentence BLEU").
    score_metric: str | None = None
    # The dataset-level score over final outputs and the rule computing it
    # (hpt.results.scoring.CORPUS_RULES).
    corpus_metric: str | None = None
    corpus_rule: str | None = None
    # Where the dataset sits among the table's column groups (HPT's column order).
    rank: int = 100
    table: ReportTable = Field(default_factory=lambda: DEFAULT_TABLE)
    # Further tables the dataset joins (DepthQA: discrepancy intensity and frequency).
    extra_tables: tuple[ReportTable, ...] = ()
    # What the run's copy of the data needed said about it: a training slice carved out of
    # the evaluated split and excluded from evaluation (Task.split_notes).
    notes: tuple[str, ...] = ()

    @property
    def tables(self) -> tuple[ReportTable, ...]:
        return (self.table, *self.extra_tables)


def unknown_task(name: str) -> TaskInfo:
    """What a report assumes of a dataset its run directory does not describe (a run saved
    before run.json carried task descriptions, whose task is not installed here)."""
    return TaskInfo(name=name)
