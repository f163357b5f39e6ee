"""One worker of a campaign spread over Ray (``hpt run --ray``): an event loop with its own
backends that climbs the samples the driver hands it and streams their records back.

Nothing here imports Ray: the driver (``hpt.orchestrator.ray_driver``) makes these classes
Ray actors. A worker plans the campaign itself from the spec (the same cells in the same
order as the driver's: checked), so work crosses the wire as (cell, sample id, draw) and
records come back whole; failures come back as values (``Failure``), never as exceptions a
node may not be able to unpickle."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import os
import pickle
import socket
import sys
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import PrivateAttr

from hpt import __version__
from hpt.backends import BackendStats, RateLimitFields
from hpt.backends.errors import FatalBackendError
from hpt.errors import HptError, StorageError, in_chain
from hpt.graphs.listener import attempts_heard_by
from hpt.orchestrator.cells import open_cells
from hpt.orchestrator.models import ResolvedModel
from hpt.orchestrator.planning import CellPlan, generation_params, plan_cells
from hpt.orchestrator.scheduling import START_PACE_S, Climb, climb_sample, climb_together
from hpt.orchestrator.spec import RunSpec
from hpt.plugins import load_plugins
from hpt.results.records import Attempt, Cell, SampleRecord
from hpt.results.runfile import DatasetParams
from hpt.structured.runtime import ProgramStore
from hpt.tasks import Sample

# An attempt heard as it finished (``AttemptWatcher``), without its calls (the record brings
# them): its cell's index in the plan, level, selector iteration, strategy, whether resolved.
Heard = tuple[int, int, int | None, str, bool]
# A work item on the wire: one climb, or a sample's climbs in threshold-sibling cells (run
# together, as the in-process run does): each (cell's index in the plan, sample id, draw).
Item = tuple[tuple[int, str, int], ...]
# A batch of records waits this long for the next ones to land: one message carries many.
LINGER_S = 0.01
# The limits split over the workers: calls in flight, requests and tokens per minute.
RATE_FIELDS = tuple(RateLimitFields.model_fields)


def limit_share(value: int, slot: int, slots: int) -> int:
    """Worker ``slot``'s part of a limit split over ``slots`` workers: the parts add up to
    ``value``, the first ``value % slots`` workers one more than the rest."""
    return value // slots + (1 if slot < value % slots else 0)


class WorkerSpec(RunSpec):
    """The run's spec as one worker of ``slots`` holds it: every model's limits (requests
    and tokens per minute, calls in flight: the run's flags and each model's config) are
    its share, so all workers together keep to the run's."""

    _slot: int = PrivateAttr(0)
    _slots: int = PrivateAttr(1)

    @classmethod
    def of(cls, spec: RunSpec, slot: int, slots: int) -> WorkerSpec:
        worker = cls.model_construct(_fields_set=spec.model_fields_set, **dict(spec))
        worker._slot, worker._slots = slot, slots
        return worker

    def resolve(self, name: str) -> ResolvedModel:
        model = super().resolve(name)
        limits = {f: getattr(model.config, f) for f in RATE_FIELDS}
        shares = {f: limit_share(v, self._slot, self._slots)
                  for f, v in limits.items() if v is not None}  # fmt: skip
        return ResolvedModel(model.label, model.config.model_copy(update=shares))


@dataclass
class Opened:
    """A worker ready to climb: what to say at the start, each dataset's generation
    parameters as its backends send them (run.json's ``generation``) and the labels of the
    backends it opened."""

    notes: list[str]
    generation: dict[str, DatasetParams]
    labels: list[str]


@dataclass
class Landed:
    """Records finished since the last batch (as samples.jsonl holds them: JSON crosses in
    a fifth of the time Ray's pickling of a record takes), the attempts heard meanwhile
    (before their records) and the worker's backend counters now."""

    records: list[str]
    attempts: list[Heard] = field(default_factory=list)
    stats: dict[str, BackendStats] = field(default_factory=dict)


