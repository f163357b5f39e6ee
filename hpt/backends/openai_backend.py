"""OpenAI chat completions, and any OpenAI-compatible server (vLLM, llama.cpp, TGI's /v1).

Uses the official ``openai.AsyncOpenAI`` client (keys, base URL, error classes) over its
aiohttp transport, but sends the request body with the client's low-level ``post`` and reads
the JSON itself: the typed ``chat.completions.create`` path spends most of its time
transforming parameters and building response models (measured: 76% vs 90% of the ideal
call rate at 128 concurrent calls, see bench/backends.py).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

import httpx2
import openai
from openai import AsyncOpenAI

from hpt.backends.base import Completion, GenerationParams, Message, Usage
from hpt.backends.errors import BackendError, FatalBackendError, TransientError
from hpt.backends.ratelimit_headers import wait_from_headers
from hpt.backends.secrets import redact, remember_secret


def is_openai_host(base_url: str) -> bool:
    return (urlparse(base_url).hostname or "").endswith("openai.com")


def classify_status(code: int, detail: str, headers: Any, endpoint: str, model: str) -> Exception:
    """What an HTTP error from an OpenAI-compatible server means for the caller."""
    detail = f"HTTP {code}: {detail}"
    if code in (401, 403):
        return FatalBackendError(
            f"{endpoint} refused our credentials ({code}); check OPENAI_API_KEY"
        )
    if code == 404:
        return FatalBackendError(
            f"model {model!r} or its endpoint was not found at {endpoint} (404); "
            "check the model name and base URL"
        )
    if code in (429, 503, 529):
        return TransientError(detail, retry_after_s=wait_from_headers(headers), overloaded=True)
    if code in (408, 409) or code >= 500:
        return TransientError(detail, retry_after_s=wait_from_headers(headers))
    return BackendError(detail)  # 400/422: this request is wrong, retrying won't help


def resolve_penalty_field(setting: str | None, base_url: str) -> str | None:
    """Which request field carries a multiplicative repetition penalty on this server.

    "auto": api.openai.com has none (and rejects unknown fields); vLLM and most compatible
    servers take ``repetition_penalty`` in the body. Anything else is taken as given.
    """
    if setting != "auto":
        return setting
    return None if is_openai_host(base_url) else "repetition_penalty"


def chat_body(
    model: str, messages: list[Message], params: GenerationParams, penalty_field: str | None
) -> dict[str, Any]:
    """A chat-completions request body."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in messages],
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
    if penalty_field and params.repetition_penalty is not None:
        body[penalty_field] = params.repetition_penalty
    return body


def short(exc: BaseException | str, limit: int = 300) -> str:
    text = redact(str(exc).strip()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


class OpenAITransport:
    """``/v1/chat/completions``. ``repetition_penalty_field``: "auto" guesses from the host."""

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        repetition_penalty_field: str | None = "auto",
        provider: str = "openai",
    ) -> None:
        try:
            # None lets the SDK read OPENAI_BASE_URL / OPENAI_API_KEY itself.
            self._client = AsyncOpenAI(
                base_url=base_url,
                api_key=api_key,
                max_retries=0,  # retries are ours: bounded, jittered, and classified
                timeout=timeout_s,
                http_client=openai.DefaultAioHttpClient(
                    timeout=timeout_s,
                    limits=httpx2.Limits(max_connections=None, max_keepalive_connections=None),
                ),
            )
        except openai.OpenAIError as exc:
            raise FatalBackendError(
                "no OpenAI API key: set OPENAI_API_KEY in the environment or .env (any value "
                "for a local server that ignores keys)"
            ) from exc
        remember_secret(self._client.api_key)
        self.provider = provider
        self.model = model
        self.endpoint = str(self._client.base_url)
        self._rp_field = resolve_penalty_field(repetition_penalty_field, self.endpoint)

    @property
    def suggested_concurrency(self) -> int | None:
        return None

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion:
        try:
            resp = await self._client.post(
                "/chat/completions",
                body=chat_body(self.model, messages, params, self._rp_field),
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
        return parse_chat_completion(resp.content)

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


def parse_chat_completion(raw: bytes) -> Completion:
    """Read an OpenAI-shaped chat completion; a body of another shape is a transient fault."""
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
        message = choice["message"]
        text = message.get("content") or ""
        if not isinstance(text, str):
            raise TypeError("content is not a string")
        logprobs = None
        lp = choice.get("logprobs")
        if isinstance(lp, dict) and lp.get("content"):
            logprobs = [float(t["logprob"]) for t in lp["content"]]
        usage = data.get("usage") or {}
        return Completion(
            text=text,
            finish_reason=choice.get("finish_reason"),
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
            ),
            logprobs=logprobs,
        )
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        head = raw[:120].decode("utf-8", "replace")
        raise TransientError(f"malformed chat completion ({exc!r}): {head!r}") from exc
