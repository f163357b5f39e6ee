"""The OpenAI chat-completions wire format, shared by the SDK client and the lean aiohttp
client. Imports no SDK: importing ``openai`` alone costs most of a second."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from pydantic_core import from_json

from hpt.backends.base import Completion, GenerationParams, Message
from hpt.backends.errors import BackendError, FatalBackendError, TransientError
from hpt.backends.openai_reasoning import ReasoningControl, ReasoningRules, reasoning_rules
from hpt.backends.ratelimit_headers import wait_from_headers
from hpt.backends.secrets import redact


def is_openai_host(base_url: str) -> bool:
    return (urlparse(base_url).hostname or "").endswith("openai.com")


def classify_status(
    code: int,
    detail: str,
    headers: Any,
    endpoint: str,
    model: str,
    key_env: str = "OPENAI_API_KEY",
) -> Exception:
    """What an HTTP error status means for the caller: stop the run (bad key, unknown model),
    retry (rate limits, overload, 5xx), or fail this sample (400/422). Anthropic's statuses
    mean the same (529 is its "overloaded")."""
    detail = f"HTTP {code}: {detail}"
    if code in (401, 403):
        return FatalBackendError(f"{endpoint} refused our credentials ({code}); check {key_env}")
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


def batch_status_error(
    code: int, detail: str, headers: Any, endpoint: str, what: str, key_env: str
) -> Exception:
    """What an HTTP error from a Batch API route (``what``: the call) means: as for a chat
    call (retry rate limits and 5xx, stop on a refused key), but a 404 says the endpoint
    has no such API -- most OpenAI-compatible servers (vLLM, llama.cpp) have none."""
    if code == 404:
        return FatalBackendError(
            f"{endpoint} has no Batch API ({what}: HTTP 404: {detail}); run without --batch"
        )
    return classify_status(code, detail, headers, endpoint, "", key_env)


def resolve_penalty_field(setting: str | None, base_url: str) -> str | None:
    """Which request field carries a multiplicative repetition penalty on this server.

    "auto": api.openai.com has none (and rejects unknown fields); vLLM and most compatible
    servers take ``repetition_penalty`` in the body. Anything else is taken as given.
    """
    if setting != "auto":
        return setting
    return None if is_openai_host(base_url) else "repetition_penalty"


@dataclass(frozen=True)
class ChatFields:
    """Which generation parameters a chat-completions server is sent, under what names."""

    penalty: str | None  # the repetition penalty's field; None: not sent
    rules: ReasoningRules  # reasoning settings, and what a reasoning model refuses
    openai_host: bool
    # OpenAI's reasoning models take max_completion_tokens, the limit on visible and reasoning
    # tokens together, and refuse max_tokens (SDK: openai/types/chat/completion_create_params.py)
    max_tokens: str = "max_tokens"


def chat_fields(
    model: str,
    base_url: str,
    penalty_setting: str | None,
    reasoning_control: ReasoningControl = "auto",
) -> ChatFields:
    openai_host = is_openai_host(base_url)
    penalty = resolve_penalty_field(penalty_setting, base_url)
    rules = reasoning_rules(model, reasoning_control, openai_host)
    limit = "max_tokens" if rules.sampling else "max_completion_tokens"
    return ChatFields(penalty, rules, openai_host, limit)


def chat_params(params: GenerationParams, fields: ChatFields) -> dict[str, Any]:
    """The generation parameters of a chat-completions request, as sent (``SettingRefused``
    for a reasoning setting the model cannot take)."""
    sent: dict[str, Any] = {}
    sampling = fields.rules.sampling_at(params)
    if sampling:
        sent["temperature"] = params.temperature
        sent["top_p"] = params.top_p
    sent[fields.max_tokens] = params.max_tokens
    if params.seed is not None:
        sent["seed"] = params.seed
    if params.stop:
        sent["stop"] = params.stop
    if params.logprobs and sampling:
        sent["logprobs"] = True
    if fields.penalty and params.repetition_penalty is not None:
        sent[fields.penalty] = params.repetition_penalty
    sent.update(fields.rules.fields(params))
    return sent


def chat_notes(params: GenerationParams, fields: ChatFields) -> list[str]:
    """One sentence for each of ``params`` a request sends otherwise than asked, and why."""
    notes = fields.rules.notes(params)
    penalty = params.repetition_penalty
    if fields.penalty is None and penalty is not None and penalty != 1.0:
        why = (
            "OpenAI's API has no multiplicative repetition penalty"
            if fields.openai_host
            else "this model's repetition_penalty_field is unset (its server takes none)"
        )
        notes.append(f"repetition_penalty {penalty:g} not sent: {why}")
    return notes


def chat_body(model: str, messages: list[Message], sent: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions request body with the generation parameters ``sent``."""
    return {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        **sent,
    }


