"""A run's full description; saved as ``run.json`` so a run can be repeated or resumed.

A run is a campaign: every dataset x model x mode (x threshold, for the datasets resolved by
a score, x reasoning effort x thinking budget, where the run sets them) is one *cell*, and all
cells run in one pass that shares backends and the cache."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from hpt.backends import GenerationParams
from hpt.backends.secrets import (
    hidden_credentials,
    redact_url,
    redact_urls,
    remember_url_credentials,
    urls_with_credentials,
)
from hpt.errors import HptError
from hpt.graphs import DEFAULT_LADDER
from hpt.orchestrator.models import ModelSettings
from hpt.results.penalties import Penalty
from hpt.results.runfile import RunMeta
from hpt.tasks import task_class
from hpt.types import ReasoningEffort, unset, unset_flag

Mode = Literal["standard", "adaptive"]
# Settings that stand for a dataset's argument (dataset, field): RunSpec's fields before
# task_args, still read from config files' [run], hpt.evaluate(...) and the run.json of runs
# made before; the flags --depth-mode and --graph.
SHORTHANDS = {"depth_mode": ("depthqa", "mode"), "graph": ("depthqa", "graph")}
# Generation settings that are also run dimensions: one cell per value (RunSpec's fields of the
# same names); given in ``params`` (one value), they are moved onto the dimension.
REASONING_DIMENSIONS = ("reasoning_effort", "thinking_budget")


class ConfigError(HptError, ValueError):
    """A run described wrongly: the message says which setting and how to fix it."""


def _listed(value: Any) -> Any:
    """One value or several: ``dataset = "boolq"`` and ``dataset = ["boolq", "csqa"]``."""
    if isinstance(value, str | int | float):
        return [value]
    return value


def _unique(values: list[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def _none_given(values: list[Any]) -> bool:
    # A dimension the run does not set leaves no trace in run.json (runs without it unchanged).
    return not values


# Batch mode's pacing (hpt.backends.batching.BatchOptions' defaults): left out of run.json
# at these values, as every setting added since is where a run does not use it.
BATCH_SIZE, BATCH_WAIT_S, BATCH_POLL_S = 1000, 10.0, 30.0


class Shard(BaseModel):
    """One of ``count`` disjoint slices of every cell's samples (--shard INDEX/COUNT, INDEX
    from 1): together the shards of a campaign hold each sample once
    (``hpt.tasks.base.in_shard``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = Field(ge=1)
    count: int = Field(ge=1)

    @model_validator(mode="before")
    @classmethod
    def _text(cls, data: Any) -> Any:
        # "2/8" as the flag takes it: a config file's [run] shard, hpt.evaluate(shard=...).
        return cls.parse(data).model_dump() if isinstance(data, str) else data

    @model_validator(mode="after")
    def _within(self) -> Shard:
        if self.index > self.count:
            raise ValueError(f"shard {self.index}/{self.count}: the index counts 1 to {self.count}")
        return self

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``I/N`` as the flag gives it; a ConfigError says what is wrong."""
        index, slash, count = text.strip().partition("/")
        if not slash or not index.strip().isdigit() or not count.strip().isdigit():
            raise ConfigError(f"--shard {text!r}: give INDEX/COUNT, e.g. --shard 2/8")
        i, n = int(index), int(count)
        if n < 1:
            raise ConfigError(f"--shard {text}: the count of shards is at least 1")
        if not 1 <= i <= n:
            raise ConfigError(
                f"--shard {text}: shards count from 1 to COUNT (1/{n} .. {n}/{n}); an "
                "array index from 0 (a Kubernetes indexed job's) is INDEX+1"
            )
        return cls(index=i, count=n)


class RunSpec(ModelSettings):
    """The run's matrix and settings; the model options (base_url, models, limit and retry
    overrides) are ModelSettings', shared with every command that calls models."""

    model_config = ConfigDict(extra="forbid")

    # The matrix: each accepts one value or a list.
    dataset: Annotated[list[str], BeforeValidator(_listed), Field(min_length=1)]
    model: Annotated[list[str], BeforeValidator(_listed)] = Field(
        default_factory=lambda: ["local"], min_length=1
    )
    # "adaptive": a prompt-selector picks each level (HPT appendix E).
    mode: Annotated[list[Mode], BeforeValidator(_listed)] = Field(
        default_factory=lambda: list[Mode](["standard"]), min_length=1
    )
    # Translation/summarisation: the scores (0-1) that resolve a sample, one cell each, all
    # scoring the same completions (one evaluation read at each threshold); empty: both of
    # the paper's thresholds, 0.15 and 0.20 (tables 3 and 6), for IWSLT and SAMSum.
    threshold: Annotated[
        list[Annotated[float, Field(gt=0.0, le=1.0)]], BeforeValidator(_listed)
    ] = Field(default_factory=list)
    # Reasoning models: the efforts (--reasoning-effort) and thinking budgets in tokens
    # (--thinking-budget; 0: thinking off where the model can) to run, one cell each (every
    # effort x every budget); empty: not set, one cell at the provider's default. Each
    # provider maps them to its model's own form, or refuses them before any call.
    reasoning_effort: Annotated[list[ReasoningEffort], BeforeValidator(_listed)] = Field(
        default_factory=list, exclude_if=_none_given
    )
    thinking_budget: Annotated[list[Annotated[int, Field(ge=0)]], BeforeValidator(_listed)] = Field(
        default_factory=list, exclude_if=_none_given
    )
    knowledge_model: str | None = None  # None: each evaluated model itself
    selector_model: str | None = None  # adaptive mode's prompt-selector; None: the model itself
    # A model that reads each completion's final answer instead of the rule readers; the rule
    # readers' answers are kept beside it and summaries report how often the two disagree.
    extractor_model: str | None = None
    # Datasets' own arguments by dataset and field (--task-arg depthqa.mode=multi_turn),
    # validated against each dataset's argument model when the run starts.
    task_args: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Judged datasets (DepthQA): the model that judges answers 1-5 (None: each evaluated
    # model itself).
    judge_model: str | None = None
    # MIPROv2's instruction proposer (dspy_mipro); None: each evaluated model itself.
    prompt_model: str | None = None
    # Saved DSPy programs to run instead of optimising (--program STRATEGY[:DATASET]=FILE):
    # the key is a DSPy strategy, or STRATEGY:DATASET for one dataset only.
    programs: dict[str, Path] = Field(default_factory=dict)
    # Adaptive attempts reuse the standard ladder's cached completions (off: the two modes
    # are independent samples of the model).
    share_completions: bool = False
    strategies: list[str] = Field(default_factory=lambda: list(DEFAULT_LADDER))
    # Strategy parameters by strategy and field (--strategy-arg self_consistency.n=7),
    # validated against each strategy's parameter model when the run starts.
    strategy_args: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Modules imported before the run (they register strategies, tasks, providers); saved
    # so that a resumed run loads them again.
    plugins: list[str] = Field(default_factory=list)
    limit: int | None = Field(None, ge=1)
    seed: int = 0
    # Samples in flight per evaluated model (a sample's threshold cells climb together, as one);
    # each backend's own limits cap its calls.
    concurrency: int = Field(8, ge=1)
    # Generation settings: those set override each dataset's own defaults (DepthQA's), field
    # by field; run.json keeps only those (see SavedSpec).
    params: GenerationParams = Field(default_factory=GenerationParams)
    # Independent climbs per sample; pass@k (k <= n) is reported for level 1 and for HPF.
    samples_per_task: int = Field(1, ge=1)
    cache: bool = True
    # Part of every cache key: a new epoch asks the models afresh.
    epoch: int = Field(0, ge=0)
    data_dir: Path | None = None
    out: Path | None = None
    # HPI_dataset by dataset, each with where it came from: set by hand here (--penalty), the
    # rest filled in when the run starts (hpt.orchestrator.penalties) and saved, so a resumed run
    # keeps them. ``annotations``: a directory of ``hpt annotate`` files to measure them from.
    penalties: dict[str, Penalty] = Field(default_factory=dict)
    annotations: Path | None = None
    # Batch mode (--batch): calls gather into provider batches, sent when ``batch_size`` wait
    # or ``batch_wait_s`` passed without a new one, their status asked every ``batch_poll_s``.
    batch: bool = Field(False, exclude_if=unset_flag)
    batch_size: int = Field(BATCH_SIZE, ge=1, exclude_if=lambda v: v == BATCH_SIZE)
    batch_wait_s: float = Field(BATCH_WAIT_S, gt=0, exclude_if=lambda v: v == BATCH_WAIT_S)
    batch_poll_s: float = Field(BATCH_POLL_S, gt=0, exclude_if=lambda v: v == BATCH_POLL_S)
    # What the run may spend (--budget-usd) and send (--max-calls); None: no bound.
    budget_usd: float | None = Field(None, gt=0, exclude_if=unset)
    max_calls: int | None = Field(None, ge=1, exclude_if=unset)
    # The user's prices (--prices FILE), over the cost map hpt ships (hpt.results.costs).
    prices_file: Path | None = Field(None, exclude_if=unset)
    # --shard I/N: this run directory holds the I-th of N slices of the campaign, which
    # ``hpt merge`` joins into one run.
    shard: Shard | None = Field(None, exclude_if=unset)
    # --ray [ADDRESS] --workers N: climbs run in N Ray workers (ADDRESS "": a local Ray, or
    # the cluster RAY_ADDRESS names). How the run is executed, not what it measures: never
    # saved, a resume may run it otherwise.
    ray: str | None = Field(None, exclude=True)
    workers: int | None = Field(None, ge=1, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return with_reasoning_dimensions(with_shorthands(data))

    @field_validator("dataset", "model", "mode", "threshold", *REASONING_DIMENSIONS)
    @classmethod
    def _no_repeats(cls, values: list[Any]) -> list[Any]:
        return _unique(values)

    def base_url_models(self) -> Sequence[str]:
        return self.model

    def check_models(self) -> None:
        """Fail on a bad model spec before touching any data or server."""
        if self.base_url and len(self.model) > 1:
            raise ConfigError(
                "--base-url names one endpoint but the run has several models; give each its "
                "endpoint in a config file ([models.NAME] endpoints = [...])"
            )
        for name in self.model_names():
            self.resolve(name)

    def model_names(self) -> list[str]:
        """Every model the run may call: the evaluated ones, then the helpers it names."""
        helpers = (self.knowledge_model, self.selector_model, self.extractor_model,
                   self.judge_model, self.prompt_model)  # fmt: skip
        return [*self.model, *(h for h in helpers if h)]

    def thresholds_for(self, defaults: Sequence[float] | None) -> list[float | None]:
        """The threshold cells of one dataset: only datasets resolved by a score (those with
        ``defaults``) have any; unless the run names some, the dataset's defaults."""
        if defaults is None:
            return [None]
        return list(self.threshold or defaults)

    @property
    def title(self) -> str:
        title = " + ".join(self.dataset) + " · " + redact_urls(" + ".join(self.model))
        return title if self.shard is None else f"{title} · shard {self.shard}"

    def resume_command(self, out: Path, *flags: str) -> str:
        """How to continue this run in ``out`` (with ``flags``, such as a higher budget):
        run.json keeps no credentials, so an endpoint that had some must be given again."""
        command = " ".join(["hpt run --resume", str(out), *flags])
        saved = self.model_dump(mode="json")
        given = dict.fromkeys(urls_with_credentials(saved) + hidden_credentials(saved))
        return (
            command
            + "".join(f" --base-url '{url}'" for url in given)
            + (" (each URL with its credentials in place of ***)" if given else "")
        )

    def restore_credentials(self, urls: Sequence[str]) -> RunSpec:
        """This spec as read back from run.json, which keeps every URL without its
        credentials, with them given again: each of ``urls`` (--base-url on resume) stands
        for the saved URL it matches once redacted. A URL that matches none, or a saved URL
        still without its credentials, is a ConfigError saying what to give."""
        restored = self
        for url in urls:
            remember_url_credentials(url)
            saved = redact_url(url)
            if saved not in json.dumps(restored.model_dump(mode="json")):
                raise ConfigError(
                    f"--base-url {saved} is none of the run's endpoints; a resumed run calls "
                    f"the endpoints it was started with"
                )
            restored = _replaced(restored, saved, url)
        hidden = hidden_credentials(restored.model_dump())
        if hidden:
            raise ConfigError(
                f"the run's endpoint {hidden[0]} was saved without its credentials (they are "
                f"never written to disk); give it again, credentials included: --base-url URL"
            )
        return restored


def evaluated(datasets: Any) -> set[str]:
    """The datasets a run's ``dataset`` setting (one name or a list, as given) names, in
    lower case, as task names are looked up."""
    listed = _listed(datasets)
    return {str(d).lower() for d in listed} if isinstance(listed, list) else set()


def with_shorthands(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` (RunSpec's fields) with each shorthand moved into ``task_args``; one that
    disagrees with the argument it stands for is a ConfigError. The empty values run.json
    kept for them before (``depth_mode: []``, ``graph: null``) are the defaults: dropped."""
    out = {k: v for k, v in settings.items() if k not in SHORTHANDS}
    # A shorthand for a dataset the run does not evaluate applies to nothing, as it did
    # before task_args (a shared config's depth_mode, a boolq run's saved graph: null).
    datasets = evaluated(settings.get("dataset"))
    given = {
        k: settings[k]
        for k, (dataset, _) in SHORTHANDS.items()
        if settings.get(k) not in (None, []) and dataset in datasets
    }
    if not given:
        return out
    task_args = settings.get("task_args") or {}
    if not isinstance(task_args, Mapping) or not all(
        isinstance(v, Mapping) for v in task_args.values()
    ):
        return dict(settings)  # pydantic says what is wrong with task_args
    merged = {name: dict(fields) for name, fields in task_args.items()}
    for key, value in given.items():
        dataset, field = SHORTHANDS[key]
        set_task_arg(merged, dataset, field, value,
                     f"{key} and task_args.{dataset}.{field}")  # fmt: skip
    return {**out, "task_args": merged}


def with_reasoning_dimensions(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` (RunSpec's fields) with a reasoning effort or thinking budget given in
    ``params`` moved onto its dimension: the same setting, one value. Given both ways, they
    must agree (a ConfigError says so)."""
    params = settings.get("params")
    if isinstance(params, GenerationParams):
        given = params.model_dump(exclude_unset=True)
    elif isinstance(params, Mapping):
        given = dict(params)
    else:
        return dict(settings)  # pydantic says what is wrong with params
    moved = {k: given.pop(k) for k in REASONING_DIMENSIONS if k in given}
    if not moved:
        return dict(settings)
    out = {**settings, "params": given}
    for key, value in moved.items():
        if value is None:  # set to "not set": nothing to move
            continue
        dimension = settings.get(key)
        listed = _listed(dimension) if dimension is not None else []
        if not listed:
            out[key] = [value]
        elif not isinstance(listed, list) or _unique(listed) != [value]:
            shown = ", ".join(map(str, listed)) if isinstance(listed, list) else dimension
            raise ConfigError(
                f"params.{key} ({value}) and {key} ({shown}) disagree; give one ({key} "
                f"takes several values, one cell each)"
            )
    return out


def set_task_arg(
    task_args: dict[str, dict[str, Any]], dataset: str, field: str, value: Any, both: str
) -> None:
    """Set ``dataset.field`` to ``value`` in ``task_args``; a different value already there
    (as the dataset's arguments read both) is a ConfigError saying ``both`` disagree."""
    fields = task_args.setdefault(dataset, {})
    if field in fields:
        cls = task_class(dataset)
        before, now = (getattr(cls.arguments({field: v}), field) for v in (fields[field], value))
        if before != now:
            raise ConfigError(f"{both} disagree ({now} and {before}); give one")
    fields[field] = value


def _replaced(value: Any, old: str, new: str) -> Any:
    """``value`` with ``old`` replaced by ``new`` in every string it holds, at any depth;
    the same object where nothing changed (a model keeps which fields were set)."""
    if isinstance(value, str):
        return value.replace(old, new) if old in value else value
    if isinstance(value, list):
        items = [_replaced(v, old, new) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if isinstance(value, dict):
        entries = {k: _replaced(v, old, new) for k, v in value.items()}
        return entries if any(entries[k] is not value[k] for k in value) else value
    if isinstance(value, BaseModel):
        changed = {}
        for name in type(value).model_fields:
            field = getattr(value, name)
            now = _replaced(field, old, new)
            if now is not field:
                changed[name] = now
        return value.model_copy(update=changed) if changed else value
    return value


class SavedSpec(RunMeta, RunSpec):
    """``run.json``: the spec (its fields first), then what is needed to repeat the run."""

    @field_serializer("params")
    def _params_given(self, params: GenerationParams) -> dict[str, Any]:
        """Only the settings the run gave: each dataset's own defaults apply under them (and
        so again on resume); ``generation`` has what was used."""
        return params.model_dump(mode="json", exclude_unset=True)

    def run_spec(self) -> RunSpec:
        return RunSpec.model_validate(self.model_dump(include=set(RunSpec.model_fields)))
