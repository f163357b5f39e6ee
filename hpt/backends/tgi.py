"""A Text Generation Inference server (``tgi:URL``); several URLs make a pool (pool.py).

It reads ``/info`` once (model id, ``max_concurrent_requests``, token limits) and maps
parameters to TGI's published rules (specs/tgi-openapi.json): temperature must be positive,
so greedy decoding is ``do_sample=false``; top_p lies in (0, 1); at most
``max_stop_sequences`` stop strings go to the server (the rest are applied here); the seed
must be positive; ``max_new_tokens`` stays within ``max_total_tokens``. It uses the chat API
and falls back to ``/generate`` with a plain prompt when the server has no chat template.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp
from huggingface_hub import AsyncInferenceClient
from pydantic import BaseModel, ConfigDict

from hpt.backends.base import Completion, GenerationParams, Message, Usage
from hpt.backends.errors import FatalBackendError
from hpt.backends.hf_common import InferenceClientTransport, truncate_at_stop
from hpt.backends.openai_protocol import short
from hpt.backends.secrets import redact_url

if TYPE_CHECKING:  # the provider's config module imports this one when it opens a server
    from hpt.backends.builtin.tgi import ApiChoice

_TEMPLATE_RE = re.compile(r"template", re.IGNORECASE)

PROMPT_ROLES = {"system": "System", "user": "User", "assistant": "Assistant"}


class TGIInfo(BaseModel):
    """The parts of TGI's ``/info`` we use."""

    model_config = ConfigDict(extra="ignore")

    model_id: str
    max_concurrent_requests: int
    max_input_tokens: int | None = None
    max_total_tokens: int
    max_stop_sequences: int = 4
    version: str | None = None


def plain_prompt(messages: list[Message]) -> str:
    """A template-free rendering for servers without a chat template."""
    parts = [f"{PROMPT_ROLES[m.role]}: {m.content}" for m in messages]
    return "\n\n".join(parts) + "\n\nAssistant:"


