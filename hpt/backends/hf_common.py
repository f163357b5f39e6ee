"""What TGI servers and the Hugging Face router share: both are reached through
``huggingface_hub.AsyncInferenceClient``, speak TGI's chat API and fail the same ways.

``InferenceClientTransport`` holds the chat call, the handling of 422 answers (retry with a
``max_new_tokens`` that fits, or a sample error saying why the prompt does not fit) and the
sorting of failures; ``tgi.TGITransport`` and ``hf_router.HFRouterTransport`` add how they
connect and, for TGI, the server's limits and the ``/generate`` fallback.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp
import httpx2
from huggingface_hub import AsyncInferenceClient
from huggingface_hub.errors import (
    GenerationError,
    HfHubHTTPError,
    IncompleteGenerationError,
    InferenceTimeoutError,
    OverloadedError,
    ValidationError,
)

from hpt.backends.base import Completion, GenerationParams, Message, Usage
from hpt.backends.errors import BackendError, FatalBackendError, TransientError, refuse_reasoning
from hpt.backends.openai_protocol import short
from hpt.backends.ratelimit_headers import wait_from_headers
from hpt.backends.secrets import remember_secret

# TGI's validation messages (router/src/validation.rs) for prompts that do not fit.
_TOTAL_RE = re.compile(
    r"must be <= (\d+)\. Given: (\d+) `inputs` tokens and (\d+) `max_new_tokens`"
)
_INPUT_RE = re.compile(r"must have less than (\d+) tokens\. Given: (\d+)")

# TGI's default when a server does not say (the router never does).
DEFAULT_MAX_STOP_SEQUENCES = 4


def truncate_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    cut = min((i for s in stops if (i := text.find(s)) >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def classify(exc: BaseException, where: str) -> Exception:
    """Sort huggingface_hub / transport failures into retry, sample error or stop."""
    if isinstance(exc, OverloadedError):
        return TransientError(
            f"model is overloaded: {short(exc)}", overloaded=True, retry_after_s=_headers_wait(exc)
        )
    if isinstance(exc, (GenerationError, IncompleteGenerationError)):
        return TransientError(f"generation failed: {short(exc)}")
    if isinstance(exc, ValidationError):
        return BackendError(f"the server rejected the request (422): {short(exc)}")
    if isinstance(exc, InferenceTimeoutError):
        return TransientError(f"timed out ({where})")
    if isinstance(exc, HfHubHTTPError) and exc.response is not None:
        code = exc.response.status_code
        if code in (401, 403):
            return FatalBackendError(f"{where} refused our credentials ({code}); check HF_TOKEN")
        if code == 404:
            return FatalBackendError(f"nothing found at {where} (404); check the URL or model id")
        if code in (429, 503):
            return TransientError(
                f"HTTP {code}: {short(exc)}",
                overloaded=True,
                retry_after_s=wait_from_headers(exc.response.headers),
            )
        if code in (408, 409, 424) or code >= 500:  # 424: generation failed on the server
            return TransientError(f"HTTP {code}: {short(exc)}")
        return BackendError(f"HTTP {code}: {short(exc)}")
    if isinstance(exc, (httpx2.TimeoutException,)):
        return TransientError(f"timed out ({where})")
    if isinstance(exc, (httpx2.TransportError, aiohttp.ClientError, ConnectionError)):
        return TransientError(f"connection failed: {short(exc)} ({where})", replica_down=True)
    if isinstance(exc, (ValueError, KeyError, TypeError)):  # undecodable body
        return TransientError(f"malformed response from {where}: {short(exc)}")
    return BackendError(f"{type(exc).__name__}: {short(exc)}")


def status_of(exc: BaseException) -> int | None:
    if isinstance(exc, ValidationError):
        return 422
    response = getattr(exc, "response", None) or getattr(exc.__cause__, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _headers_wait(exc: BaseException) -> float | None:
    cause = exc.__cause__
    response = getattr(cause, "response", None)
    return wait_from_headers(response.headers) if response is not None else None


def fitted_max_new(message: str) -> int | None:
    """The ``max_new_tokens`` that would fit, from a 422 about the total token limit."""
    m = _TOTAL_RE.search(message)
    if not m:
        return None
    total, given_inputs = int(m.group(1)), int(m.group(2))
    room = total - given_inputs
    return room if room >= 1 else None


def too_long(message: str) -> BackendError:
    m = _INPUT_RE.search(message)
    if m:
        return BackendError(
            f"the prompt is {m.group(2)} tokens but the server takes fewer than "
            f"{m.group(1)} (max_input_tokens); use a shorter prompt or a server with "
            "a longer context"
        )
    m = _TOTAL_RE.search(message)
    if m:
        return BackendError(
            f"the prompt ({m.group(2)} tokens) leaves no room to answer within the "
            f"server's max_total_tokens of {m.group(1)}"
        )
    return BackendError(f"the server rejected the request (422): {short(message)}")


class InferenceClientTransport:
    """A ``Transport`` over one ``AsyncInferenceClient``, speaking TGI's chat API.

    Subclasses set ``provider``, ``model`` and ``endpoint`` and may override the hooks:
    ``_max_new`` and ``_stop_limit`` (a server's limits), ``_request`` (another route) and
    ``_retry_422`` (a re-send that a validation answer calls for).
    """

    provider: str
    model: str
    endpoint: str
    # Why a reasoning effort or thinking budget is refused: TGI's chat and generate APIs have
    # no field for either (specs/tgi-openapi.json: ChatRequest, GenerateParameters); a
    # reasoning model's inline thinking comes back in the text, which the backend sets apart.
    no_reasoning = (
        "the chat API of TGI and the Hugging Face router has no reasoning controls (no "
        "reasoning effort or thinking budget field)"
    )

    def __init__(self, client: AsyncInferenceClient, *, token: str | None) -> None:
        if token:
            remember_secret(token)
        self._client = client

    @property
    def suggested_concurrency(self) -> int | None:
        return None

    async def start(self) -> None:
        return None

    # -- hooks ---------------------------------------------------------------------------
    def _max_new(self, params: GenerationParams) -> int:
        return params.max_tokens

    def _stop_limit(self) -> int:
        return DEFAULT_MAX_STOP_SEQUENCES

    def _retry_422(self, message: str) -> bool:
        """Whether a 422 with this message is fixed by something other than a smaller
        ``max_new_tokens`` (and the request should simply go again)."""
        return False

    async def _request(
        self, messages: list[Message], params: GenerationParams, max_new: int
    ) -> Completion:
        return await self._chat(messages, params, max_new)

    # -- calls ---------------------------------------------------------------------------
    def _stops(self, params: GenerationParams) -> tuple[list[str] | None, list[str]]:
        """Stop strings for the server (at most its limit) and the full list for us."""
        stops = list(params.stop or [])
        return (stops[: self._stop_limit()] or None), stops

    def _refuse_reasoning(self, params: GenerationParams) -> None:
        refuse_reasoning(
            params,
            f"{self.model}: {self.no_reasoning}",
            "serve the model with vLLM or llama.cpp and evaluate it as openai:MODEL with "
            "--base-url",
        )

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion:
        self._refuse_reasoning(params)
        max_new = self._max_new(params)
        # Up to two re-sends: once for the subclass's fix (TGI: /generate), once to shrink
        # max_new_tokens.
        for _ in range(3):
            try:
                return await self._request(messages, params, max_new)
            except (asyncio.CancelledError, TransientError, BackendError):
                raise
            except Exception as exc:
                text = str(exc)
                if status_of(exc) != 422:
                    raise classify(exc, self.endpoint) from exc
                if self._retry_422(text):
                    continue
                fitted = fitted_max_new(text)
                if fitted is not None and fitted < max_new:
                    max_new = fitted
                    continue
                raise too_long(text) from exc
        raise BackendError("the prompt does not fit the server's token limits")

    def sent_params(self, params: GenerationParams) -> dict[str, Any]:
        """The generation parameters a request with ``params`` sends (before any re-send
        with a smaller ``max_new_tokens``); ``SettingRefused`` for a reasoning setting."""
        self._refuse_reasoning(params)
        return self._chat_params(params, self._max_new(params))

    def param_notes(self, params: GenerationParams) -> list[str]:
        """Each of ``params`` the chat route sends otherwise than asked, and why."""
        penalty = params.repetition_penalty
        if penalty is None or penalty == 1.0:
            return []
        return [
            f"repetition_penalty {penalty:g} not sent: the chat API of TGI and the Hugging "
            "Face router has no repetition penalty (TGI's /generate has)"
        ]

    def _chat_params(self, params: GenerationParams, max_new: int) -> dict[str, Any]:
        # The chat route maps temperature 0 to greedy decoding itself. It has no repetition
        # penalty field (only /generate does), and OpenAI's frequency_penalty is no stand-in.
        server_stops, _ = self._stops(params)
        sent: dict[str, Any] = {"max_tokens": max_new, "temperature": params.temperature}
        if server_stops:
            sent["stop"] = server_stops
        if 0 < params.top_p < 1:
            sent["top_p"] = params.top_p
        if params.seed is not None:
            sent["seed"] = params.seed
        if params.logprobs:
            sent["logprobs"] = True
        return sent

    async def _chat(
        self, messages: list[Message], params: GenerationParams, max_new: int
    ) -> Completion:
        _, stops = self._stops(params)
        sent = self._chat_params(params, max_new)
        out = await self._client.chat_completion(
            [{"role": m.role, "content": m.content} for m in messages], **sent
        )
        if not out.choices:
            raise TransientError("the server returned no choices")
        choice = out.choices[0]
        text = choice.message.content or ""
        text, stopped = truncate_at_stop(text, stops)
        logprobs = None
        if choice.logprobs is not None and choice.logprobs.content:
            logprobs = [float(t.logprob) for t in choice.logprobs.content]
        usage = out.usage
        return Completion(
            text=text,
            reasoning=_reasoning(choice.message),
            finish_reason="stop" if stopped else choice.finish_reason,
            usage=Usage(
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
                reasoning_tokens=_detail(usage, "completion_tokens_details", "reasoning_tokens"),
                cache_read_tokens=_detail(usage, "prompt_tokens_details", "cached_tokens"),
            ),
            logprobs=logprobs,
            params=sent,
        )

    async def aclose(self) -> None:
        await self._client.close()  # type: ignore[no-untyped-call]


def _reasoning(message: Any) -> str | None:
    """The thinking a router provider returned apart from the answer: ``reasoning`` (parsed by
    huggingface_hub) or, kept as an extra attribute, ``reasoning_content`` (llama.cpp, older
    vLLM), as ``openai_protocol.parse_chat_completion`` reads them. TGI itself returns
    neither: its thinking stays inline, and the backend sets it apart."""
    reasoning = message.reasoning or getattr(message, "reasoning_content", None)
    return reasoning if isinstance(reasoning, str) and reasoning else None


def _detail(usage: Any, group: str, name: str) -> int | None:
    """A count of ``usage``'s details (``completion_tokens_details.reasoning_tokens``,
    ``prompt_tokens_details.cached_tokens``), kept by huggingface_hub as an extra attribute
    (a dict) where a router provider reports it (TGI itself reports neither); None: not
    reported."""
    details = getattr(usage, group, None)
    count = details.get(name) if isinstance(details, dict) else None
    return int(count) if isinstance(count, int) else None
