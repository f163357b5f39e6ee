"""One evaluation run: pick samples, climb the ladder for each concurrently, store records."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from hpt import __version__
from hpt.backends import Backend, BackendStats, ResponseCache, open_backend
from hpt.graphs import (
    DEFAULT_LADDER,
    LadderRuntime,
    LadderState,
    build_ladder,
    recursion_limit,
    resolve_strategies,
)
from hpt.graphs.adaptive import (
    Selection,
    adaptive_recursion_limit,
    adaptive_score,
    build_adaptive,
)
from hpt.orchestrator.metrics import Summary, Tally, hpi_score
from hpt.orchestrator.records import SampleRecord
from hpt.orchestrator.spec import RunSpec
from hpt.orchestrator.store import SPEC, SUMMARY, RunStore
from hpt.tasks import DatasetError, Sample, get_task, resolve_data_dir, select
from hpt.tasks.generation import GenerationTask


class RunObserver(Protocol):
    def watch(self, backends: Mapping[str, BackendStats]) -> None:
        """Live counters of each backend (retries, waits, concurrency), before the start."""
        ...

    def started(self, spec: RunSpec, total: int, out: Path) -> None: ...
    def recorded(self, record: SampleRecord, tally: Tally) -> None: ...
    def finished(self, summary: Summary) -> None: ...


class SilentObserver:
    """Observes nothing; subclass it to watch only part of a run."""

    def watch(self, backends: Mapping[str, BackendStats]) -> None:
        pass

    def started(self, spec: RunSpec, total: int, out: Path) -> None:
        pass

    def recorded(self, record: SampleRecord, tally: Tally) -> None:
        pass

    def finished(self, summary: Summary) -> None:
        pass


@dataclass
class RunResult:
    summary: Summary
    out: Path


class SavedSpec(RunSpec):
    hpt_version: str = __version__
    started_at: str = ""


def default_out_dir(spec: RunSpec) -> Path:
    model = re.sub(r"[^A-Za-z0-9._-]+", "_", spec.model)
    return Path("runs") / f"{spec.dataset}-{model}-{datetime.now():%Y%m%d-%H%M%S}"


async def run_evaluation(spec: RunSpec, observer: RunObserver | None = None) -> RunResult:
    observer = observer or SilentObserver()
    strategies = resolve_strategies(spec.strategies)
    label, model_config = spec.resolve_model(spec.model, evaluated=True)
    knowledge = (
        spec.resolve_model(spec.knowledge_model, evaluated=False) if spec.knowledge_model else None
    )
    task = get_task(spec.dataset, resolve_data_dir(spec.data_dir))
    if spec.threshold is not None:
        if not isinstance(task, GenerationTask):
            raise DatasetError(
                f"--threshold applies to datasets resolved by a score (iwslt, samsum), "
                f"not {task.name}"
            )
        task.threshold = spec.threshold
    for name in strategies:
        if name in DEFAULT_LADDER:  # fail before any model call if the dataset lacks its prompts
            task.prompts.section(name)
    samples, pool = await asyncio.to_thread(
        lambda: (task.load_samples(), task.load_exemplar_pool())
    )
    chosen = select(samples, spec.limit, spec.seed)

    out = spec.out or default_out_dir(spec)
    store = RunStore(out)
    store.check_free()
    tally = Tally(
        dataset=task.name,
        model=label,
        mode=spec.mode,
        m=len(strategies),
        penalty=task.penalty,
    )
    async with contextlib.AsyncExitStack() as stack:
        cache = None
        if spec.cache:
            cache = ResponseCache()
            await cache.open()
            stack.push_async_callback(cache.aclose)
        # Backends first: an unreachable endpoint or a bad key leaves no run directory behind.
        model = await stack.enter_async_context(
            open_backend(model_config, label=label, cache=cache)
        )
        stats = {label: model.stats}
        knowledge_backend: Backend = model
        if knowledge is not None and knowledge != (label, model_config):
            k_label, k_config = knowledge
            k_model = await stack.enter_async_context(
                open_backend(k_config, label=k_label, cache=cache)
            )
            knowledge_backend = k_model
            stats[k_label] = k_model.stats
        selector: Backend = model
        if spec.mode == "adaptive" and spec.selector_model:
            s_label, s_config = spec.resolve_model(spec.selector_model, evaluated=False)
            if (s_label, s_config) != (label, model_config):
                s_model = await stack.enter_async_context(
                    open_backend(s_config, label=s_label, cache=cache)
                )
                selector = s_model
                stats[s_label] = s_model.stats
        observer.watch(stats)
        runtime = LadderRuntime(task, model, knowledge_backend, spec.params, pool, spec.epoch)
        if spec.mode == "adaptive":
            graph = build_adaptive(strategies, runtime, selector)
        else:
            graph = build_ladder(strategies, runtime)
        store.create()
        store.write_json(
            SPEC, SavedSpec(**spec.model_dump(), started_at=datetime.now().isoformat())
        )
        observer.started(spec, len(chosen) * spec.samples_per_task, out)
        try:
            await _climb_all(graph, chosen, spec, task.name, label, store, tally, observer)
        finally:
            store.close()
            store.write_json(SUMMARY, tally.summary())
    summary = tally.summary()
    observer.finished(summary)
    return RunResult(summary=summary, out=out)


async def _climb_all(
    graph: object,
    samples: list[Sample],
    spec: RunSpec,
    dataset: str,
    model: str,
    store: RunStore,
    tally: Tally,
    observer: RunObserver,
) -> None:
    todo: asyncio.Queue[tuple[Sample, int]] = asyncio.Queue()
    for draw in range(spec.samples_per_task):
        for s in samples:
            todo.put_nowait((s, draw))
    done: asyncio.Queue[SampleRecord | None] = asyncio.Queue()
    m = len(spec.strategies)
    penalty = tally.penalty
    adaptive = spec.mode == "adaptive"
    limit = adaptive_recursion_limit(m) if adaptive else recursion_limit(m)

    async def worker() -> None:
        while True:
            try:
                sample, draw = todo.get_nowait()
            except asyncio.QueueEmpty:
                return
            started = time.perf_counter()
            state: LadderState = await graph.ainvoke(  # type: ignore[attr-defined]
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
            if error:
                score = None
            elif adaptive:
                score = adaptive_score(level, iteration, m, penalty)
            else:
                score = hpi_score(level, m, penalty)
            done.put_nowait(
                SampleRecord(
                    sample_id=sample.id,
                    draw=draw,
                    dataset=dataset,
                    model=model,
                    strategies=list(spec.strategies),
                    m=m,
                    penalty=penalty,
                    target=sample.target,
                    mode=spec.mode,
                    resolved_level=level,
                    hpi_score=score,
                    error=error,
                    attempts=attempts,
                    iteration=iteration,
                    selections=selections,
                    wall_s=time.perf_counter() - started,
                )
            )

    async def writer() -> None:
        finished = False
        while not finished:
            batch = [await done.get()]
            while not done.empty():
                batch.append(done.get_nowait())
            finished = batch[-1] is None
            records = [r for r in batch if r is not None]
            if records:
                await store.append(records)
                for r in records:
                    tally.add(r)
                    observer.recorded(r, tally)

    write_task = asyncio.create_task(writer())
    try:
        async with asyncio.TaskGroup() as tg:
            for _ in range(min(spec.concurrency, len(samples) * spec.samples_per_task)):
                tg.create_task(worker())
    except BaseExceptionGroup as group:
        # The first failure (e.g. a rejected API key) says what went wrong; the rest repeat it.
        raise group.exceptions[0] from None
    finally:
        # Finished samples reach the disk even when the run stops early.
        done.put_nowait(None)
        await asyncio.shield(write_task)