class TGITransport(InferenceClientTransport):
    """One TGI server. ``api``: "chat", "generate", or "auto" (chat, falling back to
    ``/generate`` once the server says it has no chat template).

    TGI has no reasoning parser and no reasoning field (specs/tgi-openapi.json): a reasoning
    model's thinking comes back inline, ``<think>...</think>`` in the text, on either route,
    and the backend sets it apart; a cut at the token limit says "length" on both."""

    provider = "tgi"
    no_reasoning = "TGI's API has no reasoning controls (no reasoning effort or thinking budget)"

    def __init__(
        self,
        url: str,
        *,
        api: ApiChoice = "auto",
        token: str | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        if urlsplit(url).query:
            # huggingface_hub's client appends its routes to the whole string.
            raise FatalBackendError(
                f"{redact_url(url)}: a TGI endpoint takes no query string; give the server's "
                f"token with HF_TOKEN, or its user and password in the URL (user:pw@host)"
            )
        self._url = url.rstrip("/")
        super().__init__(
            AsyncInferenceClient(model=self._url, token=token, timeout=timeout_s), token=token
        )
        self.endpoint = self._url
        self.model = "?"  # /info fills it in
        self._api: ApiChoice = api
        self._token = token
        self._timeout = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self.info: TGIInfo | None = None

    @property
    def suggested_concurrency(self) -> int | None:
        return self.info.max_concurrent_requests if self.info else None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
            self._session = aiohttp.ClientSession(
                headers=headers, timeout=aiohttp.ClientTimeout(total=min(self._timeout, 30.0))
            )
        return self._session

    async def start(self) -> None:
        try:
            async with self._http().get(f"{self._url}/info") as resp:
                if resp.status in (401, 403):
                    raise FatalBackendError(
                        f"{self._url} refused our credentials ({resp.status}); check HF_TOKEN"
                    )
                if resp.status != 200:
                    raise FatalBackendError(
                        f"{self._url}/info answered HTTP {resp.status}; is this a TGI server?"
                    )
                self.info = TGIInfo.model_validate(await resp.json(content_type=None))
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise FatalBackendError(
                f"cannot reach the TGI server at {self._url} ({short(exc)}); is it running?"
            ) from exc
        except (ValueError, json.JSONDecodeError) as exc:
            raise FatalBackendError(f"{self._url}/info is not TGI's /info: {short(exc)}") from exc
        self.model = self.info.model_id

    async def healthy(self) -> bool:
        try:
            async with self._http().get(
                f"{self._url}/health", timeout=aiohttp.ClientTimeout(total=5.0)
            ) as resp:
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    # -- the server's limits -------------------------------------------------------------
    def _max_new(self, params: GenerationParams) -> int:
        if self.info is None:
            return params.max_tokens
        return max(1, min(params.max_tokens, self.info.max_total_tokens - 1))

    def _stop_limit(self) -> int:
        return self.info.max_stop_sequences if self.info else super()._stop_limit()

    def _retry_422(self, message: str) -> bool:
        # Not only while "auto": requests sent to the chat route before the first answer
        # switched it come back with the same answer, and go again too.
        if self._api != "chat" and _TEMPLATE_RE.search(message):
            self._api = "generate"  # this server has no chat template
            return True
        return False

    async def _request(
        self, messages: list[Message], params: GenerationParams, max_new: int
    ) -> Completion:
        if self._api == "generate":
            return await self._generate(messages, params, max_new)
        return await self._chat(messages, params, max_new)

    def sent_params(self, params: GenerationParams) -> dict[str, Any]:
        if self._api == "generate":
            self._refuse_reasoning(params)
            return self._generate_params(params, self._max_new(params))
        return super().sent_params(params)

    def param_notes(self, params: GenerationParams) -> list[str]:
        notes = [] if self._api == "generate" else super().param_notes(params)
        max_new = self._max_new(params)
        if self.info is not None and max_new != params.max_tokens:
            notes.append(
                f"max_tokens {params.max_tokens} sent as {max_new}: the server's "
                f"max_total_tokens is {self.info.max_total_tokens}"
            )
        return notes

    def _generate_params(self, params: GenerationParams, max_new: int) -> dict[str, Any]:
        server_stops, _ = self._stops(params)
        sampling = params.temperature > 0
        sent: dict[str, Any] = {"max_new_tokens": max_new, "do_sample": sampling}
        if sampling:
            sent["temperature"] = params.temperature
            if 0 < params.top_p < 1:
                sent["top_p"] = params.top_p
        if params.repetition_penalty is not None:
            sent["repetition_penalty"] = params.repetition_penalty
        if params.seed:  # TGI wants a positive seed
            sent["seed"] = params.seed
        if server_stops:
            sent["stop"] = server_stops
        return sent

    async def _generate(
        self, messages: list[Message], params: GenerationParams, max_new: int
    ) -> Completion:
        _, stops = self._stops(params)
        sent = self._generate_params(params, max_new)
        out = await self._client.text_generation(
            plain_prompt(messages),
            details=True,
            decoder_input_details=True,  # prefill tokens give the prompt's token count
            return_full_text=False,
            **sent,
        )
        details = out.details
        text, stopped = truncate_at_stop(out.generated_text, stops)
        logprobs = None
        if params.logprobs and details is not None:
            logprobs = [float(t.logprob) for t in details.tokens if t.logprob is not None]
        finish = None
        if details is not None:
            finish = {"eos_token": "stop", "stop_sequence": "stop"}.get(
                str(details.finish_reason), str(details.finish_reason)
            )
        return Completion(
            text=text,
            finish_reason="stop" if stopped else finish,
            usage=Usage(
                prompt_tokens=len(details.prefill) if details else 0,
                completion_tokens=details.generated_tokens if details else 0,
            ),
            logprobs=logprobs,
            params=sent,
        )

    async def aclose(self) -> None:
        await super().aclose()
        if self._session is not None:
            await self._session.close()
