"""A lean OpenAI-compatible client on aiohttp, for self-hosted servers (vLLM, llama.cpp,
TGI's /v1) where hpt pushes hundreds of calls a second.

The official SDK spends about 1 ms of CPU per call building requests and response objects
(bench/backends.py: ~70% of the ideal call rate at 128 x 200 ms, against ~95% here); on two
cores that, not the server, caps a run. Errors are sorted exactly as ``OpenAITransport``
sorts them. ``client = "sdk"`` in a model's config keeps the SDK. Batch mode (``batch_api()``) goes
through the SDK all the same: its calls are few.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import aiohttp
from pydantic_core import to_json

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
from hpt.backends.urls import join_route

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from hpt.backends.openai_batch import OpenAIBatchAPI


class LeanOpenAITransport:
    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None,
        timeout_s: float = 600.0,
        repetition_penalty_field: str | None = "auto",
        reasoning_control: ReasoningControl = "auto",
        provider: str = "openai",
    ) -> None:
        if api_key:
            remember_secret(api_key)
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._sdk: AsyncOpenAI | None = None
        self.provider = provider
        self.model = model
        self.endpoint = base_url.rstrip("/")
        self._url = join_route(self.endpoint, "chat/completions")
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._fields = chat_fields(
            model, self.endpoint, repetition_penalty_field, reasoning_control
        )

    @property
    def suggested_concurrency(self) -> int | None:
        return None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),  # our limiter decides concurrency
                headers=self._headers,
                timeout=self._timeout,
            )
        return self._session

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
            body = to_json(chat_body(self.model, messages, sent))
            async with self._http().post(self._url, data=body) as resp:
                raw = await resp.read()
                if resp.status >= 400:
                    raise self._status_error(resp.status, raw, resp.headers)
        except TimeoutError as exc:
            raise TransientError(f"timed out ({self.endpoint})") from exc
        except aiohttp.ClientError as exc:
            raise TransientError(
                f"connection failed: {short(exc)} ({self.endpoint})", replica_down=True
            ) from exc
        return parse_chat_completion(raw, sent)

    def batch_api(self) -> OpenAIBatchAPI:
        """OpenAI's Files + Batches at this endpoint, through the official SDK (imported
        only here: it costs most of a second). Most self-hosted servers have no Batch API:
        their 404 says so at the first submission."""
        from hpt.backends.openai_backend import sdk_client
        from hpt.backends.openai_batch import OpenAIBatchAPI

        if self._sdk is None:
            self._sdk = sdk_client(self.endpoint, self._api_key, self._timeout_s)
        return OpenAIBatchAPI(self._sdk, self.model, self._fields, self.provider)

    def _status_error(self, code: int, raw: bytes, headers: Any) -> Exception:
        try:
            message = str(json.loads(raw)["error"]["message"])
        except (ValueError, KeyError, TypeError):
            message = raw[:200].decode("utf-8", "replace")
        return classify_status(code, short(message), headers, self.endpoint, self.model)

    async def start(self) -> None:
        try:
            async with self._http().get(join_route(self.endpoint, "models")) as resp:
                if resp.status in (401, 403):
                    raise FatalBackendError(
                        f"{self.endpoint} refused our credentials ({resp.status}); "
                        "check OPENAI_API_KEY"
                    )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise FatalBackendError(
                f"cannot reach {self.endpoint} ({short(exc)}); is the server running? "
                "check the base URL (--base-url or OPENAI_BASE_URL)"
            ) from exc

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._sdk is not None:
            await self._sdk.close()
