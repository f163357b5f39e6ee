"""Planning a run: load each dataset once, lay out its cells (dataset x model x mode x
threshold x variant x reasoning effort x thinking budget) with their ladders and settings, and
check what the strategies need before any model is called."""

from __future__ import annotations

import asyncio
import copy
import itertools
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hpt.backends.managed import ManagedBackend
from hpt.backends.secrets import redact_urls
from hpt.graphs import (
    DEFAULT_LADDER,
    STRATEGIES,
    UnknownStrategyError,
    ladder_strategies,
    strategy_params,
)
from hpt.orchestrator.spec import ConfigError, RunSpec, evaluated
from hpt.results.info import TaskInfo
from hpt.results.records import Cell
from hpt.results.runfile import DatasetParams, ReasoningParams
from hpt.results.tally import Tally
from hpt.tasks import DatasetError, Sample, Task, resolve_data_dir, task_class
from hpt.tasks.base import in_shard
from hpt.tasks.generation import GenerationTask
from hpt.types import GenerationParams


@dataclass
class CellPlan:
    cell: Cell
    task: Task
    samples: list[Sample]
    pool: list[Sample]
    model_name: str
    tally: Tally
    # This cell's ladder, its strategies' parameters and generation settings.
    strategies: list[str] = field(default_factory=list)
    args: dict[str, BaseModel] = field(default_factory=dict)
    params: GenerationParams = field(default_factory=GenerationParams)
    graph: Any = None
    model: ManagedBackend | None = None  # the evaluated model's backend, once opened
    # Every backend the cell's climbs may call (evaluated, extractor, knowledge, judge,
    # prompt model, selector), once opened.
    backends: list[ManagedBackend] = field(default_factory=list)
    todo: list[tuple[Sample, int]] = field(default_factory=list)
    # Whether this session plans every sample (not an estimate's share of them).
    whole: bool = True


async def plan_cells(spec: RunSpec) -> list[CellPlan]:
    """Load every dataset once and lay out the cells; fails before any model is called."""
    data_dir = resolve_data_dir(spec.data_dir)
    # Dataset names are read whatever their case (--dataset DepthQA), task arguments too.
    task_args = {name.lower(): fields for name, fields in spec.task_args.items()}
    datasets = evaluated(spec.dataset)
    stray_args = [name for name in spec.task_args if name.lower() not in datasets]
    if stray_args:
        raise ConfigError(
            f"task arguments (--task-arg, [run.task_args]) for {', '.join(map(repr, stray_args))}"
            f", which the run does not evaluate ({', '.join(spec.dataset)})"
        )
    tasks = {
        name: task_class(name).configured(data_dir, task_args.get(name.lower(), {}))
        for name in spec.dataset
    }
    if spec.threshold and not any(isinstance(t, GenerationTask) for t in tasks.values()):
        raise DatasetError(
            f"--threshold applies to datasets resolved by a score (iwslt, samsum), "
            f"not {', '.join(tasks)}"
        )
    ladder_given = list(spec.strategies) != list(DEFAULT_LADDER)

    def load(task: Task) -> tuple[list[Sample], list[Sample]]:
        samples = task.choose(task.load_samples(), spec.limit, spec.seed)
        shard = spec.shard
        if shard is not None:  # of the samples --limit chose: shards together are that run
            key, index, count = task.shard_key, shard.index, shard.count
            samples = [s for s in samples if in_shard(spec.seed, key(s), index, count)]
        return samples, list(task.load_exemplar_pool())

    loaded = await asyncio.gather(*(asyncio.to_thread(load, t) for t in tasks.values()))
    ladders_of = {
        name: task.variants(spec.strategies, ladder_given) for name, task in tasks.items()
    }
    laddered = {s for ladders in ladders_of.values() for _, ladder in ladders for s in ladder}
    stray = [name for name in spec.strategy_args if name not in laddered]
    if stray:
        raise UnknownStrategyError(
            f"--strategy-arg names {', '.join(map(repr, stray))}, which is not in the ladder "
            f"({', '.join(sorted(laddered))})"
        )
    _check_programs(spec, laddered)
    plans = []
    for (key, task), (samples, pool) in zip(tasks.items(), loaded, strict=True):
        # The paper's settings for the dataset (DepthQA's), under what the run sets.
        params = GenerationParams.model_validate(
            {**task.default_params, **spec.params.model_dump(exclude_unset=True)}
        )
        ladders = ladders_of[key]
        args_of = [
            strategy_params(
                strategies, {k: v for k, v in spec.strategy_args.items() if k in strategies}
            )
            for _, strategies in ladders
        ]
        for (_, strategies), args in zip(ladders, args_of, strict=True):
            for name in ladder_strategies(strategies, args):
                section = STRATEGIES[name].prompt_section
                if section is not None:  # fail early if the dataset lacks a strategy's prompts
                    task.prompts.section(section)
        defaults = task.paper_thresholds if isinstance(task, GenerationTask) else None
        for threshold in spec.thresholds_for(defaults):
            cell_task = task
            if isinstance(task, GenerationTask) and threshold is not None:
                cell_task = copy.copy(task)
                cell_task.threshold = threshold
            for (variant, strategies), args in zip(ladders, args_of, strict=True):
                cells = itertools.product(spec.model, spec.mode, reasoning_settings(spec))
                for model_name, mode, (effort, budget) in cells:
                    label = spec.resolve(model_name).label
                    cell = Cell(task.name, label, mode, threshold, variant, effort, budget)
                    tally = Tally(
                        **asdict(cell),
                        m=len(strategies),
                        penalty=spec.penalties[key].value,
                        track_draws=spec.samples_per_task > 1,
                        info=task.info(),
                        strategies=strategies,
                    )
                    cell_params = with_reasoning(params, effort, budget)
                    plans.append(CellPlan(cell, cell_task, samples, pool, model_name, tally,
                                          strategies, args, cell_params))  # fmt: skip
    unsaved = programs_to_make(spec, plans)
    if spec.shard is not None and unsaved:
        name, dataset = unsaved[0]
        raise ConfigError(
            f"{name} makes the program its cell's samples share, and each shard would make "
            f"its own (hpt merge refuses shards whose programs differ): make it once without "
            f"--shard, then give every shard the file: --program {name}:{dataset}="
            "RUN/programs/FILE.json"
        )
    return plans