@dataclass
class Failure:
    """What stopped a worker, carried as data: the driver raises ``error()``, the same
    exception (a storage fault rebuilt as one) or, for one that cannot cross, its message."""

    message: str
    pickled: bytes | None = None
    # A storage fault's what, path, errno and reason: it stops the run as the runner says.
    storage: tuple[str, str, int | None, str | None] | None = None

    @classmethod
    def of(cls, exc: BaseException) -> Failure:
        fault = in_chain(exc, StorageError)
        if fault is not None:
            cause = fault.cause
            return cls(str(fault), storage=(fault.what, str(fault.path), cause.errno,
                                            cause.strerror))  # fmt: skip
        try:
            pickled = pickle.dumps(exc)
            pickle.loads(pickled)  # an exception whose __init__ its args do not fit fails here
        except Exception:
            pickled = None
        return cls(str(exc) or type(exc).__name__, pickled)

    def error(self) -> BaseException:
        if self.storage is not None:
            what, path, errno, reason = self.storage
            return StorageError(what, Path(path), OSError(errno, reason))
        if self.pickled is not None:
            exc: BaseException = pickle.loads(self.pickled)
            return exc
        return FatalBackendError(self.message)


async def _caught(step: Awaitable[Opened]) -> Opened | Failure:
    try:
        return await step
    except Exception as exc:
        return Failure.of(exc)


class CampaignWorker:
    """A Ray actor's body: ``open`` plans the campaign and opens its backends; then ``feed``
    hands it items, ``climb`` streams their records back as they land and ``stop`` closes
    it."""

    def __init__(self, spec: RunSpec, slot: int, slots: int) -> None:
        self._spec = WorkerSpec.of(spec, slot, slots)
        self._stack = contextlib.AsyncExitStack()
        self._plans: list[CellPlan] = []
        self._samples: list[dict[str, Sample]] = []
        self._queues: dict[str, asyncio.Queue[list[Climb] | None]] = {}
        self._landed: asyncio.Queue[SampleRecord | Heard | None] = asyncio.Queue()
        self._hear = False
        self._climbing: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._stats: dict[str, BackendStats] = {}

    def where(self) -> tuple[str, str, str]:
        """The node this worker runs on (Ray's id, its address) and its hpt version."""
        import ray  # in a Ray worker: it is installed

        node = ray.get_runtime_context().get_node_id()
        return node, ray.util.get_node_ip_address(), __version__  # type: ignore[no-untyped-call]

    async def open(
        self, cells: list[Cell], local_server: str | None, hear: bool
    ) -> Opened | Failure:
        """Plan and open the cells; ``cells`` are the driver's, which these must be. With
        ``hear``, each attempt is sent back as it finishes (the driver's observer hears
        them)."""
        self._hear = hear
        return await _caught(self._open(cells, local_server))

    async def _open(self, cells: list[Cell], local_server: str | None) -> Opened:
        if local_server is not None:  # its node's: --model local calls it
            from hpt.backends.local import SERVER_ENV

            os.environ[SERVER_ENV] = local_server
        spec = self._spec
        # What the driver loaded: installed plugins, then the run's (importable here too).
        load_plugins(spec.plugins)
        self._plans = await plan_cells(spec)
        mine = [p.cell for p in self._plans]
        if mine != cells:
            raise HptError(
                f"a worker on {socket.gethostname()} planned other cells than the driver "
                "(its datasets or plugins differ): every node needs the same hpt, plugins and "
                "data (--data-dir or the hub)"
            )
        self._samples = [{s.id: s for s in p.samples} for p in self._plans]
        # Optimised DSPy programs are refused with --ray; given ones load from their files.
        programs = ProgramStore(None, spec.programs)
        opened = await open_cells(spec, self._plans, self._stack, programs)
        self._stats = opened.backends.stats
        models = dict.fromkeys(p.model_name for p in self._plans)
        self._queues = {name: asyncio.Queue() for name in models}
        self._climbing = asyncio.create_task(self._climb_all())
        self._climbing.add_done_callback(lambda _: self._landed.put_nowait(None))
        return Opened(opened.notes, generation_params(self._plans), list(self._stats))

    def feed(self, items: list[Item]) -> None:
        for item in items:
            climbs = []
            for index, sample_id, draw in item:
                plan = self._plans[index]
                sample = self._samples[index].get(sample_id)
                if sample is None:  # the stream ends with this failure
                    where = socket.gethostname()
                    self._fail(HptError(f"{plan.cell.title}: no sample {sample_id!r} on {where}: "
                                        "every node needs the same data"))  # fmt: skip
                    return
                climbs.append((plan, sample, draw))
            self._queues[climbs[0][0].model_name].put_nowait(climbs)

    def _fail(self, exc: BaseException) -> None:
        self._error = self._error or exc
        if self._climbing is not None:
            self._climbing.cancel()

    async def climb(self) -> AsyncIterator[Landed | Failure]:
        """The records as they land, in batches; a ``Failure`` last if climbing failed."""
        ended = False
        while not ended:
            batch = [await self._landed.get()]
            if batch[0] is not None:
                await asyncio.sleep(LINGER_S)  # what lands meanwhile goes in the same message
            while not self._landed.empty():
                batch.append(self._landed.get_nowait())
            ended = batch[-1] is None
            records = [r.model_dump_json() for r in batch if isinstance(r, SampleRecord)]
            heard = [h for h in batch if isinstance(h, tuple)]
            if records or heard:
                yield Landed(records, heard, {k: copy.copy(v) for k, v in self._stats.items()})
        climbing = self._climbing
        if self._error is None and climbing is not None and not climbing.cancelled():
            self._error = climbing.exception()
        if self._error is not None:
            yield Failure.of(self._error)

    async def stop(self) -> None:
        """Cancel the climbs in flight and close the backends (the response cache's last
        writes included)."""
        if self._climbing is not None:
            self._climbing.cancel()
            with contextlib.suppress(BaseException):
                await self._climbing
        await self._stack.aclose()

    async def _climb_all(self) -> None:
        """``--concurrency`` climbers per evaluated model, as in one process, each taking
        the next item of its model's queue."""
        spec = self._spec
        index = {id(p): i for i, p in enumerate(self._plans)}

        def heard(plan: CellPlan, attempt: Attempt) -> None:
            self._landed.put_nowait((index[id(plan)], attempt.level, attempt.iteration,
                                     attempt.strategy, attempt.resolved))  # fmt: skip

        async def climb(plan: CellPlan, sample: Sample, draw: int) -> None:
            with attempts_heard_by(functools.partial(heard, plan) if self._hear else None):
                record = await climb_sample(plan, sample, draw)
            self._landed.put_nowait(record)

        async def climber(queue: asyncio.Queue[list[Climb] | None], start_after: float) -> None:
            await asyncio.sleep(start_after)
            while (climbs := await queue.get()) is not None:
                if len(climbs) == 1:
                    await climb(*climbs[0])
                else:
                    await climb_together([climb(*c) for c in climbs])

        try:
            async with asyncio.TaskGroup() as tg:
                for queue in self._queues.values():
                    for i in range(spec.concurrency):
                        tg.create_task(climber(queue, i * START_PACE_S))
        except BaseExceptionGroup as group:
            raise group.exceptions[0] from None


