"""One logical model: cache, limits and retries wrapped around a provider's transport.

A ``Transport`` speaks one provider's protocol and sorts its failures into
``TransientError`` (retry), ``BackendError`` (this sample fails) and ``FatalBackendError``
(stop the run). ``ManagedBackend`` adds everything that is the same for every provider.
"""

from __future__ import annotations

import time
from typing import Protocol

from hpt.backends.base import Completion, GenerationParams, Message, valid_text
from hpt.backends.cache import ResponseCache, cache_key
from hpt.backends.errors import BackendError, FatalBackendError, TransientError
from hpt.backends.limits import BackendLimits, BackendStats, Limiter
from hpt.backends.retry import GaveUp, RetryPolicy, call_with_retries
from hpt.backends.secrets import redact


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

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion: ...

    async def aclose(self) -> None: ...


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
    ) -> None:
        self.transport = transport
        # What stands for the endpoint in cache keys, when the URL itself is not stable
        # (the embedded server gets a new port every run).
        self._cache_endpoint = cache_endpoint
        self._label = label
        self._limits = limits or BackendLimits()
        self._retry = retry or RetryPolicy()
        self._cache = cache
        self.stats = BackendStats()
        self._limiter: Limiter | None = None

    @property
    def name(self) -> str:
        return self._label

    async def check(self) -> None:
        await self.transport.start()
        self._limiter = Limiter(self._limits, self.stats, self.transport.suggested_concurrency)

    async def aclose(self) -> None:
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

    async def complete(
        self, messages: list[Message], params: GenerationParams, *, cache_seed: str = ""
    ) -> Completion:
        key = None
        if self._cache is not None:
            key = self._key(messages, params, cache_seed)
            hit = await self._cache.get(key)
            if hit is not None and params.logprobs and hit.logprobs is None:
                # Cached by a server that returned none (an older embedded server): ask again,
                # so a rule that ranks by logprobs gets them.
                hit = None
            if hit is not None:
                self.stats.cache_hits += 1
                return hit.model_copy(update={"cached": True})
        try:
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
            raise FatalBackendError(redact(f"{self.name}: {exc}")) from exc
        except BackendError as exc:
            self.stats.errors += 1
            raise BackendError(redact(f"{self.name}: {exc}")) from exc
        completion.text = valid_text(completion.text)
        if self._cache is not None and key is not None:
            await self._cache.put(key, self.transport.provider, self.transport.model, completion)
        return completion

    async def _attempt(self, messages: list[Message], params: GenerationParams) -> Completion:
        limiter = self._limiter
        if limiter is None:
            raise FatalBackendError(f"{self.name}: used before check()")
        estimate = estimate_tokens(messages)
        await limiter.acquire(estimate)
        self.stats.calls += 1
        ok = False
        actual: int | None = None
        try:
            started = time.perf_counter()
            completion = await self.transport.send(messages, params)
            completion.latency_s = time.perf_counter() - started
            actual = completion.usage.total_tokens or None
            ok = True
            return completion
        except TransientError as exc:
            if exc.overloaded:
                self.stats.rate_limited += 1
                limiter.on_overload()
            if exc.retry_after_s:
                limiter.pause(exc.retry_after_s)
            raise
        finally:
            limiter.release(estimate, actual, ok)

    def _on_retry(self, exc: TransientError, wait_s: float) -> None:
        self.stats.retries += 1
