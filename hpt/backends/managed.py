"""One logical model: cache, limits and retries wrapped around a provider's transport.

A ``Transport`` speaks one provider's protocol and sorts its failures into
``TransientError`` (retry), ``BackendError`` (this sample fails) and ``FatalBackendError``
(stop the run). ``ManagedBackend`` adds everything that is the same for every provider.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Protocol

from hpt.backends.base import Completion, GenerationParams, Message, valid_text
from hpt.backends.batching import BatchCollector, BatchOptions
from hpt.backends.cache import ResponseCache, cache_key
from hpt.backends.errors import BackendError, FatalBackendError, TransientError
from hpt.backends.gate import CallGate, prompt_token_bound
from hpt.backends.limits import BackendLimits, BackendStats, Limiter
from hpt.backends.retry import GaveUp, RetryPolicy, call_with_retries
from hpt.backends.secrets import redact
from hpt.backends.thinking import DEFAULT_THINK_TAGS, ThinkTags, with_thinking_apart


class Transport(Protocol):
    """A provider's wire protocol for one logical model."""

    provider: str  # the registered provider's name ("openai", "tgi", ...); part of the cache key
    model: str  # the model id sent to (or reported by) the server
    endpoint: str  # base URL(s); part of the cache key, never holds a key

    @property
    def suggested_concurrency(self) -> int | None:
        """A server-reported cap (TGI's max_concurrent_requests), if known."""
        ...

    async def start(self) -> None:
        """Connect and learn what the server allows; FatalBackendError if it cannot work."""
        ...

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion:
        """One request. The completion reports in ``params`` what was sent (see
        ``Completion.params``), its answer in ``text`` and any thinking the provider returned
        apart in ``reasoning`` (inline <think> blocks may stay in the text: the backend sets
        them apart). A transport may also offer ``sent_params(params)``, the same without a
        request, for run.json (raising ``SettingRefused`` for a setting its model cannot
        take), and ``param_notes(params)``: each setting it sends otherwise than asked and
        why, said once at a run's start."""
        ...

    async def aclose(self) -> None: ...


def reported_params(transport: object, params: GenerationParams) -> dict[str, Any] | None:
    """The generation parameters a transport sends for ``params``, after its provider's
    mapping (``sent_params``, which a transport may lack: None). A setting the model cannot
    take at all raises ``SettingRefused``."""
    describe = getattr(transport, "sent_params", None)
    return describe(params) if callable(describe) else None


def reported_notes(transport: object, params: GenerationParams) -> list[str]:
    """What of ``params`` a transport does not send as asked, one sentence each with the
    provider's rule (``param_notes``, which a transport may lack: none)."""
    describe = getattr(transport, "param_notes", None)
    return list(describe(params)) if callable(describe) else []


@dataclass(slots=True)
class _Flight:
    """A request in flight: the task making it, and how many askers await it."""

    task: asyncio.Task[Completion]
    waiting: int = 0


def estimate_tokens(messages: list[Message]) -> int:
    """A rough prompt size (4 characters a token) for the tokens-per-minute budget."""
    return sum(len(m.content) for m in messages) // 4 + 4 * len(messages)


