"""What a run directory says of its run besides the records: ``summary.json`` (one summary per
cell) and, in ``run.json``, what is needed to repeat the run beside its spec (never keys)."""

from __future__ import annotations

import platform
from typing import Any

from pydantic import BaseModel, Field

from hpt import __version__
from hpt.results.costs import ModelPrice
from hpt.results.info import TaskInfo
from hpt.results.tally import Summary
from hpt.types import GenerationParams, unset


class RunSummary(BaseModel):
    """``summary.json``: one summary per cell; ``complete`` once every sample is recorded."""

    complete: bool
    cells: list[Summary]


class ReasoningParams(BaseModel):
    """A dataset's cells of one reasoning setting (--reasoning-effort, --thinking-budget):
    their calls ask for ``DatasetParams.asked`` with it."""

    reasoning_effort: str | None = Field(None, exclude_if=unset)
    thinking_budget: int | None = Field(None, exclude_if=unset)
    # By evaluated model, as ``DatasetParams.sent``: what its provider puts on the wire for
    # the cells' settings (the effort or budget in its own form, what it drops beside them).
    sent: dict[str, dict[str, Any] | None] = Field(default_factory=dict)


class DatasetParams(BaseModel):
    """One dataset's generation parameters, as ``run.json`` gives them."""

    # What its ladder's calls ask for: the run's settings over the dataset's own defaults
    # (DepthQA's are the paper's), without the cells' reasoning settings (``reasoning``).
    # Strategies and helper roles change some per call (logprobs for generated knowledge,
    # temperature 0 for judges and the extractor): see each call.
    asked: GenerationParams
    # By evaluated model: what its provider puts on the wire for ``asked`` (names as sent;
    # one the provider does not take is absent), as each call's ``params`` records it.
    # None: the model's transport does not say.
    sent: dict[str, dict[str, Any] | None] = Field(default_factory=dict)
    # A run with reasoning efforts or thinking budgets: what is sent for each setting's
    # cells (one entry per effort x budget); None (absent): the run set none.
    reasoning: list[ReasoningParams] | None = Field(None, exclude_if=unset)


class MergedShard(BaseModel):
    """A shard directory ``hpt merge`` joined into a run, with what its process said of
    itself (run.json's own fields): the merged run's records of that shard come from it."""

    index: int
    count: int
    directory: str  # as given to hpt merge
    complete: bool  # whether it held its whole slice when merged
    hpt_version: str
    python: str
    platform: str
    started_at: str
    resumed_at: list[str]
    command: list[str]


class RunMeta(BaseModel):
    """What ``run.json`` holds beside the run's spec: what is needed to repeat the run."""

    hpt_version: str = __version__
    python: str = platform.python_version()
    platform: str = platform.platform()
    started_at: str = ""
    resumed_at: list[str] = Field(default_factory=list)
    command: list[str] = Field(default_factory=list)
    # Each dataset as reports see it, so a run directory is reported without the task code.
    tasks: dict[str, TaskInfo] = Field(default_factory=dict)
    # Each dataset's generation parameters, asked and sent.
    generation: dict[str, DatasetParams] = Field(default_factory=dict)
    # The prices the run used, by backend label, each with its source (a budget, or prices
    # known); absent when it priced nothing. Reports cost the run's calls at these.
    prices: dict[str, ModelPrice] = Field(default_factory=dict, exclude_if=lambda p: not p)
    # A run ``hpt merge`` made of shards (``hpt run --shard I/N``): each shard's directory and
    # process, by index; absent in a run made by one process.
    merged_from: list[MergedShard] = Field(default_factory=list, exclude_if=lambda m: not m)
