"""One run: every cell of the dataset x model x mode matrix, climbed concurrently, each
finished sample appended to the run directory at once. A run can be resumed: finished samples
are read back, counted and skipped."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from hpt import __version__
from hpt.backends.batching import BatchOptions
from hpt.errors import StorageError
from hpt.graphs import (
    resolve_strategies,
)
from hpt.orchestrator.budget import SPEND, Ledger, Spend, open_budget, price_run
from hpt.orchestrator.cells import open_cells
from hpt.orchestrator.estimate import ESTIMATE_MIN, CellCosts, Estimate, project, sample_cost
from hpt.orchestrator.observer import RunObserver, SilentObserver, SpendWatcher
from hpt.orchestrator.penalties import run_penalties
from hpt.orchestrator.planning import (
    CellPlan,
    default_out_dir,
    described,
    generation_params,
    plan_cells,
)
from hpt.orchestrator.resume import FinishedRecords, load_saved_spec, read_back
from hpt.orchestrator.scheduling import climb_all, collector_for_climb, outlast_cancellation
from hpt.orchestrator.spec import ConfigError, RunSpec, SavedSpec
from hpt.results.costs import ModelPrice
from hpt.results.lock import RunLock
from hpt.results.reader import read_records
from hpt.results.rundir import SAMPLES, SPEC, SUMMARY
from hpt.results.runfile import DatasetParams, RunSummary
from hpt.results.store import RunStore
from hpt.results.tally import Summary
from hpt.structured.runtime import ProgramStore


@dataclass
class RunResult:
    out: Path
    summaries: list[Summary]
    complete: bool
    # Each dataset's generation parameters, asked and sent (run.json's ``generation``).
    generation: dict[str, DatasetParams] = field(default_factory=dict)
    # The bound that stopped the run before every sample was recorded ("--budget-usd" or
    # "--max-calls"): it refused a call; None: none did.
    stopped_by: str | None = None
    # The calls the bound refused, and their worst cases together: what a resume asks again
    # at once in batch mode (the response cache answers the calls that led to them).
    refused_calls: int = 0
    refused_usd: float = 0.0
    # What the run has spent in all (spend.json), where it has a budget.
    spend: Spend | None = None
    # The prices the run used, by backend label (run.json's ``prices``); None: it priced
    # nothing.
    prices: dict[str, ModelPrice | None] | None = None
    # ``--estimate N``: the whole run's projected cost from N samples per cell.
    estimate: Estimate | None = None

    @property
    def summary(self) -> Summary:
        """The only cell's summary (a run of one dataset, model and mode)."""
        if len(self.summaries) != 1:
            raise ValueError(f"this run has {len(self.summaries)} cells; read .summaries")
        return self.summaries[0]


async def run_evaluation(
    spec: RunSpec,
    observer: RunObserver | None = None,
    *,
    resume: bool = False,
    retry_errors: bool = True,
    command: list[str] | None = None,
    estimate: int | None = None,
) -> RunResult:
    """Run (or, with ``resume``, continue) every cell of ``spec``.

    With ``estimate`` (N), only N samples of each cell are run (those ``limit`` N would
    choose, every draw of them); the run then stops (``complete`` false) and
    ``RunResult.estimate`` projects the whole run's cost.

    Resuming reads ``spec.out``'s records, skips the samples they cover and, with
    ``retry_errors``, runs again the samples that ended in an error. The run directory is
    locked for the run (one writer). A write that fails (disk full, read-only, I/O error)
    stops the run at once: ``RunStopped`` says what failed, what was kept and how to go on."""
    observer = observer or SilentObserver()
    if estimate is not None and estimate < ESTIMATE_MIN:
        raise ConfigError(
            f"--estimate must be at least {ESTIMATE_MIN}: fewer samples say too little of "
            "how a cell's cost varies for an interval to hold"
        )
    resolve_strategies(spec.strategies)
    spec.check_models()
    # Each dataset's HPI_dataset and its source, fixed now and saved in run.json.
    spec = spec.model_copy(update={"penalties": await asyncio.to_thread(run_penalties, spec)})
    plans = await plan_cells(spec)
    if spec.ray is not None:  # what workers cannot do is refused before anything is written
        from hpt.orchestrator.ray_driver import check_ray  # only runs over Ray load it

        check_ray(spec, plans)
    out = spec.out or default_out_dir(spec)
    # Before anything is read back or written. Taken in the loop, not a thread: a
    # cancellation cannot then come between taking it and the ``finally`` that releases it.
    lock = RunLock.take(out)
    try:
        return await _run_locked(
            spec, plans, out, observer, resume, retry_errors, command, estimate
        )
    finally:
        lock.release()


