"""One run: every cell of the dataset x model x mode matrix, climbed concurrently, each
finished sample appended to the run directory at once. A run can be resumed: finished samples
are read back, counted and skipped."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import errno
import gc
import itertools
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field, ValidationError, field_serializer

from hpt import __version__
from hpt.backends import BackendStats, GenerationParams, ResponseCache
from hpt.backends.managed import ManagedBackend
from hpt.backends.secrets import redact_urls
from hpt.errors import StorageError, in_chain, validation_message
from hpt.graphs import (
    DEFAULT_LADDER,
    LadderRuntime,
    LadderState,
    UnknownStrategyError,
    build_ladder,
    recursion_limit,
    resolve_strategies,
    strategy_params,
)
from hpt.graphs.adaptive import adaptive_recursion_limit, build_adaptive
from hpt.graphs.walk import GraphWalker
from hpt.orchestrator.models import ModelBackends
from hpt.orchestrator.penalties import run_penalties
from hpt.orchestrator.spec import ConfigError, RunSpec
from hpt.plugins import PluginError, installed_plugins, load_plugins
from hpt.results.info import TaskInfo
from hpt.results.lock import RunLock
from hpt.results.reader import iter_lines, parse_record
from hpt.results.records import RECORD_KINDS, Cell, SampleRecord, Selection
from hpt.results.rundir import SAMPLES, SPEC, SUMMARY, RunDirError
from hpt.results.scoring import sample_score, unjudged
from hpt.results.store import RunStore
from hpt.results.tally import Summary, Tally
from hpt.structured.runtime import CellRuntime, ProgramStore
from hpt.tasks import DatasetError, Sample, Task, resolve_data_dir, task_class
from hpt.tasks.extractor import AnswerExtractor
from hpt.tasks.generation import GenerationTask


class RunObserver(Protocol):
    def watch(self, backends: Mapping[str, BackendStats]) -> None:
        """Live counters of each backend (retries, waits, concurrency), before the start."""
        ...

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        """``total`` samples in the run, ``done`` of them recorded before (a resumed run)."""
        ...

    def recorded(self, record: SampleRecord, tally: Tally) -> None: ...
    def finished(self, result: RunSummary) -> None: ...


class SilentObserver:
    """Observes nothing; subclass it to watch only part of a run."""

    def watch(self, backends: Mapping[str, BackendStats]) -> None:
        pass

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        pass

    def recorded(self, record: SampleRecord, tally: Tally) -> None:
        pass

    def finished(self, result: RunSummary) -> None:
        pass


class RunSummary(BaseModel):
    """``summary.json``: one summary per cell; ``complete`` once every sample is recorded."""

    complete: bool
    cells: list[Summary]


@dataclass
class RunResult:
    out: Path
    summaries: list[Summary]
    complete: bool

    @property
    def summary(self) -> Summary:
        """The only cell's summary (a run of one dataset, model and mode)."""
        if len(self.summaries) != 1:
            raise ValueError(f"this run has {len(self.summaries)} cells; read .summaries")
        return self.summaries[0]


class DatasetParams(BaseModel):
    """One dataset's generation parameters, as ``run.json`` gives them."""

    # What its ladder's calls ask for: the run's settings over the dataset's own defaults
    # (DepthQA's are the paper's). Strategies and helper roles change some per call (logprobs
    # for generated knowledge, temperature 0 for judges and the extractor): see each call.
    asked: GenerationParams
    # By evaluated model: what its provider puts on the wire for ``asked`` (names as sent;
    # one the provider does not take is absent), as each call's ``params`` records it.
    # None: the model's transport does not say.
    sent: dict[str, dict[str, Any] | None] = Field(default_factory=dict)


class SavedSpec(RunSpec):
    """``run.json``: the spec, plus what is needed to repeat the run (never keys)."""

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

    @field_serializer("params")
    def _params_given(self, params: GenerationParams) -> dict[str, Any]:
        """Only the settings the run gave: each dataset's own defaults apply under them (and
        so again on resume); ``generation`` has what was used."""
        return params.model_dump(mode="json", exclude_unset=True)

    def run_spec(self) -> RunSpec:
        return RunSpec.model_validate(self.model_dump(include=set(RunSpec.model_fields)))


