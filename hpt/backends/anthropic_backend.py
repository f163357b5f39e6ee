"""Anthropic's Messages API through the official ``anthropic.AsyncAnthropic`` client.

Differences from chat completions handled here: the system prompt goes in ``system``;
there is no repetition penalty and no logprobs; ``stop`` becomes ``stop_sequences``.
API version 2026-10-21 (the SDK's default) rejects ``temperature``/``top_p`` outright, so
they are sent only when the run pins ``anthropic_version = "2023-06-01"``, and then only
temperature (clamped to the API's 0..1), because current models refuse both together.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
from anthropic import AsyncAnthropic

from hpt.backends.base import Completion, GenerationParams, Message, Usage
from hpt.backends.errors import FatalBackendError, TransientError
from hpt.backends.openai_protocol import classify_status, short
from hpt.backends.secrets import remember_secret
from hpt.backends.urls import split_query

LEGACY_VERSION = "2023-06-01"


class AnthropicTransport:
    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        anthropic_version: str | None = None,
    ) -> None:
        headers = {"anthropic-version": anthropic_version} if anthropic_version else None
        try:
            # None lets the SDK read ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL itself.
            self._client = AsyncAnthropic(
                api_key=api_key,
                # The SDK appends routes to the whole URL: a query goes apart.
                base_url=split_query(base_url)[0] if base_url else None,
                default_query=split_query(base_url)[1] if base_url else None,
                max_retries=0,
                timeout=timeout_s,
                default_headers=headers,
                http_client=anthropic.DefaultAioHttpClient(
                    timeout=timeout_s,
                    limits=httpx2.Limits(max_connections=None, max_keepalive_connections=None),
                ),
            )
        except anthropic.AnthropicError as exc:
            raise FatalBackendError(
                "no Anthropic API key: set ANTHROPIC_API_KEY in the environment or .env"
            ) from exc
        if not (self._client.api_key or self._client.auth_token):
            raise FatalBackendError(
                "no Anthropic API key: set ANTHROPIC_API_KEY in the environment or .env"
            )
        remember_secret(self._client.api_key or self._client.auth_token or "")
        self.model = model
        self.endpoint = str(self._client.base_url)
        self._sampling = anthropic_version == LEGACY_VERSION

    @property
    def suggested_concurrency(self) -> int | None:
        return None

    def sent_params(self, params: GenerationParams) -> dict[str, Any]:
        """The generation parameters a request with ``params`` sends."""
        sent: dict[str, Any] = {"max_tokens": params.max_tokens}
        if params.stop:
            sent["stop_sequences"] = params.stop
        if self._sampling:
            sent["temperature"] = min(params.temperature, 1.0)
        return sent

    def _body(self, messages: list[Message], sent: dict[str, Any]) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": sent["max_tokens"],
            "messages": [
                {"role": m.role, "content": m.content} for m in messages if m.role != "system"
            ],
        }
        if system:
            body["system"] = system
        if "stop_sequences" in sent:
            body["stop_sequences"] = sent["stop_sequences"]
        if "temperature" in sent:
            body["extra_body"] = {"temperature": sent["temperature"]}
        return body

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion:
        sent = self.sent_params(params)
        try:
            msg = await self._client.messages.create(**self._body(messages, sent))
        except anthropic.APIStatusError as exc:
            raise self._status_error(exc) from exc
        except anthropic.APITimeoutError as exc:
            raise TransientError(f"timed out ({self.endpoint})") from exc
        except anthropic.APIConnectionError as exc:
            raise TransientError(
                f"connection failed: {short(exc)} ({self.endpoint})", replica_down=True
            ) from exc
        except anthropic.APIResponseValidationError as exc:
            raise TransientError(f"malformed response: {short(exc)}") from exc
        text = "".join(getattr(block, "text", "") for block in msg.content)
        return Completion(
            text=text,
            finish_reason=msg.stop_reason,
            usage=Usage(
                prompt_tokens=msg.usage.input_tokens, completion_tokens=msg.usage.output_tokens
            ),
            params=sent,
        )

    def _status_error(self, exc: anthropic.APIStatusError) -> Exception:
        return classify_status(
            exc.status_code,
            short(exc),
            exc.response.headers,
            self.endpoint,
            self.model,
            key_env="ANTHROPIC_API_KEY",
        )

    async def start(self) -> None:
        try:
            await self._client.models.list(limit=1)
        except anthropic.APIConnectionError as exc:
            raise FatalBackendError(
                f"cannot reach {self.endpoint} ({short(exc)}); check ANTHROPIC_BASE_URL"
            ) from exc
        except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as exc:
            raise FatalBackendError(
                f"{self.endpoint} refused our credentials ({exc.status_code}); "
                "check ANTHROPIC_API_KEY"
            ) from exc
        except anthropic.APIStatusError:
            pass  # reachable; a proxy may not list models

    async def aclose(self) -> None:
        await self._client.close()
