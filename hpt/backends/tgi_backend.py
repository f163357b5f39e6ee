"""Text Generation Inference servers and Hugging Face inference via ``AsyncInferenceClient``.

``tgi:URL`` reads ``/info`` once (model id, ``max_concurrent_requests``, token limits) and
maps parameters to TGI's published rules (specs/tgi-openapi.json): temperature must be
positive, so greedy decoding is ``do_sample=false``; top_p lies in (0, 1); at most
``max_stop_sequences`` stop strings go to the server (the rest are applied here); the seed
must be positive; ``max_new_tokens`` stays within ``max_total_tokens``. It uses the chat API
and falls back to ``/generate`` with a plain prompt when the server has no chat template.
``hf:MODEL_ID`` uses Hugging Face's inference providers through the chat API.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, cast

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
from pydantic import BaseModel, ConfigDict

from hpt.backends.base import Completion, GenerationParams, Message, Usage
from hpt.backends.errors import BackendError, FatalBackendError, TransientError
from hpt.backends.openai_protocol import short
from hpt.backends.ratelimit_headers import wait_from_headers
from hpt.backends.registry import ApiChoice
from hpt.backends.secrets import remember_secret

# TGI's validation messages (router/src/validation.rs) for prompts that do not fit.
_TOTAL_RE = re.compile(
    r"must be <= (\d+)\. Given: (\d+) `inputs` tokens and (\d+) `max_new_tokens`"
)
_INPUT_RE = re.compile(r"must have less than (\d+) tokens\. Given: (\d+)")
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


def _truncate_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    cut = min((i for s in stops if (i := text.find(s)) >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def _classify(exc: BaseException, where: str) -> Exception:
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


def _status(exc: BaseException) -> int | None:
    if isinstance(exc, ValidationError):
        return 422
    response = getattr(exc, "response", None) or getattr(exc.__cause__, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _headers_wait(exc: BaseException) -> float | None:
    cause = exc.__cause__
    response = getattr(cause, "response", None)
    return wait_from_headers(response.headers) if response is not None else None


class HFTransport:
    """``AsyncInferenceClient`` against one TGI server (``url``) or a Hub model id."""

    def __init__(
        self,
        target: str,
        *,
        is_url: bool,
        api: ApiChoice = "auto",
        hf_provider: str | None = None,
        token: str | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        if token:
            remember_secret(token)
        self.provider = "tgi" if is_url else "hf"
        self._is_url = is_url
        self._url = target.rstrip("/")
        self.endpoint = self._url if is_url else f"hf-inference:{hf_provider or 'auto'}"
        self.model = target if not is_url else "?"  # /info fills it in for a TGI server
        self._client = (
            AsyncInferenceClient(model=self._url, token=token, timeout=timeout_s)
            if is_url
            else AsyncInferenceClient(
                model=target,
                provider=cast(Any, hf_provider or "auto"),
                token=token,
                timeout=timeout_s,
            )
        )
        self._api: ApiChoice = api if is_url else "chat"
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
        if not self._is_url:
            return
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

    # -- parameters ----------------------------------------------------------------------
    def _max_new(self, params: GenerationParams) -> int:
        if self.info is None:
            return params.max_tokens
        return max(1, min(params.max_tokens, self.info.max_total_tokens - 1))

    def _stops(self, params: GenerationParams) -> tuple[list[str] | None, list[str]]:
        """Stop strings for the server (at most its limit) and the full list for us."""
        stops = list(params.stop or [])
        limit = self.info.max_stop_sequences if self.info else 4
        return (stops[:limit] or None), stops

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion:
        max_new = self._max_new(params)
        # Up to two re-sends: once to fall back to /generate, once to shrink max_new_tokens.
        for _ in range(3):
            try:
                if self._api == "generate":
                    return await self._generate(messages, params, max_new)
                return await self._chat(messages, params, max_new)
            except (asyncio.CancelledError, TransientError, BackendError):
                raise
            except Exception as exc:
                text = str(exc)
                if _status(exc) != 422:
                    raise _classify(exc, self.endpoint) from exc
                if self._api == "auto" and _TEMPLATE_RE.search(text):
                    self._api = "generate"  # this server has no chat template
                    continue
                fitted = self._fit(text)
                if fitted is not None and fitted < max_new:
                    max_new = fitted
                    continue
                raise self._too_long(text) from exc
        raise BackendError("the prompt does not fit the server's token limits")

    def _fit(self, message: str) -> int | None:
        m = _TOTAL_RE.search(message)
        if not m:
            return None
        total, given_inputs = int(m.group(1)), int(m.group(2))
        room = total - given_inputs
        return room if room >= 1 else None

    def _too_long(self, message: str) -> BackendError:
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

    async def _chat(
        self, messages: list[Message], params: GenerationParams, max_new: int
    ) -> Completion:
        server_stops, stops = self._stops(params)
        # The chat route maps temperature 0 to greedy decoding itself. It has no repetition
        # penalty field (only /generate does), and OpenAI's frequency_penalty is no stand-in.
        kwargs: dict[str, Any] = {
            "max_tokens": max_new,
            "stop": server_stops,
            "temperature": params.temperature,
        }
        if 0 < params.top_p < 1:
            kwargs["top_p"] = params.top_p
        if params.seed is not None:
            kwargs["seed"] = params.seed
        if params.logprobs:
            kwargs["logprobs"] = True
        out = await self._client.chat_completion(
            [{"role": m.role, "content": m.content} for m in messages], **kwargs
        )
        if not out.choices:
            raise TransientError("the server returned no choices")
        choice = out.choices[0]
        text = choice.message.content or ""
        text, stopped = _truncate_at_stop(text, stops)
        logprobs = None
        if choice.logprobs is not None and choice.logprobs.content:
            logprobs = [float(t.logprob) for t in choice.logprobs.content]
        usage = out.usage
        return Completion(
            text=text,
            finish_reason="stop" if stopped else choice.finish_reason,
            usage=Usage(
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
            ),
            logprobs=logprobs,
        )

    async def _generate(
        self, messages: list[Message], params: GenerationParams, max_new: int
    ) -> Completion:
        server_stops, stops = self._stops(params)
        sampling = params.temperature > 0
        out = await self._client.text_generation(
            plain_prompt(messages),
            details=True,
            decoder_input_details=True,  # prefill tokens give the prompt's token count
            max_new_tokens=max_new,
            do_sample=sampling,
            temperature=params.temperature if sampling else None,
            top_p=params.top_p if sampling and 0 < params.top_p < 1 else None,
            repetition_penalty=params.repetition_penalty,
            seed=params.seed if params.seed else None,  # TGI wants a positive seed
            stop=server_stops,
            return_full_text=False,
        )
        details = out.details
        text, stopped = _truncate_at_stop(out.generated_text, stops)
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
        )

    async def aclose(self) -> None:
        await self._client.close()  # type: ignore[no-untyped-call]
        if self._session is not None:
            await self._session.close()