def default_out_dir(spec: RunSpec) -> Path:
    def part(names: list[str]) -> str:
        text = re.sub(r"[^A-Za-z0-9._-]+", "_", "+".join(names))
        return text[:60]

    models = part([redact_urls(m) for m in spec.model])  # no credentials in a folder name
    return Path("runs") / f"{part(spec.dataset)}-{models}-{datetime.now():%Y%m%d-%H%M%S}"


def load_saved_spec(directory: Path) -> SavedSpec:
    try:
        raw = (directory / SPEC).read_bytes()
    except FileNotFoundError:
        raise RunDirError(f"{directory} is not a run directory (no {SPEC})") from None
    except OSError as exc:
        raise RunDirError(f"cannot read {directory / SPEC}: {exc.strerror}") from None
    try:  # as bytes: text that is not UTF-8 is a ValidationError too
        return SavedSpec.model_validate_json(raw)
    except ValidationError as exc:
        problem = validation_message(exc, whole="(document)")
        raise RunDirError(f"{directory / SPEC}: not a run spec ({problem})") from None


def load_saved_plugins(directory: Path, modules: Sequence[str], *, trust: bool) -> None:
    """Import the plugins a saved run names (its ``plugins``). Importing runs a module's code,
    and a run directory may come from anyone: without ``trust``, every one of them must be
    installed as an ``hpt.plugins`` entry point or already imported (``--plugin``)."""
    known = {ep.module for ep in installed_plugins()}
    strangers = [m for m in modules if m not in known and m not in sys.modules]
    if strangers and not trust:
        raise PluginError(
            f"{directory / SPEC} names plugins that resuming would import, running their "
            f"code: {', '.join(strangers)}; resume with --trust-plugins if you trust them"
        )
    load_plugins(modules, installed=False)


@dataclass
class _CellPlan:
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
    todo: list[tuple[Sample, int]] = field(default_factory=list)


async def run_evaluation(
    spec: RunSpec,
    observer: RunObserver | None = None,
    *,
    resume: bool = False,
    retry_errors: bool = True,
    command: list[str] | None = None,
) -> RunResult:
    """Run (or, with ``resume``, continue) every cell of ``spec``.

    Resuming reads ``spec.out``'s records, skips the samples they cover and, with
    ``retry_errors``, runs again the samples that ended in an error. The run directory is
    locked for the run (one writer). A write that fails (disk full, read-only, I/O error)
    stops the run at once: ``RunStopped`` says what failed, what was kept and how to go on."""
    observer = observer or SilentObserver()
    resolve_strategies(spec.strategies)
    spec.check_models()
    # Each dataset's HPI_dataset and its source, fixed now and saved in run.json.
    spec = spec.model_copy(update={"penalties": await asyncio.to_thread(run_penalties, spec)})
    plans = await _plan(spec)
    out = spec.out or default_out_dir(spec)
    # Before anything is read back or written. Taken in the loop, not a thread: a
    # cancellation cannot then come between taking it and the ``finally`` that releases it.
    lock = RunLock.take(out)
    try:
        return await _run_locked(spec, plans, out, observer, resume, retry_errors, command)
    finally:
        lock.release()