def short(exc: BaseException | str, limit: int = 300) -> str:
    text = redact(str(exc).strip()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _from_json(raw: bytes) -> Any:
    try:
        return from_json(raw)  # pydantic-core's parser: a third of json.loads' time
    except ValueError:
        # It refuses a little that Python's json reads, such as a lone surrogate escape
        # ("\ud800") from a server that split a character's bytes.
        return json.loads(raw)


def parse_chat_completion(raw: bytes, sent: dict[str, Any] | None = None) -> Completion:
    """Read an OpenAI-shaped chat completion's bytes (``sent``: the request's generation
    parameters, which it reports); a body of another shape is a transient fault."""
    try:
        data = _from_json(raw)
    except ValueError as exc:
        head = raw[:120].decode("utf-8", "replace")
        raise TransientError(f"malformed chat completion ({exc!r}): {head!r}") from exc
    return chat_completion(data, sent, raw)


def chat_completion(data: Any, sent: dict[str, Any] | None = None, raw: bytes = b"") -> Completion:
    """An OpenAI-shaped chat completion, parsed (a direct call's body, or a batch result
    line's ``response.body``); a body of another shape is a transient fault.

    The thinking a server returns apart goes to ``reasoning``: vLLM's ``reasoning`` field, or
    ``reasoning_content`` (llama.cpp's server, and vLLM before it renamed the field:
    https://docs.vllm.ai/en/stable/features/reasoning_outputs/). Inline ``<think>`` text
    stays in the content; the backend sets it apart. OpenAI itself returns no thinking here,
    only its count, ``usage.completion_tokens_details.reasoning_tokens``."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
        text = message.get("content") or ""
        reasoning = message.get("reasoning") or message.get("reasoning_content") or None
        if not isinstance(text, str) or (reasoning is not None and not isinstance(reasoning, str)):
            raise TypeError("content or reasoning is not a string")
        logprobs = None
        lp = choice.get("logprobs")
        if isinstance(lp, dict) and lp.get("content"):
            logprobs = [float(t["logprob"]) for t in lp["content"]]
        # One validation of the whole (nested) completion: cheaper than building each part.
        return Completion.model_validate({
            "text": text,
            "reasoning": reasoning,
            "finish_reason": choice.get("finish_reason"),
            "usage": usage_counts(data.get("usage") or {}),
            "logprobs": logprobs,
            "params": sent,
        })  # fmt: skip
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        head = (raw or repr(data).encode())[:120].decode("utf-8", "replace")
        raise TransientError(f"malformed chat completion ({exc!r}): {head!r}") from exc


def usage_counts(usage: dict[str, Any]) -> dict[str, int]:
    """``usage`` by token class. Reasoning tokens: ``completion_tokens_details.reasoning_tokens``
    (OpenAI; vLLM with a reasoning parser). Cache reads: ``prompt_tokens_details.cached_tokens``
    (OpenAI; vLLM only with --enable-prompt-tokens-details; llama.cpp's server since 2026-02);
    cache writes: ``prompt_tokens_details.cache_write_tokens`` (OpenAI's GPT-5.6 and later,
    which bill them; earlier models neither bill nor report any). A class the server does not
    report stays None."""
    counts = {
        "prompt_tokens": int(usage.get("prompt_tokens") or 0),
        "completion_tokens": int(usage.get("completion_tokens") or 0),
    }
    completion = usage.get("completion_tokens_details")
    if completion and completion.get("reasoning_tokens") is not None:
        counts["reasoning_tokens"] = int(completion["reasoning_tokens"])
    prompt = usage.get("prompt_tokens_details")
    if prompt and prompt.get("cached_tokens") is not None:
        counts["cache_read_tokens"] = int(prompt["cached_tokens"])
    if prompt and prompt.get("cache_write_tokens") is not None:
        counts["cache_write_tokens"] = int(prompt["cache_write_tokens"])
    return counts
