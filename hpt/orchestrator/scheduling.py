"""Scheduling the climbs: round-robin over the cells, workers per model, one writer that appends
each finished sample to the store as it lands, and the climb of one sample through its graph."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import itertools
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import asdict
from typing import Any, Protocol

from hpt.backends.errors import BudgetSpent
from hpt.errors import StorageError, in_chain
from hpt.graphs import (
    LadderState,
    recursion_limit,
)
from hpt.graphs.adaptive import adaptive_recursion_limit
from hpt.graphs.listener import attempts_heard_by
from hpt.orchestrator.observer import AttemptWatcher, RunObserver
from hpt.orchestrator.planning import (
    CellPlan,
)
from hpt.orchestrator.spec import RunSpec
from hpt.results.records import RECORD_KINDS, SampleRecord, Selection
from hpt.results.scoring import sample_score, unjudged
from hpt.results.tally import Tally
from hpt.tasks import Sample

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
def collector_for_climb() -> Iterator[None]:
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


class RecordSink(Protocol):
    """Where finished records go, in batches as they land: the run store, or (in a Ray
    worker) the stream back to the driver that writes it."""

    async def append(self, records: list[SampleRecord]) -> None: ...


# One climb: a cell, a sample and a draw. A work item is one or several climbs run together.
Climb = tuple[CellPlan, Sample, int]


def interleave(plans: list[CellPlan]) -> list[list[Climb]]:
    """Round-robin over the cells, so every cell makes progress from the start. The cells
    that differ only by threshold read one evaluation at several thresholds: a sample's
    climbs in them are one work item, run together, so each identical call is asked once
    (the backend shares a request in flight) and every threshold scores the same replies.
    Cells of another reasoning effort or thinking budget ask other calls: never siblings."""
    siblings: dict[tuple[object, ...], list[CellPlan]] = {}
    for p in plans:
        c = p.cell
        key = (c.dataset, p.model_name, c.mode, c.variant, c.reasoning_effort, c.thinking_budget)
        siblings.setdefault(key, []).append(p)
    per_group = []
    for group in siblings.values():
        items: dict[tuple[str, int], list[Climb]] = {}
        for p in group:
            for s, draw in p.todo:
                items.setdefault((s.id, draw), []).append((p, s, draw))
        per_group.append(list(items.values()))
    return [item for batch in itertools.zip_longest(*per_group) for item in batch if item]


async def climb_together(climbs: list[Coroutine[Any, Any, None]]) -> None:
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


def budget_spent(exc: BaseException) -> bool:
    """Whether ``exc`` is the run's budget refusing a call: ``BudgetSpent`` anywhere in its
    chain of causes or in an exception group on it (DSPy and self-consistency's draws may
    wrap it on its way out)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, BudgetSpent):
            return True
        if isinstance(current, BaseExceptionGroup) and any(
            budget_spent(e) for e in current.exceptions
        ):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _workers(plans: list[CellPlan], spec: RunSpec, todo: list[list[Climb]]) -> int:
    """Climbs a model's queue runs at once: ``--concurrency``; in batch mode, where any
    model its cells call is batched (the evaluated one, or only a judge, an extractor...),
    every one: a climb waits on its batch, not on a connection, and a batch gathers the
    requests of every climb waiting (the next level's only once every sample's earlier
    level landed). What bounds memory there is one suspended climb per sample (its graph
    state and prompts), not the limit of calls in flight."""
    if spec.batch and any(b.batched for p in plans for b in p.backends):
        return len(todo)
    return min(spec.concurrency, len(todo))


async def climb_all(
    plans: list[CellPlan], spec: RunSpec, store: RecordSink, observer: RunObserver
) -> bool:
    """Climb every plan's ``todo``, each finished climb recorded as it lands. Whether the
    run's budget stopped it (a call refused): no new climb was started after, those in
    flight went on until they finished or were refused a call themselves, and a climb
    refused is abandoned, not recorded (it runs again on resume)."""
    queues: dict[str, list[list[Climb]]] = {}
    workers: dict[str, int] = {}
    for model_name in spec.model:
        mine = [p for p in plans if p.model_name == model_name]
        items = interleave(mine)
        for p in mine:
            p.todo = []  # the work items hold them now
        if items:
            workers[model_name] = _workers(mine, spec, items)
            # pop() from the end takes the first. Reversed in place, not copied: a work item
            # is freed once taken, so what a run holds for its climbs shrinks as it goes.
            items.reverse()
            queues[model_name] = items
    done: asyncio.Queue[tuple[SampleRecord, Tally] | None] = asyncio.Queue()
    spent = asyncio.Event()

    # An observer that hears attempts (AttemptWatcher) hears each climb's as they finish.
    hear = observer.attempted if isinstance(observer, AttemptWatcher) else None

    async def climb(plan: CellPlan, sample: Sample, draw: int) -> None:
        with attempts_heard_by(functools.partial(hear, plan.tally) if hear else None):
            record = await climb_sample(plan, sample, draw)
        done.put_nowait((record, plan.tally))

    async def worker(todo: list[list[Climb]], start_after: float) -> None:
        await asyncio.sleep(start_after)
        while todo and not spent.is_set():
            climbs = todo.pop()
            try:
                if len(climbs) == 1:
                    await climb(*climbs[0])
                else:
                    await climb_together([climb(*c) for c in climbs])
            except Exception as exc:
                if not budget_spent(exc) or in_chain(exc, StorageError) is not None:
                    raise
                spent.set()  # every worker stops taking new work

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
                for model_name, todo in queues.items():
                    n = workers[model_name]
                    # A batched model's climbs wait on batches: nothing to spread.
                    pace = START_PACE_S if n <= spec.concurrency else 0.0
                    for i in range(n):
                        tg.create_task(worker(todo, i * pace))
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
        await outlast_cancellation(write_task)
    return spent.is_set()


async def outlast_cancellation(task: asyncio.Future[Any]) -> None:
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


async def climb_sample(plan: CellPlan, sample: Sample, draw: int) -> SampleRecord:
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
        **asdict(cell),
        sample_id=sample.id,
        draw=draw,
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
