"""Batch mode (``--batch``): a backend's calls gathered into provider batches.

A climb awaits ``backend.complete(...)`` as always; with batch mode on, the backend hands the
request to its ``BatchCollector`` instead of sending it. The collector queues it, submits the
queue as one provider batch when ``size`` requests wait or ``wait_s`` passed without a new one,
polls its open batches every ``poll_s`` and answers each waiting climb from the results. A
request that failed transiently inside a batch goes into a later one, as the backend's retry
policy allows. Every batch is kept in the run directory (``hpt.backends.batch_journal``), so a
later process follows the batches an earlier one submitted, answers from their saved results,
and never submits a request twice.

No rate limiter holds batched requests back (the provider queues a batch itself), and no retry
policy times the wait for a batch (it may take hours): retries and their time budget apply to
each call to the Batch API (submit, status, results), one by one. A submission that failed
after it may have reached the provider (``SubmitUnsure``) is never simply tried again: where
the provider can find a batch by hpt's id, the retry looks for it first; where it cannot, the
run stops and says how to check."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from hpt.backends.batch_api import BatchAPI, BatchStatus, RequestFailed
from hpt.backends.batch_errors import BatchGone, CannotTell, SubmitUnsure
from hpt.backends.batch_journal import (
    COLLECTED,
    FAILED,
    SUBMITTED,
    SUBMITTING,
    BatchJournal,
    JournalBatch,
    JournalRequest,
    SavedResult,
    close_journal,
    open_journal,
)
from hpt.backends.errors import BackendError, FatalBackendError, TransientError
from hpt.backends.gate import CallGate, prompt_token_bound
from hpt.backends.limits import BackendStats
from hpt.backends.retry import GaveUp, RetryPolicy, call_with_retries
from hpt.types import Completion, GenerationParams, Message

log = logging.getLogger(__name__)

T = TypeVar("T")

# Collected batches whose results are kept parsed in memory (an answer for a key asked again
# is read from its batch's file; the response cache answers most before that).
RESULTS_KEPT = 4
# At the end, how long a submission or a landing under way may take to finish (so the batch's
# id, or its landing, is saved) before it is cancelled.
CLOSE_WAIT_S = 30.0


class BatchOptions(BaseModel):
    """How a run gathers its calls into provider batches."""

    model_config = ConfigDict(extra="forbid")

    size: int = Field(1000, ge=1)  # submit when this many requests wait
    wait_s: float = Field(10.0, ge=0.0)  # or when no new request came for this long
    poll_s: float = Field(30.0, gt=0.0)  # between status checks of submitted batches
    directory: Path  # the run directory: RUN/batches.json and RUN/batches/


@dataclass(eq=False)
class _Request:
    key: str
    prompt_bound: int
    max_tokens: int
    ticket: object  # the gate's reservation, held across attempts until it lands or fails
    queued: float  # wall-clock time it was first queued: a batched call's latency starts here
    attempt: int = 1
    # What to send; None for a request an earlier process submitted that nobody here asked.
    body: tuple[list[Message], GenerationParams] | None = None
    # The answer for the askers in this process (None while nobody waits).
    future: asyncio.Future[Completion] | None = None
    waiting: int = 0
    settled: bool = False  # the gate was told (its reservation released)


@dataclass(eq=False)
class _Batch:
    entry: JournalBatch
    requests: dict[str, _Request]
    # How a try to submit it failed after it may have reached the provider: it may exist.
    unsure: str | None = None


def _retrieve(future: asyncio.Future[Completion]) -> None:
    # A failure nobody awaits any more (its asker left) is not an "unretrieved" one.
    if not future.cancelled():
        future.exception()


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def _now() -> datetime:
    return datetime.now(UTC)


def _size(request: dict[str, Any]) -> int:
    """Bytes of one request in a batch's body (a JSONL line)."""
    return len(json.dumps(request, separators=(",", ":")).encode()) + 1