class NodeServer:
    """The embedded model server of one node, shared by the workers there (a Ray actor
    pinned to the node). A detached process runs it and stops it when its stdin closes, so
    the server dies with this actor however the actor ends (Ray kills a dead worker's
    children at once, which would leave their own children, the server, running)."""

    def __init__(self, slots: int) -> None:
        self._slots = slots
        self._proc: asyncio.subprocess.Process | None = None
        self._url: str | None = None
        self._lock = asyncio.Lock()

    async def url(self) -> str | Failure:
        async with self._lock:
            if self._url is None:
                try:
                    self._url = await self._start()
                except Exception as exc:
                    return Failure.of(exc)
            return self._url

    async def _start(self) -> str:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hpt.orchestrator.ray_worker", str(self._slots),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert self._proc.stdout is not None and self._proc.stderr is not None
        line = (await self._proc.stdout.readline()).decode().strip()
        if not line:
            error = (await self._proc.stderr.read()).decode(errors="replace").strip()
            raise FatalBackendError(error.splitlines()[-1] if error else "the server exited")
        return line

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.stdin is not None and proc.stdout is not None:
            proc.stdin.close()
            await proc.stdout.read()  # the end of its output: it has stopped the server
            await proc.wait()


async def _serve_until_stdin_closes(slots: int) -> None:
    """``python -m hpt.orchestrator.ray_worker SLOTS``: start the embedded server, print its
    base URL, serve until stdin closes (the node actor stopped or died), then stop it."""
    from hpt.backends.local import embedded_server, slots_for

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with embedded_server(slots_for(slots)) as url:
        print(url, flush=True)
        await reader.read()


if __name__ == "__main__":
    # Detached (a new session, then a fork whose parent exits at once): out of the actor's
    # process tree, so Ray's kill of the actor's children does not reach it.
    os.setsid()
    if os.fork():
        os._exit(0)
    try:
        asyncio.run(_serve_until_stdin_closes(int(sys.argv[1])))
    except HptError as exc:
        sys.exit(f"hpt: error: {exc}")