async def _run_locked(
    spec: RunSpec,
    plans: list[CellPlan],
    out: Path,
    observer: RunObserver,
    resume: bool,
    retry_errors: bool,
    command: list[str] | None,
    estimate: int | None,
) -> RunResult:
    store = RunStore(out)
    # The DSPy strategies' optimised programs (one per dataset x model x strategy).
    programs = ProgramStore(out, spec.programs)
    done = FinishedRecords()
    if resume:
        saved = load_saved_spec(out)
        if saved.hpt_version != __version__:
            # What a version changes (a prompt's wording, a reader's rule) would make the
            # records of one cell come from two behaviours, with nothing in them to say so.
            sys.stderr.write(
                f"hpt: warning: {out} was started by hpt {saved.hpt_version} and is resumed by "
                f"hpt {__version__}; records of both versions will stand in one run (start a "
                "new run to compare like with like)\n"
            )
        by_cell = {p.cell: p for p in plans}
        try:
            # Outlasting a cancellation: the lock is not released while it rewrites the file.
            reading = asyncio.ensure_future(
                asyncio.to_thread(read_back, out, by_cell, retry_errors)
            )
            await outlast_cancellation(reading)
            done = reading.result()
        except StorageError as exc:
            raise RunStopped(exc, out, spec.resume_command(out), kept=None) from None
    else:
        store.check_free()
    # Before any backend opens: a model a budget cannot price is refused first.
    prices = await price_run(spec, saved.prices if resume else {}, estimate=estimate is not None)
    ledger = Ledger(_ledger_writer(store))
    budget = await open_budget(spec, prices or {}, out, ledger, resume=resume)
    for p in plans:
        # --estimate N: the samples --limit N would choose (a seeded choice across the
        # dataset, not its first rows, which may all be one subject), every draw of them.
        run = p.samples if estimate is None else p.task.choose(p.samples, estimate, spec.seed)
        p.todo = [(s, draw) for draw in range(spec.samples_per_task) for s in run
                  if p.cell.key(s.id, draw) not in done]  # fmt: skip
        p.whole = len(run) == len(p.samples)
    total = sum(len(p.samples) for p in plans) * spec.samples_per_task
    complete = budget_spent = False
    async with contextlib.AsyncExitStack() as stack:
        campaign = None
        if spec.ray is not None:  # the climbs run in Ray workers, each opening its own cells
            from hpt.orchestrator.ray_driver import RayCampaign

            campaign = await stack.enter_async_context(RayCampaign(spec, plans, observer))
            stats, notes = campaign.stats, campaign.notes
        else:
            opened = await open_cells(spec, plans, stack, programs, gate=budget,
                                      batch=batch_options(spec, out))  # fmt: skip
            stats, notes = opened.backends.stats, opened.notes
        for note in notes:
            sys.stderr.write(f"hpt: warning: {note}\n")
        observer.watch(stats)
        if budget is not None and isinstance(observer, SpendWatcher):
            observer.watch_spend(budget.spend, spec.budget_usd, spec.max_calls)
        generation = generation_params(plans) if campaign is None else campaign.generation
        now = datetime.now().isoformat(timespec="seconds")
        if resume:
            saved.resumed_at.append(now)
            # What a resume may change and the next resume must keep (a budget raised).
            for name in RESUMED_SETTINGS:
                setattr(saved, name, getattr(spec, name))
            # A run saved before run.json described its tasks gets the descriptions now.
            saved.tasks = {**{p.cell.dataset: described(p.task) for p in plans}, **saved.tasks}
            saved.generation = {**generation, **saved.generation}
            if prices is not None:
                saved.prices = {**_known(prices), **saved.prices}
            store.reopen()
        else:
            saved = SavedSpec(
                # The params object itself: it knows which settings the run gave.
                **{**spec.model_dump(), "params": spec.params},
                started_at=now,
                command=command or [],
                tasks={p.cell.dataset: described(p.task) for p in plans},
                generation=generation,
                prices={} if prices is None else _known(prices),
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
        keeping = None
        if budget is not None:
            keeping = asyncio.create_task(budget.keep_ledger())
        try:
            with collector_for_climb():
                if campaign is None:
                    budget_spent = await climb_all(plans, spec, store, observer)
                else:
                    budget_spent = await campaign.climb(store)
            every = all(p.whole for p in plans)
            complete = every and not budget_spent
        except StorageError as exc:
            faults.append(exc)
        finally:
            if budget is not None and keeping is not None:
                keeping.cancel()
                if budget.fault is not None:
                    faults.append(budget.fault)
                _kept_going(faults, budget.write_ledger)
            result = RunSummary(complete=complete, cells=[p.tally.summary() for p in plans])
            summary_written = _end_run(store, result, programs, faults)
            ended = generation_params(plans) if campaign is None else generation
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
    projected = None
    if estimate is not None:
        projected = await asyncio.to_thread(_estimate, out, plans, spec, prices or {})
    return RunResult(
        out,
        result.cells,
        complete,
        generation=saved.generation,
        stopped_by=budget.refused if budget is not None and budget_spent else None,
        refused_calls=0 if budget is None else budget.refused_calls,
        refused_usd=0.0 if budget is None else budget.refused_usd,
        spend=None if budget is None else budget.spend,
        prices=prices,
        estimate=projected,
    )


def batch_options(spec: RunSpec, out: Path) -> BatchOptions | None:
    """Batch mode's settings (--batch), its journal and results in the run directory."""
    if not spec.batch:
        return None
    return BatchOptions(size=spec.batch_size, wait_s=spec.batch_wait_s,
                        poll_s=spec.batch_poll_s, directory=out)  # fmt: skip


def _known(prices: dict[str, ModelPrice | None]) -> dict[str, ModelPrice]:
    return {label: price for label, price in prices.items() if price is not None}


def _ledger_writer(store: RunStore) -> Callable[[Spend], None]:
    def write(spend: Spend) -> None:
        store.write_json(SPEND, spend)

    return write


def _estimate(
    out: Path, plans: list[CellPlan], spec: RunSpec, prices: dict[str, ModelPrice | None]
) -> Estimate:
    """The whole run's cost projected from the samples recorded (``--estimate``)."""
    costs: dict[Any, list[Any]] = {p.cell: [] for p in plans}
    limits = {p.cell: p.params.max_tokens for p in plans}
    for record in read_records(out, None):
        limit = limits.get(record.cell, spec.params.max_tokens)
        costs.setdefault(record.cell, []).append(sample_cost(record, prices, limit))
    return project(
        CellCosts(p.cell.title, len(p.samples) * spec.samples_per_task, costs[p.cell])
        for p in plans
    )


# Settings a resume may give anew (hpt run --resume DIR --budget-usd X) that run.json then
# keeps, so that the next resume goes on under them; pacing given on resume is not kept.
RESUMED_SETTINGS = ("budget_usd", "max_calls", "batch_poll_s")


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