class BatchCollector:
    """Gathers one backend's requests into provider batches and answers them (see the module).

    Call ``start`` once before ``ask`` (it follows what the journal says is out), ``aclose``
    at the end: it stops polling but never cancels a provider batch, which the next process
    follows."""

    def __init__(
        self,
        api: BatchAPI,
        options: BatchOptions,
        *,
        label: str,
        model: str,
        endpoint: str,
        retry: RetryPolicy,
        stats: BackendStats,
        gate: CallGate | None = None,
        params_of: Callable[[GenerationParams], dict[str, Any] | None] = lambda _: None,
    ) -> None:
        self._api = api
        self._options = options
        self._label = label
        self._model = model
        self._endpoint = endpoint
        self._retry = retry
        self._stats = stats
        self._gate = gate
        # What the transport puts on the wire for params (Completion.params).
        self._params_of = params_of
        self._journal: BatchJournal | None = None
        self._queue: dict[str, _Request] = {}  # waiting to be submitted, oldest first
        self._last_added = 0.0
        self._added = asyncio.Event()
        self._open: dict[str, _Batch] = {}  # submitting or submitted, by local id
        self._inflight: dict[str, _Request] = {}  # the requests of open batches, by key
        # Keys in collected batches (newest last), and those answered in this process: the
        # first answer of a key is its paid one, any later one was no call.
        self._saved_in: dict[str, list[str]] = {}
        self._used: set[str] = set()
        self._results: OrderedDict[str, dict[str, SavedResult]] = OrderedDict()
        self._done = (0, 0)  # batches, requests
        self._sender: asyncio.Task[None] | None = None
        self._poller: asyncio.Task[None] | None = None
        # Submissions and landings under way: ``aclose`` lets them finish (bounded).
        self._busy: set[asyncio.Task[None]] = set()
        # The keys of batches this process stopped following, which may still be out, and
        # why: asked again, they fail so (a later process follows the batch).
        self._abandoned: dict[str, BaseException] = {}
        self._closing = False

    # -- start and end -----------------------------------------------------------------
    async def start(self) -> None:
        """Read the journal; follow this backend's batches that are still out."""
        journal = self._journal = await open_journal(self._options.directory)
        for entry in list(journal.batches.values()):
            mine = (entry.backend, entry.provider, entry.model, entry.endpoint)
            if mine != (self._label, self._api.provider, self._model, self._endpoint):
                continue
            if not journal.claim(entry.local_id):
                continue
            if entry.done:
                self._remember_done(entry)
            elif entry.id is not None or await self._found(entry):
                self._follow(entry)
        self._publish()
        if self._open:
            self._ensure_poller(at_once=True)

    async def _found(self, entry: JournalBatch) -> bool:
        """A batch the journal saw to submission but not back: killed between the two. The
        provider is asked for the batch carrying its local id, made since the journal entry.
        OpenAI keeps hpt's local id as the batch's metadata and finds it, unless the batches
        made since are too many to read (then it cannot tell); Anthropic keeps no metadata
        and cannot say. Where it cannot tell, these keys are asked again, with a warning: a
        batch that was created just before the kill is then paid twice."""
        provider = self._api.provider
        unknown = None if self._api.can_find else f"{provider} cannot find a batch by hpt's id"
        found = None
        try:
            found = await self._call(lambda: self._api.find(entry.local_id, entry.created))
        except GaveUp as exc:
            raise FatalBackendError(
                f"cannot tell whether batch {entry.local_id} was submitted ({exc.last}); "
                "resume the run when the provider answers"
            ) from exc
        except CannotTell as exc:
            unknown = str(exc)
        if found is None:
            entry.state, entry.ended = FAILED, _now()
            entry.error = "not submitted: the provider holds no batch by this local id"
            if unknown is not None:
                entry.error = f"unknown: {unknown}"
                log.warning(
                    "hpt: warning: %s: batch %s was being submitted when an earlier process "
                    "stopped, and %s; its %d request(s) are asked again (if that batch reached "
                    "%s, they are paid twice)",
                    self._label, entry.local_id, unknown, len(entry.requests), provider,
                )  # fmt: skip
            await self._save(entry)
            self._remember_done(entry)
            return False
        entry.id, entry.state = found, SUBMITTED
        await self._save(entry)
        return True

    def _remember_done(self, entry: JournalBatch) -> None:
        for r in entry.requests:
            self._saved_in.setdefault(r.key, []).append(entry.local_id)
        batches, requests = self._done
        self._done = (batches + 1, requests + len(entry.requests))

    def _follow(self, entry: JournalBatch) -> None:
        """Wait for a batch an earlier process submitted. Its requests were sent: the gate
        reserves them whatever the budget says (``must``)."""
        batch = _Batch(entry, {})
        for r in entry.requests:
            ticket = self._admit(r.prompt_bound, r.max_tokens, must=True)
            req = _Request(r.key, r.prompt_bound, r.max_tokens, ticket,
                           entry.created.timestamp(), r.attempt)  # fmt: skip
            batch.requests[r.key] = req
            self._inflight[r.key] = req
        self._open[entry.local_id] = batch

    async def aclose(self) -> None:
        """Stop sending and polling. A submission or a landing under way may finish first
        (for up to ``CLOSE_WAIT_S``), so the journal keeps the batch's id or its landing;
        requests never submitted are released; submitted batches go on at the provider,
        for the next process to collect."""
        self._closing = True
        await _cancel([t for t in (self._sender, self._poller) if t is not None])
        if self._busy:
            sending = [i for i, b in self._open.items() if b.entry.id is None]
            if sending:  # (a Ctrl-C would otherwise seem to hang, unexplained)
                log.warning(
                    "hpt: %s: waiting up to %.0f s for %s to finish so %s not sent twice",
                    self._label, CLOSE_WAIT_S,
                    f"batch {sending[0]}'s submission" if len(sending) == 1
                    else f"the submissions of batches {', '.join(sending)}",
                    "it is" if len(sending) == 1 else "they are",
                )  # fmt: skip
            _, late = await asyncio.wait(set(self._busy), timeout=CLOSE_WAIT_S)
            await _cancel(list(late))  # a batch left "submitting": the next process asks
        for req in self._queue.values():
            self._settle(req, None)
        self._queue.clear()
        self._publish()
        if self._journal is not None:
            close_journal(self._journal)
            self._journal = None

    # -- asking ------------------------------------------------------------------------
    async def ask(self, key: str, messages: list[Message], params: GenerationParams) -> Completion:
        """The completion for ``key``: from a collected batch, the batch it is already in, or
        a new one. ``BudgetSpent`` when the gate refuses it (nothing is queued);
        ``BackendError`` when it failed for good."""
        if self._journal is None:
            raise FatalBackendError("batch mode used before start()")
        req = self._pending(key)
        if req is None:
            saved = await self._saved(key)
            req = self._pending(key)  # asked meanwhile?
            # A collected answer serves its key's first ask in this process (the paid answer
            # a climb cut short never received). A later ask of a key already answered here
            # is a new request, as a direct call is: the response cache, when on, answers
            # such repeats before they get here; off, none is answered from the past.
            if req is None and saved is not None and key not in self._used:
                self._used.add(key)
                return self._answer(saved, params, cached=False)
            if req is None:
                if key in self._abandoned:  # it may still be out: never sent twice
                    raise self._abandoned[key]
                req = self._enqueue(key, messages, params)
        if req.body is None:
            req.body = (messages, params)
        return await self._wait(req)

    def _pending(self, key: str) -> _Request | None:
        return self._queue.get(key) or self._inflight.get(key)

    async def _saved(self, key: str) -> Completion | None:
        """The completion a collected batch holds for ``key``, if any (a failure is none)."""
        for local_id in reversed(self._saved_in.get(key, ())):
            results = self._results.get(local_id)
            if results is None:
                assert self._journal is not None
                results = await self._journal.read_results(local_id)
                self._keep(local_id, results)
            saved = results.get(key)
            if saved is not None and saved.completion is not None:
                return saved.completion
        return None

    def _keep(self, local_id: str, results: dict[str, SavedResult]) -> None:
        self._results[local_id] = results
        self._results.move_to_end(local_id)
        while len(self._results) > RESULTS_KEPT:
            self._results.popitem(last=False)

    def _answer(
        self, completion: Completion, params: GenerationParams, *, cached: bool
    ) -> Completion:
        return completion.model_copy(
            update={"batched": True, "cached": cached, "params": self._params_of(params)}
        )

    def _admit(self, prompt_bound: int, max_tokens: int, *, must: bool = False) -> object:
        if self._gate is None:
            return None
        return self._gate.admit(self._label, prompt_bound, max_tokens, batched=True, must=must)

    def _settle(self, req: _Request, completion: Completion | None) -> None:
        if self._gate is not None and not req.settled:
            req.settled = True
            self._gate.settle(req.ticket, completion)

    def _enqueue(self, key: str, messages: list[Message], params: GenerationParams) -> _Request:
        bound = prompt_token_bound(messages)
        ticket = self._admit(bound, params.max_tokens)  # BudgetSpent: nothing queued
        req = _Request(key, bound, params.max_tokens, ticket, time.time(), body=(messages, params))
        self._queue[key] = req
        self._added_one()
        return req

    def _added_one(self) -> None:
        self._last_added = time.monotonic()
        self._added.set()
        if self._closing:
            return  # released by aclose
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_loop(), name="hpt-batch-sender")
        self._publish()

    async def _wait(self, req: _Request) -> Completion:
        if req.future is None:
            req.future = asyncio.get_running_loop().create_future()
            req.future.add_done_callback(_retrieve)
        future = req.future
        req.waiting += 1
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            req.waiting -= 1
            if req.waiting == 0 and not future.done():
                if self._queue.get(req.key) is req:  # not sent yet: withdrawn, released
                    del self._queue[req.key]
                    self._settle(req, None)
                    self._publish()
                req.future = None  # its result, if it comes, is kept for a later ask
                future.cancel()
            raise

    # -- submitting --------------------------------------------------------------------
    async def _send_loop(self) -> None:
        """Submit the queue when ``size`` requests wait, or ``wait_s`` after the last one."""
        while True:
            if not self._queue:
                self._added.clear()
                await self._added.wait()
                continue
            if len(self._queue) >= self._options.size:
                self._flush(self._options.size)
                continue
            delay = self._last_added + self._options.wait_s - time.monotonic()
            if delay <= 0:
                self._flush(len(self._queue))
                continue
            self._added.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._added.wait(), delay)

    def _flush(self, n: int) -> None:
        """Submit the ``n`` oldest waiting requests, in as many batches as the API's limits
        need."""
        taken = [self._queue.pop(key) for key in list(self._queue)[:n]]
        chunk: list[tuple[_Request, dict[str, Any]]] = []
        size = 0
        for req in taken:
            assert req.body is not None  # only asked requests are queued
            try:
                body = self._api.request(req.key, *req.body)
            except Exception as exc:  # a setting the provider's batch cannot carry
                self._fail(req, exc)
                continue
            grown = size + _size(body)
            if chunk and (len(chunk) >= self._api.max_requests or grown > self._api.max_bytes):
                self._start_submit(chunk)
                chunk, grown = [], _size(body)
            chunk.append((req, body))
            size = grown
        if chunk:
            self._start_submit(chunk)

    def _start_submit(self, chunk: list[tuple[_Request, dict[str, Any]]]) -> None:
        entry = JournalBatch(
            local_id=f"{_now():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}",
            provider=self._api.provider,
            backend=self._label,
            model=self._model,
            endpoint=self._endpoint,
            state=SUBMITTING,
            created=_now(),
            requests=[JournalRequest(key=r.key, prompt_bound=r.prompt_bound,
                                     max_tokens=r.max_tokens, attempt=r.attempt)
                      for r, _ in chunk],
        )  # fmt: skip
        batch = _Batch(entry, {r.key: r for r, _ in chunk})
        self._open[entry.local_id] = batch
        self._inflight.update(batch.requests)
        self._publish()
        bodies = [body for _, body in chunk]
        self._keep_busy(self._submit(batch, bodies), "hpt-batch-submit")

    def _keep_busy(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run ``work`` as a task ``aclose`` lets finish: cancelling whoever awaits it
        does not cut it short."""
        task = asyncio.create_task(work, name=name)
        self._busy.add(task)
        task.add_done_callback(self._busy.discard)
        return task

    async def _submit(self, batch: _Batch, bodies: list[dict[str, Any]]) -> None:
        entry = batch.entry
        try:
            await self._save(entry)  # before the provider sees it: a kill now loses nothing
            submitted = await self._submitted_id(batch, bodies)
        except BackendError as exc:  # (FatalBackendError: the run stops)
            if batch.unsure is not None:
                # It may exist: the journal keeps "submitting", for the next process to ask.
                self._abandon(batch, exc)
            else:  # nothing was submitted
                await self._give_up(batch, exc)
            return
        except Exception as exc:  # the journal cannot be written: the run stops
            self._abandon(batch, exc)
            return
        try:
            if isinstance(submitted, GaveUp):
                # Not submitted: as a batch that failed as a whole, its requests go into a
                # later batch, as the retry policy allows.
                error = f"could not submit it: {submitted.last}"
                await self._land(batch, BatchStatus("failed", FAILED, error=error), {})
                return
            entry.id, entry.state = submitted, SUBMITTED
            self._stats.calls += len(batch.requests)
            await self._save(entry)
        except Exception as exc:
            # The journal cannot be written (if the batch is out, a later process finds it).
            self._abandon(batch, exc)
            return
        self._ensure_poller()

    async def _submitted_id(self, batch: _Batch, bodies: list[dict[str, Any]]) -> str | GaveUp:
        """The new batch's id; ``GaveUp`` (returned) when every try failed transiently and
        no batch was made. A try that may have made it (``SubmitUnsure``) is followed by a
        look for it (``find``) before any other; a provider that cannot find a batch by
        hpt's id stops the run there (``FatalBackendError``), rather than maybe pay twice."""
        local_id = batch.entry.local_id

        async def attempt() -> str:
            if batch.unsure is not None:
                found = await self._look_for(batch)
                if found is not None:
                    return found
            try:
                return await self._api.submit(bodies, local_id)
            except SubmitUnsure as exc:
                batch.unsure = exc.brief
                if not self._api.can_find:
                    raise self._maybe_made(batch.entry, exc.brief) from exc
                raise

        try:
            return await self._call(attempt)
        except GaveUp as exc:
            if batch.unsure is None:
                return exc
            try:  # the last try may have made it
                found = await self._call(lambda: self._look_for(batch))
            except GaveUp as lost:
                raise FatalBackendError(
                    f"cannot tell whether batch {local_id} was created: submitting it failed "
                    f"({batch.unsure}), and so did looking for it ({lost.last}); resume the "
                    "run when the provider answers"
                ) from lost
            return exc if found is None else found

    async def _look_for(self, batch: _Batch) -> str | None:
        """``find`` for a batch a submission may have made; where the provider cannot tell,
        the run stops (``FatalBackendError``)."""
        entry = batch.entry
        try:
            return await self._api.find(entry.local_id, entry.created)
        except CannotTell as exc:
            raise self._maybe_made(entry, f"{batch.unsure}; {exc}") from exc

    def _maybe_made(self, entry: JournalBatch, what: str) -> FatalBackendError:
        """The run stops: a batch may exist that hpt cannot look for. What happened, what to
        do, short; it ends where the caller's resume command may follow."""
        provider = self._api.provider
        return FatalBackendError(
            f"batch {entry.local_id} may have been created at {provider} ({what}); look in "
            f"{provider}'s console for a batch created at about {entry.created:%Y-%m-%d %H:%M} "
            "UTC and cancel it if it is there, then resume: the resume asks its "
            f"{len(entry.requests)} request(s) again"
        )

    async def _give_up(self, batch: _Batch, error: BackendError) -> None:
        """A batch that was never submitted (the provider refused it): its requests fail
        with ``error``, and the journal says so (a later process asks them again)."""
        entry = batch.entry
        entry.state, entry.error, entry.ended = FAILED, str(error), _now()
        self._close_batch(batch, done=True)
        failure: BaseException = error
        try:
            await self._save(entry)
        except Exception as exc:
            failure = exc
        for req in batch.requests.values():
            self._fail(req, failure)

    def _abandon(self, batch: _Batch, error: BaseException) -> None:
        """Stop following a batch without a word in the journal (the run stops): a later
        process follows it again."""
        self._close_batch(batch)
        for key, req in batch.requests.items():
            self._abandoned[key] = error
            self._fail(req, error)

    # -- polling -----------------------------------------------------------------------
    def _ensure_poller(self, *, at_once: bool = False) -> None:
        if self._closing:
            return  # the next process follows what is out
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll_loop(at_once), name="hpt-batch-poller")

    async def _poll_loop(self, at_once: bool) -> None:
        try:
            while True:
                if not at_once:
                    await asyncio.sleep(self._options.poll_s)
                at_once = False
                submitted = [b for b in self._open.values() if b.entry.id is not None]
                if not submitted:
                    return  # started again by the next submission
                for batch in submitted:
                    if batch.entry.local_id in self._open:  # not abandoned meanwhile
                        await self._poll(batch)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            # A bug: no climb may wait forever on a poller that died.
            for batch in list(self._open.values()):
                self._abandon(batch, exc)
            raise

    async def _poll(self, batch: _Batch) -> None:
        entry = batch.entry
        batch_id = entry.id
        assert batch_id is not None
        try:
            status = await self._call(lambda: self._api.status(batch_id))
            if (status.state, status.counts) != (entry.state, entry.counts):
                entry.state, entry.counts = status.state, dict(status.counts)
                if status.phase == "in_progress":
                    await self._save(entry)
            if status.phase == "in_progress":
                return
            outcomes: dict[str, Completion | RequestFailed] = {}
            if status.phase == "ended":
                outcomes = await self._call(lambda: self._api.results(batch_id))
        except GaveUp as exc:
            log.warning("%s: batch %s: %s; asking again in %.0f s", self._label, batch_id,
                        exc.last, self._options.poll_s)  # fmt: skip
            return
        except BatchGone as exc:  # the provider no longer has the batch
            log.warning(
                "hpt: warning: %s: %s; its %d request(s), already paid for, are asked again",
                self._label, exc, len(batch.requests),
            )  # fmt: skip
            status, outcomes = BatchStatus("failed", FAILED, error=str(exc)), {}
        except BackendError as exc:
            # Refused (a 400, 410, 422 ...): the batch may still be out, so nothing is sent
            # again. As for an error that stops the run, its askers fail and the journal
            # keeps it open: a later process (--resume) follows it and collects it.
            if not isinstance(exc, FatalBackendError):
                error = BackendError(f"batch {batch_id}: {exc}; --resume collects it")
                error.__cause__ = exc
                exc = error
            self._abandon(batch, exc)
            return
        # Shielded: a landing cut short could bill its answers and not save that in time.
        landing = self._keep_busy(self._land_or_stop(batch, status, outcomes), "hpt-batch-land")
        await asyncio.shield(landing)

    async def _land_or_stop(
        self, batch: _Batch, status: BatchStatus, outcomes: dict[str, Completion | RequestFailed]
    ) -> None:
        try:
            await self._land(batch, status, outcomes)
        except Exception as exc:  # the results or the spend could not be kept: stop
            self._abandon(batch, exc)

    async def _land(
        self, batch: _Batch, status: BatchStatus, outcomes: dict[str, Completion | RequestFailed]
    ) -> None:
        """Save an ended (or failed) batch's outcome and bill its answers, then answer its
        requests."""
        entry = batch.entry
        now = time.time()
        whole = (
            RequestFailed(f"the batch failed: {status.error or status.state}", transient=True)
            if status.phase == "failed"
            else RequestFailed("missing from the batch's results", transient=True)
        )
        landed: dict[str, Completion | RequestFailed] = {}
        for key, req in batch.requests.items():
            outcome = outcomes.get(key, whole)
            if isinstance(outcome, Completion):
                outcome = outcome.model_copy(
                    update={"batched": True, "latency_s": now - req.queued, "params": None}
                )
            landed[key] = outcome
        saved = [SavedResult.of(key, outcome) for key, outcome in landed.items()]
        assert self._journal is not None
        await self._journal.write_results(entry.local_id, saved)  # before "collected"
        self._keep(entry.local_id, {s.custom_id: s for s in saved})
        await self._bill(batch, landed)
        entry.state = COLLECTED if status.phase == "ended" else FAILED
        entry.error, entry.ended = status.error, _now()
        await self._save(entry)
        self._close_batch(batch, done=True)
        for key, req in batch.requests.items():
            self._resolve(req, entry.local_id, landed[key])
        self._publish()

    async def _bill(self, batch: _Batch, landed: dict[str, Completion | RequestFailed]) -> None:
        """Settle every answer of a landed batch, and have the gate save the spend before
        the journal says the batch was collected: a kill between the two then neither loses
        nor repeats its cost. A batch the gate counted already (collected again after such a
        kill) is billed nothing more."""
        if self._gate is None:
            return
        local_id = batch.entry.local_id
        counted = self._gate.counted(local_id)
        answered = {k: out for k, out in landed.items() if isinstance(out, Completion)}
        for key, completion in answered.items():
            self._settle(batch.requests[key], None if counted else completion)
        if answered:  # (failures bill nothing: no landing to save)
            await self._gate.landed(local_id)

    def _resolve(self, req: _Request, local_id: str, outcome: Completion | RequestFailed) -> None:
        """Answer the askers of a request that landed (billed by ``_bill``), or send it again,
        or fail it."""
        future = req.future
        if isinstance(outcome, Completion):
            self._saved_in.setdefault(req.key, []).append(local_id)
            if future is not None and not future.done() and req.body is not None:
                self._used.add(req.key)
                future.set_result(self._answer(outcome, req.body[1], cached=False))
            return
        waited = future is not None and not future.done() and req.body is not None
        if outcome.transient and waited and req.attempt < self._retry.max_attempts:
            req.attempt += 1
            self._stats.retries += 1
            self._queue[req.key] = req  # the reservation stays with it
            self._added_one()
            return
        if outcome.transient:
            error = BackendError(f"gave up after {req.attempt} batches: {outcome.message}")
        else:
            error = BackendError(outcome.message)
        self._fail(req, error)

    # -- bookkeeping -------------------------------------------------------------------
    def _fail(self, req: _Request, error: BaseException) -> None:
        """The request failed for good: nothing billed, its askers get ``error``."""
        self._settle(req, None)
        if req.future is not None and not req.future.done():
            req.future.set_exception(error)

    def _close_batch(self, batch: _Batch, *, done: bool = False) -> None:
        self._open.pop(batch.entry.local_id, None)
        for key, req in batch.requests.items():
            if self._inflight.get(key) is req:
                del self._inflight[key]
        if done:
            batches, requests = self._done
            self._done = (batches + 1, requests + len(batch.entry.requests))
        self._publish()

    async def _save(self, entry: JournalBatch) -> None:
        assert self._journal is not None
        await self._journal.save(entry)

    async def _call(self, fn: Callable[[], Awaitable[T]]) -> T:
        return await call_with_retries(fn, self._retry, self._on_retry)

    def _on_retry(self, exc: TransientError, wait_s: float) -> None:
        self._stats.retries += 1

    def _publish(self) -> None:
        s = self._stats
        s.batch_requests_waiting = len(self._queue)
        s.batches_waiting = math.ceil(len(self._queue) / self._options.size)
        s.batches_in_progress = len(self._open)
        s.batch_requests_in_progress = sum(len(b.requests) for b in self._open.values())
        s.batches_done, s.batch_requests_done = self._done
