"""OpenAI chat completions, and any OpenAI-compatible server (vLLM, llama.cpp, TGI's /v1).

Uses the official ``openai.AsyncOpenAI`` client (keys, base URL, error classes) over its
aiohttp transport, but sends the request body with the client's low-level ``post`` and reads
the JSON itself: the typed ``chat.completions.create`` path spends most of its time
transforming parameters and building response models (measured: 76% vs 90% of the ideal
call rate at 128 concurrent calls, see bench/backends.py).

Batch mode (``--batch``): ``batch_api()``, OpenAI's Files + Batches (``openai_batch``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx2
import openai
from openai import AsyncOpenAI

from hpt.backends.base import Completion, GenerationParams, Message
from hpt.backends.errors import FatalBackendError, TransientError
from hpt.backends.openai_protocol import (
    chat_body,
    chat_fields,
    chat_notes,
    chat_params,
    classify_status,
    parse_chat_completion,
    short,
)
from hpt.backends.openai_reasoning import ReasoningControl
from hpt.backends.secrets import remember_secret
from hpt.backends.urls import split_query

if TYPE_CHECKING:
    from hpt.backends.openai_batch import OpenAIBatchAPI

NO_KEY = (
    "no OpenAI API key: set OPENAI_API_KEY in the environment or .env (any value for a local "
    "server that ignores keys)"
)


def sdk_client(base_url: str | None, api_key: str | None, timeout_s: float) -> AsyncOpenAI:
    """The official client as hpt uses it: no retries of its own, no connection cap."""
    try:
        # None lets the SDK read OPENAI_BASE_URL / OPENAI_API_KEY itself.
        client = AsyncOpenAI(
            # The SDK appends routes to the whole URL: a query goes apart.
            base_url=split_query(base_url)[0] if base_url else None,
            default_query=split_query(base_url)[1] if base_url else None,
            api_key=api_key,
            max_retries=0,  # retries are ours: bounded, jittered, and classified
            timeout=timeout_s,
            http_client=openai.DefaultAioHttpClient(
                timeout=timeout_s,
                limits=httpx2.Limits(max_connections=None, max_keepalive_connections=None),
            ),
        )
    except openai.OpenAIError as exc:
        raise FatalBackendError(NO_KEY) from exc
    remember_secret(client.api_key)
    return client


class OpenAITransport:
    """``/v1/chat/completions``. ``repetition_penalty_field``: "auto" guesses from the host;
    ``reasoning_control``: how the server takes reasoning settings (openai_reasoning)."""

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        repetition_penalty_field: str | None = "auto",
        reasoning_control: ReasoningControl = "auto",
        provider: str = "openai",
    ) -> None:
        self._client = sdk_client(base_url, api_key, timeout_s)
        self.provider = provider
        self.model = model
        self.endpoint = str(self._client.base_url)
        self._fields = chat_fields(
            model, self.endpoint, repetition_penalty_field, reasoning_control
        )

    @property
    def suggested_concurrency(self) -> int | None:
        return None

    def sent_params(self, params: GenerationParams) -> dict[str, Any]:
        """The generation parameters a request with ``params`` sends (``SettingRefused`` for
        a reasoning setting the model cannot take)."""
        return chat_params(params, self._fields)

    def param_notes(self, params: GenerationParams) -> list[str]:
        """Each of ``params`` sent otherwise than asked, and why."""
        return chat_notes(params, self._fields)

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion:
        sent = self.sent_params(params)
        try:
            resp = await self._client.post(
                "/chat/completions",
                body=chat_body(self.model, messages, sent),
                cast_to=httpx2.Response,
            )
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from exc
        except openai.APITimeoutError as exc:
            raise TransientError(f"timed out ({self.endpoint})") from exc
        except openai.APIConnectionError as exc:
            raise TransientError(
                f"connection failed: {short(exc)} ({self.endpoint})", replica_down=True
            ) from exc
        return parse_chat_completion(resp.content, sent)

    def batch_api(self) -> OpenAIBatchAPI:
        """OpenAI's Files + Batches on this transport's client (``--batch``)."""
        from hpt.backends.openai_batch import OpenAIBatchAPI

        return OpenAIBatchAPI(self._client, self.model, self._fields, self.provider)

    def _status_error(self, exc: openai.APIStatusError) -> Exception:
        return classify_status(
            exc.status_code, short(exc), exc.response.headers, self.endpoint, self.model
        )

    async def start(self) -> None:
        try:
            await self._client.models.list()
        except openai.APIConnectionError as exc:
            raise FatalBackendError(
                f"cannot reach {self.endpoint} ({short(exc)}); is the server running? "
                "check the base URL (--base-url or OPENAI_BASE_URL)"
            ) from exc
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise FatalBackendError(
                f"{self.endpoint} refused our credentials ({exc.status_code}); check OPENAI_API_KEY"
            ) from exc
        except openai.APIStatusError:
            pass  # reachable; some compatible servers have no /models route

    async def aclose(self) -> None:
        await self._client.close()
