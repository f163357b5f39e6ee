"""A campaign spread over Ray workers (``hpt run --ray [ADDRESS] --workers N``).

The driver plans the campaign, reads a resume back, writes run.json and is the only writer of
the run store, as in one process; the climbs run in N Ray actors (``ray_worker``), each an
event loop with its own backends. Work goes out in small chunks on demand (a fast worker takes
more), a sample's threshold-sibling climbs together and the samples of one shard key
(``Task.shard_key``) to one worker; records stream back as they land. A worker that dies is
replaced and its unfinished samples go to the others (a sample in flight at two deaths is
recorded as errored); a record whose climb was already recorded is dropped, so none is
written twice.

Rate limits hold for the whole run: each worker keeps an equal share of every model's
requests and tokens per minute and calls in flight (``WorkerSpec``), a replacement the dead
one's share, starting once the minute the dead one may have used is over. ``--concurrency``
is each worker's, as one process's: N workers keep N times as many samples in flight."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import dataclasses
import itertools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from hpt import __version__
from hpt.backends import BackendStats, FatalBackendError
from hpt.graphs import STRATEGIES, ladder_strategies
from hpt.orchestrator.observer import AttemptWatcher, RunObserver, WorkerStats, WorkerWatcher
from hpt.orchestrator.planning import CellPlan
from hpt.orchestrator.ray_worker import (
    CampaignWorker,
    Failure,
    Heard,
    Item,
    Landed,
    NodeServer,
    Opened,
)
from hpt.orchestrator.scheduling import RecordSink, interleave, outlast_cancellation
from hpt.orchestrator.spec import ConfigError, RunSpec
from hpt.results.records import RECORD_KINDS, Attempt, SampleRecord, parse_record_json
from hpt.results.runfile import DatasetParams

RAY_HINT = "--ray needs Ray: pip install 'hpt[ray]'"
# How long connecting to Ray (or starting a local one) may take: Ray retries an address
# that does not answer for many minutes, in a call that hears no Ctrl-C.
CONNECT_S = 60.0
# What each worker holds handed out and not yet recorded, in units of its climbers (its
# --concurrency for each evaluated model): enough that it never waits for the next chunk,
# little enough that at the end no worker sits on work another could take.
BACKLOG = 2
# Work goes out in chunks of this share of a worker's climbers: one message per chunk.
CHUNK = 0.5
# Times one worker's place may be refilled after its worker died before the run stops.
MAX_RESTARTS = 3
# Deaths of its worker after which a unit of work is recorded as errored (a later --resume
# tries it again): a sample that kills whatever runs it would stop the run. After its
# first, a unit runs as its worker's one suspect, so another death is its own.
DEATHS = 2
# A replacement starts once the dead worker's last minute is over: its per-minute share
# may all have been used in it.
LIMIT_WINDOW_S = 60.0
# How long a worker may take to close its backends at the end (a Ctrl-C: a little).
CLOSE_S, CLOSE_CANCELLED_S = 30.0, 5.0
RATE_FLAGS = {"max_concurrency": "calls in flight (--max-concurrency)",
              "requests_per_minute": "requests per minute (--rpm)",
              "tokens_per_minute": "tokens per minute (--tpm)"}  # fmt: skip


def check_ray(spec: RunSpec, plans: Sequence[CellPlan]) -> None:
    """Refuse, before anything is written, what a run cannot do over Ray workers."""
    import_ray()
    if spec.batch:
        raise ConfigError(
            "--batch does not run with --ray: a provider batch gathers the calls of one "
            "process and is kept in the run directory, which the workers do not share; run "
            "batch mode without --ray"
        )
    for flag, value in (("--budget-usd", spec.budget_usd), ("--max-calls", spec.max_calls)):
        if value is not None:
            raise ConfigError(
                f"{flag} does not run with --ray: a budget is kept by the one process that "
                "sees every call before it is sent, and workers on other nodes cannot share "
                "it; run without --ray, or without a budget"
            )
    for p in plans:
        for name in ladder_strategies(p.strategies, p.args):
            given = name in spec.programs or f"{name}:{p.cell.dataset}" in spec.programs
            if STRATEGIES[name].needs.program and not given:
                raise ConfigError(
                    f"{name} runs with --ray only from a saved program: it makes one program "
                    "a cell's samples share, and each worker would make its own (the run "
                    "directory would keep none); run it without --ray, then give the program "
                    f"it saved: --program {name}=RUN/programs/FILE.json"
                )


def _errored(plan: CellPlan, sample_id: str, draw: int, error: str) -> SampleRecord:
    """The record of a climb that could not finish (no attempt kept), as ``climb_sample``
    writes one that ended in an error."""
    sample = next(s for s in plan.samples if s.id == sample_id)
    kind = RECORD_KINDS.get(plan.task.record_kind or "", SampleRecord)
    return kind(
        **plan.task.record_extras(sample, []), **dataclasses.asdict(plan.cell),
        sample_id=sample_id, draw=draw, strategies=list(plan.strategies),
        m=len(plan.strategies), penalty=plan.tally.penalty, target=sample.target,
        resolved_level=None, hpi_score=None, options=plan.task.answer_options(sample),
        error=error,
    )  # fmt: skip


def import_ray() -> Any:
    """Ray, imported now (it is an extra, and slow to import)."""
    # hpt sends no usage statistics on a user's behalf (Ray's default is to).
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError:
        raise ConfigError(RAY_HINT) from None
    return ray


async def connect(ray: Any, address: str | None, held: threading.Event) -> None:
    """``ray.init`` (Ray at ``address``; None: RAY_ADDRESS's, else a new local one), off the
    event loop and within ``CONNECT_S``; a failure is one line saying what to check. The
    thread that called it waits for ``held`` to be set: Ray's processes started for a local
    Ray die with the thread that started them (Linux's parent-death signal is a thread's)."""
    loop = asyncio.get_running_loop()
    connected: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if connected.done():  # given up on already
            return
        if error is None:
            connected.set_result(None)
        else:
            connected.set_exception(error)

    def init() -> None:
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.ERROR)  # fmt: skip
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, exc)
            return
        loop.call_soon_threadsafe(settle, None)
        held.wait()

    # A daemon thread, not asyncio.to_thread: the process must be able to exit (the error
    # said, or Ctrl-C) while Ray still retries in it.
    threading.Thread(target=init, name="hpt-ray-init", daemon=True).start()
    errors = (ConnectionError, TimeoutError, RuntimeError, ValueError, ray.exceptions.RayError)
    try:
        await asyncio.wait_for(connected, CONNECT_S)
    except errors as exc:
        if isinstance(exc, TimeoutError):
            why = f"no answer within {CONNECT_S:g} s"
        else:  # Ray's first sentence (its next ones name flags of its own CLI)
            why = str(exc).strip().splitlines()[0].split(". ")[0].rstrip(".")
        where = (f"--ray {address}" if address
                 else f"RAY_ADDRESS={os.environ['RAY_ADDRESS']}" if os.environ.get("RAY_ADDRESS")
                 else "a local Ray started for this run")  # fmt: skip
        raise ConfigError(
            f"cannot connect to Ray ({where}): {why}; check that the cluster is up (ray status "
            "on its head node) and reachable from here, and that --ray ADDRESS or RAY_ADDRESS "
            "names its head node as HOST:PORT (or auto: the Ray started on this machine)"
        ) from None


@dataclass
class _Slot:
    """One worker's place: the worker in it now, and the items handed to it."""

    index: int
    stats: WorkerStats
    actor: Any = None
    # Which worker holds the place now: events from one it replaced are dropped.
    incarnation: int = 1
    ready: bool = False
    outstanding: set[int] = field(default_factory=set)
    # The one unit it holds that was in flight when a worker died (``DEATHS``).
    suspect: int | None = None
    backends: dict[str, BackendStats] = field(default_factory=dict)
    died_at: float | None = None
    reader: asyncio.Task[None] | None = None


@dataclass
class _Died:
    reason: str


@dataclass
class _Ready:
    opened: Opened


class _Ended:
    pass


Event = Landed | Failure | _Died | _Ready | _Ended


class WorkersLost(FatalBackendError):
    """A worker's place emptied more than ``MAX_RESTARTS`` times: the run stops."""


class RayCampaign:
    """``async with RayCampaign(spec, plans, observer) as campaign: await
    campaign.climb(store)``: connects to Ray (or starts it), opens the workers (an error
    opening stops the run before any record, as in one process), climbs every plan's
    ``todo``, and stops the workers on the way out (Ctrl-C too)."""

    def __init__(self, spec: RunSpec, plans: list[CellPlan], observer: RunObserver) -> None:
        check_ray(spec, plans)
        self.spec, self.plans, self.observer = spec, plans, observer
        # What the first worker opened says (as ``open_cells`` does in one process).
        self.notes: list[str] = []
        self.generation: dict[str, DatasetParams] = {}
        # Every worker's backends summed, by label (the progress display's).
        self.stats: dict[str, BackendStats] = {}
        self.workers: dict[str, WorkerStats] = {}
        self.duplicates = 0  # records dropped: their climb was already recorded
        self._ray: Any = None
        self._connected = False
        self._held = threading.Event()  # set once Ray is shut down (``connect``)
        self._slots: list[_Slot] = []
        self._servers: dict[str, Any] = {}  # embedded model server by node
        self._retired: dict[str, BackendStats] = {}  # dead workers' counters
        self._tasks: set[asyncio.Task[None]] = set()
        self._events: asyncio.Queue[tuple[_Slot, int, Event]] = asyncio.Queue()
        self._local = any(spec.resolve(m).config.provider == "local" for m in spec.model_names())
        # An observer that hears attempts hears the workers' (the levels of slow climbs).
        self._hears = isinstance(observer, AttemptWatcher)

    async def __aenter__(self) -> RayCampaign:
        ray = self._ray = import_ray()
        if not ray.is_initialized():
            await connect(ray, self.spec.ray or None, self._held)
            self._connected = True
        try:
            await self._open()
        except BaseException:
            await self._close(cancelled=True)
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._close(cancelled=kind is not None)

    # -- opening ---------------------------------------------------------------------------

    async def _open(self) -> None:
        ray, spec = self._ray, self.spec
        cpus = int(ray.cluster_resources().get("CPU", 1))
        n = spec.workers or max(1, cpus)
        self._check_shares(n)
        # Fractions of a CPU where there are more workers than CPUs: all of them start.
        self._cpus = max(0.0001, min(1.0, int(cpus / n * 10_000) / 10_000))
        self._slots = [_Slot(i, WorkerStats(f"worker {i + 1}")) for i in range(n)]
        self.workers = {s.stats.name: s.stats for s in self._slots}
        if isinstance(self.observer, WorkerWatcher):
            self.observer.watch_workers(self.workers)
        nodes = await asyncio.gather(*(self._place(s) for s in self._slots))
        servers = {node: sum(1 for n in nodes if n == node) for node in set(nodes)}
        urls = await asyncio.gather(*(self._server(s, servers[s]) for s in servers))
        url_of = dict(zip(servers, urls, strict=True))
        placed = zip(self._slots, nodes, strict=True)
        opened = await asyncio.gather(*(self._open_slot(s, url_of[n]) for s, n in placed))
        first = opened[0]
        self.notes, self.generation = first.notes, first.generation
        self.stats = {label: BackendStats() for label in first.labels}

    def _check_shares(self, n: int) -> None:
        """Every model's limits split over ``n`` workers: each must keep at least one."""
        for name in self.spec.model_names():
            model = self.spec.resolve(name)
            for limit, what in RATE_FLAGS.items():
                value = getattr(model.config, limit)
                if value is not None and value < n:
                    raise ConfigError(
                        f"{model.label}: {value} {what} cannot be split over {n} workers (each "
                        f"keeps a share of the run's limits); give --workers {value} or fewer"
                    )

    async def _place(self, slot: _Slot) -> str:
        """Start a worker in ``slot``; the node it landed on."""
        worker = self._ray.remote(CampaignWorker).options(
            # Named, so a test (or an operator) can find it: ray.util.list_named_actors().
            name=f"hpt-worker-{slot.index + 1}.{slot.incarnation}",
            num_cpus=self._cpus, scheduling_strategy="SPREAD", max_restarts=0,
        )  # fmt: skip
        slot.actor = worker.remote(self.spec, slot.index, len(self._slots))
        node, host, version = await slot.actor.where.remote()
        if version != __version__:
            raise ConfigError(
                f"the worker on {host} runs hpt {version}, this driver hpt {__version__}: "
                "install the same hpt on every node"
            )
        slot.stats.node, slot.stats.state = host, "starting"
        return str(node)

    async def _server(self, node: str, workers: int) -> str | None:
        """The embedded model's server on ``node`` (``--model local``), sized for
        ``workers`` workers' climbs: started once, shared by every worker there."""
        if not self._local:
            return None
        server = self._servers.get(node)
        if server is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            actor = self._ray.remote(NodeServer).options(
                name=f"hpt-embedded-{node}", get_if_exists=True, num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            )  # fmt: skip
            server = self._servers[node] = actor.remote(workers * self.spec.concurrency)
        url = await server.url.remote()
        if isinstance(url, Failure):
            raise url.error()
        return str(url)

    async def _open_slot(self, slot: _Slot, local_server: str | None) -> Opened:
        cells = [p.cell for p in self.plans]
        opened = await slot.actor.open.remote(cells, local_server, self._hears)
        if isinstance(opened, Failure):
            raise opened.error()
        slot.ready = True
        slot.stats.state = "idle"
        self._read(slot)
        return opened  # type: ignore[no-any-return]

    # -- climbing --------------------------------------------------------------------------

    async def climb(self, store: RecordSink) -> bool:
        """Climb every plan's ``todo`` over the workers, each record appended to ``store``
        as it lands, counted in its plan's tally and told to the observer. Returns False:
        no budget stops a run over Ray (``check_ray``)."""
        self._lay_out()
        for slot in self._slots:
            self._dispatch(slot)
        while self._unfinished:
            slot, incarnation, event = await self._events.get()
            if incarnation != slot.incarnation:
                continue  # from a worker already replaced
            if isinstance(event, Landed):
                self._heard(event.attempts)
                records = [parse_record_json(text) for text in event.records]
                writing = asyncio.ensure_future(self._land(slot, records, store))
                await outlast_cancellation(writing)  # a batch half written is no batch
                self._count(slot, event.stats)
                self._dispatch(slot)
            elif isinstance(event, Failure):
                raise event.error()
            elif isinstance(event, _Ready):
                slot.ready, slot.stats.state = True, "idle"
                self._read(slot)
                self._dispatch(slot)
            else:  # died, or its stream ended though work was still to come
                reason = event.reason if isinstance(event, _Died) else "its stream ended"
                await outlast_cancellation(asyncio.ensure_future(self._lost(slot, reason, store)))
        return False

    def _lay_out(self) -> None:
        """The work items: each model's climbs round-robin over its cells (threshold
        siblings together, as in one process), the models' in turn; gathered in units, the
        items of one task's shard key (``Task.shard_key``: DepthQA's component of its graph,
        whose nodes reuse each other's answers), which go to one worker in one chunk."""
        index = {id(p): i for i, p in enumerate(self.plans)}
        per_model = [interleave([p for p in self.plans if p.model_name == m])
                     for m in self.spec.model]  # fmt: skip
        groups = (g for batch in itertools.zip_longest(*per_model) for g in batch if g)
        units: dict[tuple[str, str], list[Item]] = {}
        for group in groups:
            plan, sample, _ = group[0]
            unit = units.setdefault((plan.cell.dataset, plan.task.shard_key(sample)), [])
            unit.append(tuple((index[id(p)], s.id, draw) for p, s, draw in group))
        # Unit u is items _starts[u] to _starts[u + 1], in the order they were laid out.
        self._items: list[Item] = [item for unit in units.values() for item in unit]
        self._starts = list(itertools.accumulate((len(u) for u in units.values()), initial=0))
        self._queue = deque(range(len(units)))
        self._suspects: deque[int] = deque()  # units in flight at a death, to hand out again
        self._deaths: dict[int, int] = {}  # by unit: deaths of the worker holding it
        self._unfinished = len(self._items)
        # The climbs handed out and not yet recorded, by record key (what is not among them
        # was recorded already, or never handed out), and how many each item has left: both
        # kept for the items handed out only.
        self._owner: dict[tuple[object, ...], tuple[int, CellPlan]] = {}
        self._left: dict[int, int] = {}
        self._holder: dict[int, _Slot] = {}
        models = sum(1 for m in per_model if m)
        climbers = self.spec.concurrency * max(1, models)
        self._backlog = max(1, int(BACKLOG * climbers))
        self._chunk = max(1, int(CHUNK * climbers))

    def _unit_of(self, item: int) -> int:
        return bisect.bisect_right(self._starts, item) - 1

    def _unit(self, unit: int) -> range:
        return range(self._starts[unit], self._starts[unit + 1])

    def _dispatch(self, slot: _Slot) -> None:
        """Top ``slot``'s worker up to its backlog from the queue, a chunk at a time (a unit
        goes whole, past the chunk if need be), and with one suspect at a time."""
        if slot.suspect is not None and slot.outstanding.isdisjoint(self._unit(slot.suspect)):
            slot.suspect = None  # recorded
        if slot.ready and slot.suspect is None and self._suspects:
            slot.suspect = self._suspects.popleft()
            items = self._hand_out(slot.suspect, slot)
            slot.actor.feed.remote([self._items[i] for i in items])
        while slot.ready and self._queue:
            room = self._backlog - len(slot.outstanding)
            if room < min(self._chunk, len(self._queue)):
                break  # a whole chunk once there is room for one: fewer, fuller messages
            chunk: list[int] = []
            while self._queue and len(chunk) < min(room, self._chunk):
                chunk += self._hand_out(self._queue.popleft(), slot)
            slot.actor.feed.remote([self._items[i] for i in chunk])
        if slot.ready:
            slot.stats.state = "running" if slot.outstanding else "idle"

    def _hand_out(self, unit: int, slot: _Slot) -> list[int]:
        """The items of ``unit`` not yet recorded, now ``slot``'s."""
        items = [i for i in self._unit(unit) if self._items[i]]
        for item in items:
            if item not in self._left:  # handed out for the first time
                climbs = self._items[item]
                for index, sample_id, draw in climbs:
                    plan = self.plans[index]
                    self._owner[plan.cell.key(sample_id, draw)] = (item, plan)
                self._left[item] = len(climbs)
            slot.outstanding.add(item)
            self._holder[item] = slot
            slot.stats.in_flight += self._left[item]
        return items

    async def _land(self, slot: _Slot, records: list[SampleRecord], store: RecordSink) -> None:
        fresh: list[tuple[SampleRecord, CellPlan]] = []
        for record in records:
            owner = self._owner.pop(record.key, None)
            if owner is None:  # its climb was recorded already (a re-run after a death)
                self.duplicates += 1
                continue
            item, plan = owner
            fresh.append((record, plan))
            self._left[item] -= 1
            holder = self._holder.get(item)
            if holder is not None:
                holder.stats.in_flight -= 1
            if not self._left[item]:
                del self._left[item]
                self._items[item] = ()  # done: kept no longer
                self._unfinished -= 1
                if holder is not None:
                    holder.outstanding.discard(item)
                    del self._holder[item]
        if not fresh:
            return
        await store.append([record for record, _ in fresh])
        slot.stats.samples += len(fresh)
        for record, plan in fresh:
            slot.stats.calls += len(record.all_calls())
            plan.tally.add(record)
            self.observer.recorded(record, plan.tally)

    def _heard(self, attempts: list[Heard]) -> None:
        # A climb run again after its worker died is heard again (what the dead worker sent
        # before dying was already told): the levels tried the progress shows count it
        # twice, rarely and only there; records and tallies count each climb once.
        if not isinstance(self.observer, AttemptWatcher):
            return
        for index, level, iteration, strategy, resolved in attempts:
            attempt = Attempt(level=level, iteration=iteration, strategy=strategy,
                              resolved=resolved)  # fmt: skip
            self.observer.attempted(self.plans[index].tally, attempt)

    def _count(self, slot: _Slot, stats: dict[str, BackendStats]) -> None:
        """The run's backend counters: the dead workers' and each live worker's latest."""
        slot.backends = stats
        for label, total in self.stats.items():
            live = [s.backends[label] for s in self._slots if label in s.backends]
            retired = self._retired.get(label)
            for f in dataclasses.fields(BackendStats):
                values = [getattr(s, f.name) for s in live]
                if f.name == "concurrency":
                    caps = [v for v in values if v is not None]
                    total.concurrency = sum(caps) if caps else None
                    continue
                if f.name != "in_flight" and retired is not None:
                    values.append(getattr(retired, f.name))
                setattr(total, f.name, sum(values))

    async def _lost(self, slot: _Slot, reason: str, store: RecordSink) -> None:
        """``slot``'s worker died: its unfinished units go back for the others, one to a
        worker at a time, or are recorded as errored after ``DEATHS`` deaths; a new worker
        takes its place (and its share of the limits)."""
        for label, stats in slot.backends.items():
            retired = self._retired.setdefault(label, BackendStats())
            for f in dataclasses.fields(BackendStats):
                if f.name not in ("in_flight", "concurrency"):
                    setattr(retired, f.name, getattr(retired, f.name) + getattr(stats, f.name))
        slot.backends = {}
        units = sorted({self._unit_of(item) for item in slot.outstanding})
        for item in slot.outstanding:
            self._holder.pop(item, None)
        slot.outstanding.clear()
        slot.ready, slot.died_at, slot.suspect = False, time.monotonic(), None
        slot.stats.in_flight, slot.stats.state = 0, "dead"
        slot.stats.restarts += 1
        slot.incarnation += 1
        errored = []
        for unit in units:
            deaths = self._deaths[unit] = self._deaths.get(unit, 0) + 1
            if deaths < DEATHS:
                self._suspects.append(unit)
                continue
            error = (f"the worker climbing it died {deaths} times (last: {reason.rstrip('.')}); "
                     "hpt run --resume tries it again")  # fmt: skip
            errored += [_errored(self.plans[index], sample_id, draw, error)
                        for item in self._unit(unit) for index, sample_id, draw in self._items[item]
                        if self.plans[index].cell.key(sample_id, draw) in self._owner]  # fmt: skip
        await self._land(slot, errored, store)
        if slot.stats.restarts > MAX_RESTARTS:
            raise WorkersLost(
                f"{slot.stats.name} died {slot.stats.restarts} times (last: {reason}); "
                f"the run stops; in flight: {self._in_flight(units)}"
            )
        with contextlib.suppress(Exception):
            self._ray.kill(slot.actor, no_restart=True)
        for other in self._slots:
            self._dispatch(other)
        self._start(self._replace(slot))

    def _in_flight(self, units: list[int], shown: int = 10) -> str:
        """The samples of ``units`` not yet recorded, as an error names them."""
        names = dict.fromkeys(f"{self.plans[index].cell.dataset} {sample_id}"
                              for unit in units for item in self._unit(unit)
                              for index, sample_id, _ in self._items[item])  # fmt: skip
        more = f" and {len(names) - shown} more" if len(names) > shown else ""
        return ", ".join(list(names)[:shown]) + more

    async def _replace(self, slot: _Slot) -> None:
        incarnation = slot.incarnation
        try:
            per_minute = any(
                getattr(self.spec.resolve(m).config, f) is not None
                for m in self.spec.model_names()
                for f in ("requests_per_minute", "tokens_per_minute")
            )
            if per_minute and slot.died_at is not None:
                await asyncio.sleep(max(0.0, slot.died_at + LIMIT_WINDOW_S - time.monotonic()))
            node = await self._place(slot)
            url = await self._server(node, 1)
            cells = [p.cell for p in self.plans]
            opened = await slot.actor.open.remote(cells, url, self._hears)
            event: Event = _Ready(opened) if isinstance(opened, Opened) else opened
        except self._ray.exceptions.RayError as exc:
            event = _Died(str(exc).splitlines()[0])
        except Exception as exc:
            event = Failure.of(exc)
        self._events.put_nowait((slot, incarnation, event))

    def _read(self, slot: _Slot) -> None:
        """Stream ``slot``'s records into the event queue."""
        actor, incarnation = slot.actor, slot.incarnation
        errors = self._ray.exceptions

        async def read() -> None:
            event: Event
            try:
                stream = actor.climb.options(num_returns="streaming").remote()
                async for ref in stream:
                    self._events.put_nowait((slot, incarnation, await ref))
                event = _Ended()
            except errors.RayTaskError as exc:  # the worker's own code failed
                event = Failure(str(exc).splitlines()[0])
            except errors.RayError as exc:  # the actor died, or its node
                event = _Died(str(exc).splitlines()[0])
            self._events.put_nowait((slot, incarnation, event))

        self._start(read())

    def _start(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- closing ---------------------------------------------------------------------------

    async def _close(self, cancelled: bool) -> None:
        """Stop every worker (closing its backends, within a bound) and the node servers;
        disconnect from Ray (a Ray this run started stops with it)."""
        ray = self._ray
        try:
            for task in list(self._tasks):
                task.cancel()
            live = [s.actor for s in self._slots if s.actor is not None and s.ready]
            bound = CLOSE_CANCELLED_S if cancelled else CLOSE_S
            with contextlib.suppress(Exception, asyncio.CancelledError):
                stops = asyncio.gather(*(actor.stop.remote() for actor in live))
                await asyncio.wait_for(asyncio.shield(stops), bound)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                servers = asyncio.gather(*(s.stop.remote() for s in self._servers.values()))
                await asyncio.wait_for(asyncio.shield(servers), bound)
        finally:
            for actor in [*(s.actor for s in self._slots), *self._servers.values()]:
                if actor is not None:
                    with contextlib.suppress(Exception):
                        ray.kill(actor, no_restart=True)
            for slot in self._slots:
                slot.ready = False
                if slot.stats.state != "dead":
                    slot.stats.state = "stopped"
            if self._connected:
                ray.shutdown()
                self._held.set()