async def _run_locked(
    spec: RunSpec,
    plans: list[_CellPlan],
    out: Path,
    observer: RunObserver,
    resume: bool,
    retry_errors: bool,
    command: list[str] | None,
) -> RunResult:
    store = RunStore(out)
    # The DSPy strategies' optimised programs (one per dataset x model x strategy).
    programs = ProgramStore(out, spec.programs)
    done: set[tuple[Any, ...]] = set()
    if resume:
        saved = load_saved_spec(out)
        by_cell = {p.cell: p for p in plans}
        try:
            # Outlasting a cancellation: the lock is not released while it rewrites the file.
            reading = asyncio.ensure_future(
                asyncio.to_thread(_read_back, out, by_cell, retry_errors)
            )
            await _outlast_cancellation(reading)
            done = reading.result()
        except StorageError as exc:
            raise RunStopped(exc, out, spec.resume_command(out), kept=None) from None
    else:
        store.check_free()
    for p in plans:
        p.todo = [
            (s, draw)
            for draw in range(spec.samples_per_task)
            for s in p.samples
            if p.cell.key(s.id, draw) not in done
        ]
    total = sum(len(p.samples) for p in plans) * spec.samples_per_task
    complete = False
    async with contextlib.AsyncExitStack() as stack:
        cache = await stack.enter_async_context(ResponseCache()) if spec.cache else None
        # Backends first: an unreachable endpoint or a bad key leaves no run directory behind.
        # One backend (one set of limits) per distinct model, whatever roles it plays.
        backends = ModelBackends(stack, cache)

        async def backend(name: str) -> ManagedBackend:
            return await backends.open(spec.resolve(name))

        extractor = (
            AnswerExtractor(await backend(spec.extractor_model), spec.params)
            if spec.extractor_model
            else None
        )
        for p in plans:
            model = p.model = await backend(p.model_name)
            knowledge = await backend(spec.knowledge_model) if spec.knowledge_model else model
            if p.task.needs_judge:  # each cell its own judge: by default its evaluated model
                p.task = copy.copy(p.task)
                p.task.bind_judge(await backend(spec.judge_model or p.model_name), p.params)
            # MIPROv2's instruction proposer: opened only for a ladder that optimises with it.
            proposer = model
            if spec.prompt_model and PROMPT_MODEL_STRATEGIES.intersection(p.strategies):
                proposer = await backend(spec.prompt_model)
            runtime = LadderRuntime(
                p.task,
                model,
                knowledge,
                p.params,
                p.pool,
                spec.epoch,
                extractor=extractor,
                share_completions=spec.share_completions,
                strategy_args=p.args,
                run=CellRuntime(p.cell.dataset, p.cell.model, programs, proposer, spec.epoch),
            )
            if p.cell.mode == "adaptive":
                selector = await backend(spec.selector_model) if spec.selector_model else model
                graph = build_adaptive(p.strategies, runtime, selector)
            else:
                graph = build_ladder(p.strategies, runtime)
            # The same graph, walked without Pregel's per-step cost (hpt.graphs.walk).
            p.graph = GraphWalker.of(graph) or graph
        observer.watch(backends.stats)
        generation = _generation(plans)
        now = datetime.now().isoformat(timespec="seconds")
        if resume:
            saved.resumed_at.append(now)
            # A run saved before run.json described its tasks gets the descriptions now.
            saved.tasks = {**{p.cell.dataset: _described(p.task) for p in plans}, **saved.tasks}
            saved.generation = {**generation, **saved.generation}
            store.reopen()
        else:
            saved = SavedSpec(
                # The params object itself: it knows which settings the run gave.
                **{**spec.model_dump(), "params": spec.params},
                started_at=now,
                command=command or [],
                tasks={p.cell.dataset: _described(p.task) for p in plans},
                generation=generation,
            )
        try:
            # The spec first: a fresh run that cannot write it has written nothing else.
            store.write_json(SPEC, saved.model_copy(update={"out": out}))
        except StorageError as exc:
            store.close()
            raise RunStopped(
                exc, out, spec.resume_command(out), kept=len(done), resumable=resume
            ) from None
        if not resume:
            store.create()
        observer.started(spec, total, out, done=total - sum(len(p.todo) for p in plans))
        faults: list[StorageError] = []
        try:
            with _collector_for_climb():
                await _climb_all(plans, spec, store, observer)
            complete = True
        except StorageError as exc:
            faults.append(exc)
        finally:
            result = RunSummary(complete=complete, cells=[p.tally.summary() for p in plans])
            summary_written = _end_run(store, result, programs, faults)
            ended = _generation(plans)
            if ended != generation:  # a transport adapted (a TGI server without a template)
                saved.generation.update(ended)
                _kept_going(faults, store.write_json, SPEC, saved.model_copy(update={"out": out}))
            try:
                # Backends and cache close now: the cache's last writes can fail like any.
                await stack.aclose()
            except StorageError as exc:
                faults.append(exc)
            if faults:  # a storage fault outranks a cancellation: the user must hear of it
                kept = len(done) + store.appended
                raise RunStopped(
                    faults[0],
                    out,
                    spec.resume_command(out),
                    kept=kept,
                    summary=summary_written,
                    complete=complete,
                )
    observer.finished(result)
    return RunResult(out=out, summaries=result.cells, complete=complete)