class ManagedBackend:
    """A ``Backend``: response cache, then per-backend limits and bounded retries."""

    def __init__(
        self,
        transport: Transport,
        *,
        label: str,
        limits: BackendLimits | None = None,
        retry: RetryPolicy | None = None,
        cache: ResponseCache | None = None,
        cache_endpoint: str | None = None,
        think_tags: ThinkTags = DEFAULT_THINK_TAGS,
        gate: CallGate | None = None,
        batch: BatchOptions | None = None,
    ) -> None:
        self.transport = transport
        # What the run may spend: asked before every call sent (hpt.backends.gate).
        self.gate = gate
        # Batch mode, asked for; used when the transport has a Batch API (see ``batched``).
        self._batch = batch
        self._collector: BatchCollector | None = None
        # The inline thinking blocks its completions may start with (hpt.backends.thinking).
        self._think_tags = think_tags
        # What stands for the endpoint in cache keys, when the URL itself is not stable
        # (the embedded server gets a new port every run).
        self._cache_endpoint = cache_endpoint
        self._label = label
        self._limits = limits or BackendLimits()
        self._retry = retry or RetryPolicy()
        self._cache = cache
        self.stats = BackendStats()
        self._limiter: Limiter | None = None
        # Requests in flight by cache key: one call however many ask at once.
        self._flights: dict[str, _Flight] = {}

    @property
    def name(self) -> str:
        return self._label

    @property
    def batched(self) -> bool:
        """Whether calls go through the provider's Batch API (batch mode asked for, and the
        transport offers one; known after ``check``). Batch mode asked for a provider
        without one: False, and calls are sent directly."""
        return self._collector is not None

    async def check(self) -> None:
        await self.transport.start()
        self._limiter = Limiter(self._limits, self.stats, self.transport.suggested_concurrency)
        offer = getattr(self.transport, "batch_api", None)  # a transport may have none
        api = offer() if self._batch is not None and callable(offer) else None
        if api is not None and self._batch is not None:
            collector = BatchCollector(
                api,
                self._batch,
                label=self._label,
                model=self.transport.model,
                endpoint=self._cache_endpoint or self.transport.endpoint,
                retry=self._retry,
                stats=self.stats,
                gate=self.gate,
                params_of=self.sent_params,
            )
            try:
                await collector.start()
            except BaseException:
                await collector.aclose()
                raise
            self._collector = collector

    async def aclose(self) -> None:
        try:
            if self._collector is not None:
                await self._collector.aclose()
        finally:
            await self.transport.aclose()

    def _key(self, messages: list[Message], params: GenerationParams, seed: str) -> str:
        t = self.transport
        return cache_key(
            provider=t.provider,
            model=t.model,
            endpoint=self._cache_endpoint or t.endpoint,
            params=params,
            messages=messages,
            seed=seed,
        )

    def sent_params(self, params: GenerationParams) -> dict[str, Any] | None:
        """What a call with ``params`` puts on the wire (see ``reported_params``)."""
        return reported_params(self.transport, params)

    def param_notes(self, params: GenerationParams) -> list[str]:
        """What of ``params`` is not sent as asked, and why (see ``reported_notes``)."""
        return reported_notes(self.transport, params)

    async def complete(
        self, messages: list[Message], params: GenerationParams, *, cache_seed: str = ""
    ) -> Completion:
        """One completion. An identical request (the cache key's identity) already in flight
        is not sent again: this asker awaits its answer, marked ``shared`` and ``cached``
        (no model call was made for it). Its failure is every asker's; an asker cancelled
        leaves the call running for the others, and the last one to leave cancels it."""
        key = self._key(messages, params, cache_seed)
        flight = self._flights.get(key)
        shared = flight is not None
        if flight is None:
            flight = self._flights[key] = _Flight(
                asyncio.create_task(self._fetch(key, messages, params))
            )
        flight.waiting += 1
        try:
            completion = await asyncio.shield(flight.task)
        except asyncio.CancelledError:
            flight.waiting -= 1
            if not flight.waiting and not flight.task.done():
                if self._flights.get(key) is flight:
                    del self._flights[key]  # a later asker starts afresh
                flight.task.cancel()
            raise
        if shared:
            self.stats.shared += 1
            # Shared: another asker's model call answered it. An answer the response cache
            # gave that asker is a cache answer for this one too (saved, not paid).
            return completion.model_copy(update={"cached": True, "shared": not completion.cached})
        return completion

    async def _fetch(
        self, key: str, messages: list[Message], params: GenerationParams
    ) -> Completion:
        """The flight's own task: the cache, else the model (then the cache). The cache keeps
        completions as they came; their inline thinking is set apart on the way out."""
        try:
            completion = await self._fetch_once(key, messages, params)
            return with_thinking_apart(completion, self._think_tags)
        finally:
            flight = self._flights.get(key)
            if flight is not None and flight.task is asyncio.current_task():
                del self._flights[key]

    async def _fetch_once(
        self, key: str, messages: list[Message], params: GenerationParams
    ) -> Completion:
        if self._cache is not None:
            hit = await self._cache.get(key)
            if hit is not None and params.logprobs and hit.logprobs is None:
                # Cached by a server that returned none (an older embedded server): ask again,
                # so a rule that ranks by logprobs gets them.
                hit = None
            if hit is not None:
                self.stats.cache_hits += 1
                return hit.model_copy(update={"cached": True})
        try:
            if self._collector is not None:
                # No limiter and no retry wrapper: the batch's own queue and its retries.
                completion = await self._collector.ask(key, messages, params)
            else:
                completion = await call_with_retries(
                    lambda: self._attempt(messages, params), self._retry, self._on_retry
                )
        except GaveUp as exc:
            self.stats.errors += 1
            raise BackendError(
                redact(
                    f"{self.name}: gave up after {exc.attempts} attempts in "
                    f"{exc.elapsed_s:.1f} s: {exc.last}"
                )
            ) from exc
        except FatalBackendError as exc:
            self.stats.errors += 1
            # Its kind stays (SettingRefused is one): callers may tell them apart.
            raise type(exc)(redact(f"{self.name}: {exc}")) from exc
        except BackendError as exc:
            self.stats.errors += 1
            raise BackendError(redact(f"{self.name}: {exc}")) from exc
        completion.text = valid_text(completion.text)
        if completion.reasoning is not None:
            completion.reasoning = valid_text(completion.reasoning)
        if self._cache is not None:
            await self._cache.put(key, self.transport.provider, self.transport.model, completion)
        return completion

    async def _attempt(self, messages: list[Message], params: GenerationParams) -> Completion:
        limiter = self._limiter
        if limiter is None:
            raise FatalBackendError(f"{self.name}: used before check()")
        estimate = estimate_tokens(messages)
        await limiter.acquire(estimate)
        ok = False
        actual: int | None = None
        landed: Completion | None = None
        ticket: object = None
        admitted = False
        try:
            # Reserved once the limits let the call go: calls held back (--concurrency, a rate
            # limit) reserve nothing yet. Every attempt is its own call (a retry may be billed).
            if self.gate is not None:
                ticket = self.gate.admit(
                    self._label, prompt_token_bound(messages), params.max_tokens, batched=False
                )
                admitted = True
            self.stats.calls += 1
            started = time.perf_counter()
            completion = await self.transport.send(messages, params)
            completion.latency_s = time.perf_counter() - started
            actual = completion.usage.total_tokens or None
            ok = True
            landed = completion
            return completion
        except TransientError as exc:
            if exc.overloaded:
                self.stats.rate_limited += 1
                limiter.on_overload()
            if exc.retry_after_s:
                limiter.pause(exc.retry_after_s)
            raise
        finally:
            if admitted:
                assert self.gate is not None
                self.gate.settle(ticket, landed)
            limiter.release(estimate, actual, ok)

    def cap_concurrency(self, limit: int) -> None:
        """Hold this backend to ``limit`` calls in flight (batch mode's direct models: every
        climb waits at once, and ``--concurrency`` still bounds what is sent directly)."""
        if self._limiter is None:
            raise FatalBackendError(f"{self.name}: used before check()")
        self._limiter.cap(limit)

    def _on_retry(self, exc: TransientError, wait_s: float) -> None:
        self.stats.retries += 1