def programs_to_make(spec: RunSpec, plans: list[CellPlan]) -> list[tuple[str, str]]:
    """The (strategy, dataset) pairs whose DSPy program the run would make (optimise or
    compile) rather than load from a ``--program`` file."""
    unsaved: dict[tuple[str, str], None] = {}
    for p in plans:
        dataset = p.cell.dataset
        for name in ladder_strategies(p.strategies, p.args):
            given = name in spec.programs or f"{name}:{dataset}" in spec.programs
            if STRATEGIES[name].needs.program and not given:
                unsaved[(name, dataset)] = None
    return list(unsaved)


def reasoning_settings(spec: RunSpec) -> list[tuple[str | None, int | None]]:
    """The run's reasoning cells: every effort x every budget it names; one cell without
    either where it names none."""
    efforts: list[str | None] = [*spec.reasoning_effort] or [None]
    budgets: list[int | None] = [*spec.thinking_budget] or [None]
    return [(effort, budget) for effort in efforts for budget in budgets]


def with_reasoning(
    params: GenerationParams, effort: str | None, budget: int | None
) -> GenerationParams:
    """``params`` with a cell's reasoning settings; the same object where it has none, so a
    run without them asks (and caches) exactly as before."""
    given = {k: v for k, v in (("reasoning_effort", effort), ("thinking_budget", budget))
             if v is not None}  # fmt: skip
    if not given:
        return params
    return GenerationParams.model_validate({**params.model_dump(exclude_unset=True), **given})


def _check_programs(spec: RunSpec, laddered: set[str]) -> None:
    """Each --program names a strategy of the ladder that loads saved programs (its
    registration says so: ``Needs.program``), a dataset of the run when it names one, and an
    existing file."""
    for key, path in spec.programs.items():
        name, _, dataset = key.partition(":")
        known = STRATEGIES.get(name)
        if known is None or not known.needs.program:
            loaders = [n for n, s in STRATEGIES.items() if s.needs.program]
            raise ConfigError(
                f"--program {key}={path}: a saved program loads into one of "
                f"{', '.join(loaders)}, not {name!r}"
            )
        if name not in laddered:
            raise ConfigError(f"--program {key}={path}: {name} is not in the ladder")
        if dataset and dataset not in spec.dataset:
            raise ConfigError(f"--program {key}={path}: the run has no dataset {dataset!r}")
        if not Path(path).is_file():
            raise ConfigError(f"--program {key}={path}: no such file")


def default_out_dir(spec: RunSpec) -> Path:
    def part(names: list[str]) -> str:
        text = re.sub(r"[^A-Za-z0-9._-]+", "_", "+".join(names))
        return text[:60]

    models = part([redact_urls(m) for m in spec.model])  # no credentials in a folder name
    # A shard's own: an array job's shards start in the same second.
    shard = "" if spec.shard is None else f"-shard{spec.shard.index}of{spec.shard.count}"
    return Path("runs") / f"{part(spec.dataset)}-{models}-{datetime.now():%Y%m%d-%H%M%S}{shard}"


def described(task: Task) -> TaskInfo:
    """The dataset as run.json describes it, with what its loaded data had to say."""
    return task.info().model_copy(update={"notes": tuple(task.split_notes())})


def generation_params(plans: list[CellPlan]) -> dict[str, DatasetParams]:
    """Each dataset's generation parameters: asked, and sent by each evaluated model's
    transport as it stands (it may adapt during a run), for each reasoning setting apart. A
    setting a model cannot take raises ``SettingRefused``."""
    out: dict[str, DatasetParams] = {}
    for p in plans:
        plain = p.params.without_reasoning()
        used = out.setdefault(p.cell.dataset, DatasetParams(asked=plain))
        if p.model is not None:
            used.sent[p.cell.model] = p.model.sent_params(plain)
        if plain is p.params:
            continue
        cell = p.cell
        entries = used.reasoning = used.reasoning or []
        setting = (cell.reasoning_effort, cell.thinking_budget)
        entry = next((e for e in entries
                      if (e.reasoning_effort, e.thinking_budget) == setting), None)  # fmt: skip
        if entry is None:
            entry = ReasoningParams(reasoning_effort=setting[0], thinking_budget=setting[1])
            entries.append(entry)
        if p.model is not None:
            entry.sent[cell.model] = p.model.sent_params(p.params)
    return out