class RunStopped(StorageError):
    """A write failed and the run stopped: what failed, what was kept, and how to go on."""

    def __init__(
        self,
        fault: StorageError,
        out: Path,
        resume: str,
        *,
        kept: int | None,
        summary: bool = False,
        resumable: bool = True,
        complete: bool = False,
    ) -> None:
        message = _stopped_message(fault, out, resume, kept, summary, resumable, complete)
        Exception.__init__(self, message)
        self.what, self.path, self.cause = fault.what, fault.path, fault.cause
        self.out, self.kept = out, kept


def _stopped_message(
    fault: StorageError, out: Path, resume: str, kept: int | None, summary: bool,
    resumable: bool, complete: bool,
) -> str:  # fmt: skip
    remedy = {
        errno.ENOSPC: "free some space",
        errno.EDQUOT: "free some space",
        errno.EROFS: "make it writable",
        errno.EACCES: "make it writable",
        errno.EPERM: "make it writable",
        errno.EFBIG: "lift the file size limit (ulimit -f)",
    }.get(fault.cause.errno or 0, "check the disk")
    if not resumable:
        return f"{fault}; nothing was run: {remedy}, then start the run again"
    records = out / SAMPLES
    if kept is None:  # stopped before its first write: the run directory is as it was
        return f"{fault}; {records} is unchanged; {remedy}, then continue with: {resume}"
    where = (
        f"the summary is in {out / SUMMARY}"
        if summary
        else f"{SUMMARY} was not written (hpt summarize {out} recomputes it from the records)"
    )
    if complete:  # every sample is recorded: what failed came after
        then = f"{remedy}" if summary else f"{remedy}, then write it with: {resume}"
        return f"{fault}; the run itself finished: {kept} records in {records}, {where}; {then}"
    held = f"{kept} records kept in {records}"
    return f"{fault}; the run stopped: {held}, {where}; {remedy}, then continue with: {resume}"


def _end_run(
    store: RunStore, result: RunSummary, programs: ProgramStore, faults: list[StorageError]
) -> bool:
    """Close the records, write the summary and the programs' usage; a write that fails is
    added to ``faults`` and the others are still tried. Whether the summary was written."""
    _kept_going(faults, store.close)
    written = _kept_going(faults, store.write_json, SUMMARY, result)
    _kept_going(faults, programs.write_usage)
    return written


def _kept_going(faults: list[StorageError], write: Callable[..., None], *args: Any) -> bool:
    try:
        write(*args)
    except StorageError as exc:
        faults.append(exc)
        return False
    return True


# Workers start this far apart, not all at once. Calls sent in the same instant (every worker
# opening its connection at the start) come back in the same instant from a server of steady
# latency, and each response then waits behind the whole burst in the event loop, wave after
# wave. Started about one call's CPU apart, the waves stay spread: at 128 in flight x 200 ms
# (bench/vs_raw_client.py) calls/s rose from 0.94-0.96 of a bare client's to 0.99-1.02 (and
# 0.97-0.99 of a bare client paced alike).
START_PACE_S = 0.0005

# Objects a climb allocates between young collections. At CPython's default (700) the
# collector ran every ~30 model calls and took ~9% of the climb's CPU (bench/throughput.py:
# 0.43 -> 0.39 ms per call); cycles still go, just in fewer, larger passes.
CLIMB_GC_THRESHOLD = 10_000


