"""OpenAI chat-completions backend; also serves any OpenAI-compatible server via base_url."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlparse

import openai
from openai import AsyncOpenAI

from hpt.backends.base import Completion, GenerationParams, Message, Usage
from hpt.backends.errors import BackendError, FatalBackendError
from hpt.backends.retry import CallLimiter, RetryPolicy, call_with_retries

_RETRY_STATUS = {408, 409, 429}


def is_transient(exc: BaseException) -> bool:
    """Timeouts, dropped connections, 408/409/429 and 5xx are worth another try."""
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _RETRY_STATUS or exc.status_code >= 500
    # A body that is not the chat-completions shape usually means a proxy hiccup.
    return isinstance(exc, openai.APIResponseValidationError)


def _repetition_penalty_field(base_url: str) -> str | None:
    """Which request field carries a multiplicative repetition penalty on this server.

    api.openai.com has none (and rejects unknown fields); vLLM and most compatible servers
    take ``repetition_penalty`` in the body.
    """
    host = urlparse(base_url).hostname or ""
    return None if host.endswith("openai.com") else "repetition_penalty"


class OpenAIBackend:
    """Talks to ``/v1/chat/completions`` with the official async SDK.

    ``repetition_penalty_field`` names the body field for the penalty ("auto": guess from the
    host; None: never send one).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        retry: RetryPolicy | None = None,
        limiter: CallLimiter | None = None,
        timeout_s: float = 600.0,
        repetition_penalty_field: str | None = "auto",
        label: str | None = None,
    ) -> None:
        try:
            # base_url/api_key of None let the SDK read OPENAI_BASE_URL / OPENAI_API_KEY itself.
            self._client = AsyncOpenAI(
                base_url=base_url,
                api_key=api_key,
                max_retries=0,  # retries are ours: bounded, jittered, and classified
                timeout=timeout_s,
                http_client=openai.DefaultAioHttpClient(timeout=timeout_s),
            )
        except openai.OpenAIError as exc:
            raise FatalBackendError(
                "no OpenAI API key: set OPENAI_API_KEY (any value for a local server "
                "that ignores keys)"
            ) from exc
        self.model = model
        self.base_url = str(self._client.base_url)
        self._retry = retry or RetryPolicy()
        self._limiter = limiter or CallLimiter()
        self._rp_field = (
            _repetition_penalty_field(self.base_url)
            if repetition_penalty_field == "auto"
            else repetition_penalty_field
        )
        self._label = label or f"openai:{model}"

    @property
    def name(self) -> str:
        return self._label

    def _request(self, messages: list[Message], params: GenerationParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [m.model_dump() for m in messages],
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = params.stop
        if params.logprobs:
            body["logprobs"] = True
        if self._rp_field and params.repetition_penalty is not None:
            body["extra_body"] = {self._rp_field: params.repetition_penalty}
        return body

    async def complete(self, messages: list[Message], params: GenerationParams) -> Completion:
        request = self._request(messages, params)

        async def once() -> Completion:
            async with self._limiter.slot():
                started = time.perf_counter()
                resp = await self._client.chat.completions.create(**request)
                latency = time.perf_counter() - started
            if not resp.choices:
                raise BackendError(f"{self.name}: the server returned no choices")
            choice = resp.choices[0]
            logprobs = None
            if choice.logprobs is not None and choice.logprobs.content:
                logprobs = [t.logprob for t in choice.logprobs.content]
            usage = Usage()
            if resp.usage is not None:
                usage = Usage(
                    prompt_tokens=resp.usage.prompt_tokens,
                    completion_tokens=resp.usage.completion_tokens,
                )
            return Completion(
                text=choice.message.content or "",
                finish_reason=choice.finish_reason,
                usage=usage,
                latency_s=latency,
                logprobs=logprobs,
            )

        try:
            return await call_with_retries(once, self._retry, is_transient)
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise FatalBackendError(
                f"{self.name}: the server refused our credentials ({exc.status_code}); "
                "check OPENAI_API_KEY"
            ) from exc
        except openai.NotFoundError as exc:
            raise FatalBackendError(
                f"{self.name}: model or endpoint not found at {self.base_url} (404); "
                "check the model name and --base-url"
            ) from exc
        except openai.APIStatusError as exc:
            raise BackendError(f"{self.name}: HTTP {exc.status_code}: {_short(exc)}") from exc
        except openai.APIConnectionError as exc:
            raise BackendError(f"{self.name}: {_short(exc)} ({self.base_url})") from exc
        except openai.OpenAIError as exc:
            raise BackendError(f"{self.name}: {_short(exc)}") from exc

    async def check(self) -> None:
        try:
            await self._client.models.list()
        except openai.APIConnectionError as exc:
            raise FatalBackendError(
                f"cannot reach {self.base_url} ({_short(exc)}); is the server running? "
                "check --base-url or OPENAI_BASE_URL"
            ) from exc
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise FatalBackendError(
                f"{self.base_url} refused our credentials ({exc.status_code}); check OPENAI_API_KEY"
            ) from exc
        except openai.APIStatusError:
            pass  # reachable; some compatible servers have no /models route

    async def aclose(self) -> None:
        await self._client.close()


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