@contextlib.contextmanager
def _collector_for_climb() -> Iterator[None]:
    """The garbage collector tuned for a climb. What is loaded by now (datasets, prompts,
    graphs) lives as long as the run: freezing it spares the collector a pass over all of it,
    which stalled every call in flight (~40 ms at 1,000 GSM8K samples)."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(CLIMB_GC_THRESHOLD, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _generation(plans: list[_CellPlan]) -> dict[str, DatasetParams]:
    """Each dataset's generation parameters: asked, and sent by each evaluated model's
    transport as it stands (it may adapt during a run)."""
    out: dict[str, DatasetParams] = {}
    for p in plans:
        used = out.setdefault(p.cell.dataset, DatasetParams(asked=p.params))
        if p.model is not None:
            used.sent[p.cell.model] = p.model.sent_params(p.params)
    return out


def _described(task: Task) -> TaskInfo:
    """The dataset as run.json describes it, with what its loaded data had to say."""
    return task.info().model_copy(update={"notes": tuple(task.split_notes())})


async def _plan(spec: RunSpec) -> list[_CellPlan]:
    """Load every dataset once and lay out the cells; fails before any model is called."""
    data_dir = resolve_data_dir(spec.data_dir)
    tasks = {}
    for name in spec.dataset:
        cls = task_class(name)
        options = {key: getattr(spec, key) for key in cls.run_options}
        tasks[name] = cls(data_dir, **options)
    if spec.threshold and not any(isinstance(t, GenerationTask) for t in tasks.values()):
        raise DatasetError(
            f"--threshold applies to datasets resolved by a score (iwslt, samsum), "
            f"not {', '.join(tasks)}"
        )
    ladder_given = list(spec.strategies) != list(DEFAULT_LADDER)

    def load(task: Task) -> tuple[list[Sample], list[Sample]]:
        samples = task.choose(task.load_samples(), spec.limit, spec.seed)
        return samples, list(task.load_exemplar_pool())

    loaded = await asyncio.gather(*(asyncio.to_thread(load, t) for t in tasks.values()))
    ladders_of = {
        name: task.variants(spec.depth_mode, spec.strategies, ladder_given)
        for name, task in tasks.items()
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
        for _, strategies in ladders:
            resolve_strategies(strategies)
            for name in strategies:
                if name in DEFAULT_LADDER:  # fail early if the dataset lacks the level's prompts
                    task.prompts.section(name)
                elif name in PROMPT_SECTIONS:
                    task.prompts.section(PROMPT_SECTIONS[name])
        defaults = task.paper_thresholds if isinstance(task, GenerationTask) else None
        for threshold in spec.thresholds_for(defaults):
            cell_task = task
            if isinstance(task, GenerationTask) and threshold is not None:
                cell_task = copy.copy(task)
                cell_task.threshold = threshold
            for variant, strategies in ladders:
                args = strategy_params(
                    strategies, {k: v for k, v in spec.strategy_args.items() if k in strategies}
                )
                for model_name in spec.model:
                    label = spec.resolve(model_name).label
                    for mode in spec.mode:
                        cell = Cell(task.name, label, mode, threshold, variant)
                        tally = Tally(
                            dataset=task.name,
                            model=label,
                            mode=mode,
                            m=len(strategies),
                            penalty=spec.penalties[key].value,
                            threshold=threshold,
                            track_draws=spec.samples_per_task > 1,
                            info=task.info(),
                            variant=variant,
                            strategies=strategies,
                        )
                        plans.append(_CellPlan(cell, cell_task, samples, pool, model_name,
                                               tally, strategies, args, params))  # fmt: skip
    return plans


# Strategies that take a saved program (--program) and the one that uses --prompt-model.
PROGRAM_STRATEGIES = ("dspy_predict", "dspy_cot", "dspy_bfrs", "dspy_mipro")
PROMPT_MODEL_STRATEGIES = {"dspy_mipro"}
# The prompt-file section each of those strategies reads.
PROMPT_SECTIONS = {"helm_baseline": "helm_baseline", **{n: "dspy" for n in PROGRAM_STRATEGIES}}


def _check_programs(spec: RunSpec, laddered: set[str]) -> None:
    """Each --program names a DSPy strategy of the ladder (and a dataset of the run, when
    it names one) and an existing file."""
    for key, path in spec.programs.items():
        name, _, dataset = key.partition(":")
        if name not in PROGRAM_STRATEGIES:
            raise ConfigError(
                f"--program {key}={path}: a saved program loads into one of "
                f"{', '.join(PROGRAM_STRATEGIES)}, not {name!r}"
            )
        if name not in laddered:
            raise ConfigError(f"--program {key}={path}: {name} is not in the ladder")
        if dataset and dataset not in spec.dataset:
            raise ConfigError(f"--program {key}={path}: the run has no dataset {dataset!r}")
        if not Path(path).is_file():
            raise ConfigError(f"--program {key}={path}: no such file")


def _read_back(
    out: Path, plans: Mapping[Cell, _CellPlan], retry_errors: bool
) -> set[tuple[Any, ...]]:
    """Count a run's finished records into the tallies and return their keys. Records of
    samples that ended in an error are dropped (rewriting the file) when they will be rerun."""
    done: set[tuple[Any, ...]] = set()
    dropped: set[int] = set()
    samples = out / SAMPLES
    if not samples.exists():
        return done
    for lineno, line in iter_lines(out):
        if not line.endswith("\n"):
            break  # torn by a crash; reopen() cuts it
        record = parse_record(out, lineno, line)
        plan = plans.get(record.cell)
        if plan is None:
            raise RunDirError(
                f"{samples}:{lineno}: a record of {record.cell.title}, "
                f"which this run's spec does not include"
            )
        if (retry_errors and record.error is not None) or record.key in done:
            dropped.add(lineno)
            continue
        done.add(record.key)
        plan.tally.add(record)
    if dropped:  # rare: rewrite only then, whole or not at all
        keep = samples.with_suffix(".jsonl.resume")
        try:
            with keep.open("w", encoding="utf-8") as kept:
                for lineno, line in iter_lines(out):
                    if lineno not in dropped and line.endswith("\n"):
                        kept.write(line)
                kept.flush()
                os.fsync(kept.fileno())
            os.replace(keep, samples)
        except OSError as exc:
            with contextlib.suppress(OSError):
                keep.unlink(missing_ok=True)
            raise StorageError("the records to run again", samples, exc) from None
    return done


# One climb: a cell, a sample and a draw. A work item is one or several climbs run together.
Climb = tuple[_CellPlan, Sample, int]


def _interleave(plans: list[_CellPlan]) -> list[list[Climb]]:
    """Round-robin over the cells, so every cell makes progress from the start. The cells
    that differ only by threshold read one evaluation at several thresholds: a sample's
    climbs in them are one work item, run together, so each identical call is asked once
    (the backend shares a request in flight) and every threshold scores the same replies."""
    siblings: dict[tuple[object, ...], list[_CellPlan]] = {}
    for p in plans:
        c = p.cell
        siblings.setdefault((c.dataset, p.model_name, c.mode, c.variant), []).append(p)
    per_group = []
    for group in siblings.values():
        items: dict[tuple[str, int], list[Climb]] = {}
        for p in group:
            for s, draw in p.todo:
                items.setdefault((s.id, draw), []).append((p, s, draw))
        per_group.append(list(items.values()))
    return [item for batch in itertools.zip_longest(*per_group) for item in batch if item]


async def _together(climbs: list[Coroutine[Any, Any, None]]) -> None:
    """Run ``climbs`` at once; the first failure stops the others and is raised."""
    try:
        async with asyncio.TaskGroup() as tg:
            for climb in climbs:
                tg.create_task(climb)
    except BaseExceptionGroup as group:
        raise _first_failure(group.exceptions) from None


def _first_failure(errors: Sequence[BaseException]) -> BaseException:
    """What to raise of several failures: a storage fault (the reason the run must stop,
    however a strategy wrapped it), else the first (e.g. a rejected API key); the rest
    repeat it."""
    for exc in errors:
        fault = in_chain(exc, StorageError)
        if fault is not None:
            return fault
    return errors[0]


async def _climb_all(
    plans: list[_CellPlan], spec: RunSpec, store: RunStore, observer: RunObserver
) -> None:
    queues: dict[str, list[list[Climb]]] = {}
    for model_name in spec.model:
        items = _interleave([p for p in plans if p.model_name == model_name])
        if items:
            queues[model_name] = items[::-1]  # pop() from the end takes the first
    done: asyncio.Queue[tuple[SampleRecord, Tally] | None] = asyncio.Queue()

    async def climb(plan: _CellPlan, sample: Sample, draw: int) -> None:
        done.put_nowait((await _climb(plan, sample, draw), plan.tally))

    async def worker(todo: list[list[Climb]], start_after: float) -> None:
        await asyncio.sleep(start_after)
        while todo:
            climbs = todo.pop()
            if len(climbs) == 1:
                await climb(*climbs[0])
            else:
                await _together([climb(*c) for c in climbs])

    async def writer() -> None:
        finished = False
        while not finished:
            batch = [await done.get()]
            while not done.empty():
                batch.append(done.get_nowait())
            finished = batch[-1] is None
            entries = [e for e in batch if e is not None]
            if entries:
                await store.append([record for record, _ in entries])
                for record, tally in entries:
                    tally.add(record)
                    observer.recorded(record, tally)

    async def climb_everything() -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                for todo in queues.values():
                    for i in range(min(spec.concurrency, len(todo))):
                        tg.create_task(worker(todo, i * START_PACE_S))
        except BaseExceptionGroup as group:
            raise _first_failure(group.exceptions) from None

    write_task = asyncio.create_task(writer())
    climbing = asyncio.create_task(climb_everything())

    def stop_climbing(writing: asyncio.Task[None]) -> None:
        # A record that cannot be written stops every climb at once: no further call is sent
        # for results that could not be kept.
        if not writing.cancelled() and writing.exception() is not None:
            climbing.cancel()

    write_task.add_done_callback(stop_climbing)
    try:
        await climbing
    except asyncio.CancelledError:
        if not write_task.done() or write_task.cancelled() or write_task.exception() is None:
            raise  # cancelled from outside: Ctrl-C, SIGTERM, the API's caller
    finally:
        # Finished samples reach the disk even when the run stops early; those in flight are
        # abandoned and run again on resume. A writer that failed raises its StorageError.
        done.put_nowait(None)
        await _outlast_cancellation(write_task)


async def _outlast_cancellation(task: asyncio.Future[Any]) -> None:
    """Await ``task`` to its end, whatever cancellations come meanwhile (a second Ctrl-C, an
    API caller cancelling twice): the store is closed and the lock released only after it,
    so no write goes on into a directory another run may then take. A cancellation that
    came is raised again once it is done."""
    cancelled = False
    while True:
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
            continue
        break
    if cancelled:
        raise asyncio.CancelledError


async def _climb(plan: _CellPlan, sample: Sample, draw: int) -> SampleRecord:
    cell, strategies = plan.cell, plan.strategies
    m = len(strategies)
    adaptive = cell.mode == "adaptive"
    limit = adaptive_recursion_limit(m) if adaptive else recursion_limit(m)
    started = time.perf_counter()
    state: LadderState = await plan.graph.ainvoke(
        {"sample": sample, "attempts": [], "draw": draw},
        config={"recursion_limit": limit},
    )
    attempts = state["attempts"]
    selections: list[Selection] = list(state.get("selections", []))
    error = next((a.error for a in attempts if a.error), None)
    error = error or next((t.error for t in selections if t.error), None)
    winner = next((a for a in attempts if a.resolved), None)
    level = winner.level if winner else None
    iteration = winner.iteration if winner else None
    penalty = plan.tally.penalty
    # Not scored: an error, or a level whose judge gave no valid score (its outcome unknown).
    unscored = error or unjudged(attempts)
    score = None if unscored else sample_score(cell.mode, level, iteration, m, penalty)
    kind = RECORD_KINDS.get(plan.task.record_kind or "", SampleRecord)
    return kind(
        **plan.task.record_extras(sample, attempts),
        sample_id=sample.id,
        draw=draw,
        dataset=cell.dataset,
        model=cell.model,
        mode=cell.mode,
        threshold=cell.threshold,
        variant=cell.variant,
        strategies=list(strategies),
        m=m,
        penalty=penalty,
        target=sample.target,
        resolved_level=level,
        hpi_score=score,
        options=plan.task.answer_options(sample),
        error=error,
        attempts=attempts,
        iteration=iteration,
        selections=selections,
        wall_s=time.perf_counter() - started,
    )
