"""Anthropic's Messages API through the official ``anthropic.AsyncAnthropic`` client.

Differences from chat completions handled here: the system prompt goes in ``system``;
there is no repetition penalty and no logprobs; ``stop`` becomes ``stop_sequences``.
API version 2026-10-21 (the SDK's default) rejects ``temperature``/``top_p`` outright, so
they are sent only when the run pins ``anthropic_version = "2023-06-01"``, and then only
temperature (clamped to the API's 0..1), because current models refuse both together; never
with thinking on, which takes no temperature, nor to models that refuse sampling parameters.

Thinking: a reasoning effort or thinking budget becomes the model's own form
(``hpt.backends.anthropic_thinking``, from the Models API's capabilities when the endpoint
serves them, else the model's generation). ``thinking`` and ``redacted_thinking`` blocks are
read apart from the answer, and an assistant turn sends its blocks back unchanged, as the
API requires (https://platform.claude.com/docs/build-with-claude/thinking).

Prompt caching (``prompt_cache`` "auto"): the prefixes every sample shares are marked with
``cache_control`` breakpoints (``hpt.backends.prompt_cache``); usage reports the tokens read
from and written to the cache apart, and counts them in the prompt. Message Batches:
``batch_api()`` (``hpt.backends.anthropic_batch``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anthropic
import httpx2
from anthropic import AsyncAnthropic

from hpt.backends.anthropic_reply import completion_of
from hpt.backends.anthropic_thinking import (
    SAMPLING_REMOVED,
    THINKING_PAGE,
    ThinkingRules,
    rules_for,
    table_rules,
    thinking_fields,
    thinking_notes,
    thinking_on,
)
from hpt.backends.base import Completion, GenerationParams, Message
from hpt.backends.errors import FatalBackendError, TransientError
from hpt.backends.openai_protocol import classify_status, short
from hpt.backends.prompt_cache import PromptCache, breakpoints, system_blocks, text_blocks
from hpt.backends.secrets import remember_secret
from hpt.backends.urls import split_query

if TYPE_CHECKING:
    from hpt.backends.anthropic_batch import AnthropicBatchAPI

LEGACY_VERSION = "2023-06-01"
VERSION_RULE = (
    f"Anthropic's API takes sampling parameters under version {LEGACY_VERSION} only (the "
    "SDK sends a later one; a model's anthropic_version setting can pin it)"
)


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
        prompt_cache: PromptCache = "auto",
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
        self.prompt_cache = prompt_cache
        # Until start() reads the Models API: the rules of the model's generation.
        self.rules: ThinkingRules | None = table_rules(model)

    @property
    def suggested_concurrency(self) -> int | None:
        return None

    def sent_params(self, params: GenerationParams) -> dict[str, Any]:
        """The generation parameters a request with ``params`` sends (``SettingRefused`` for
        a reasoning setting the model cannot take)."""
        sent: dict[str, Any] = {"max_tokens": params.max_tokens}
        if params.stop:
            sent["stop_sequences"] = params.stop
        thinking = thinking_fields(self.model, self.rules, params)
        if self._temperature_taken(thinking):
            sent["temperature"] = min(params.temperature, 1.0)
        return {**sent, **thinking}

    def _temperature_taken(self, thinking: dict[str, Any]) -> bool:
        """Only the legacy API version takes a temperature; never with thinking on
        (thinking page), nor by a model that refuses sampling parameters."""
        fixed = self.rules is not None and self.rules.fixed_sampling
        return self._sampling and not fixed and not thinking_on(thinking)

    def param_notes(self, params: GenerationParams) -> list[str]:
        """The settings not sent as asked, and why: the sampling settings (Anthropic's
        defaults, temperature 1 and top_p 1, need no note when they are not sent) and an
        effort sent as a thinking budget."""
        return self._sampling_notes(params) + thinking_notes(self.model, self.rules, params)

    def _sampling_notes(self, params: GenerationParams) -> list[str]:
        sent = self.sent_params(params)
        temperature, top_p = f"temperature {params.temperature:g}", f"top_p {params.top_p:g}"
        if not self._sampling:
            dropped = [s for s, given in ((temperature, params.temperature != 1.0),
                                          (top_p, params.top_p < 1.0)) if given]  # fmt: skip
            # Pinning the legacy version does not help a model that refuses them anyway.
            why = self._fixed_sampling() or VERSION_RULE
            return [f"{' and '.join(dropped)} not sent: {why}"] if dropped else []
        notes = []
        if "temperature" in sent and sent["temperature"] != params.temperature:
            notes.append(
                f"{temperature} sent as {sent['temperature']:g}: Anthropic's temperature runs "
                "from 0 to 1"
            )
        elif "temperature" not in sent and params.temperature != 1.0:
            notes.append(f"{temperature} not sent: {self._no_temperature()}")
        if params.top_p < 1.0:
            notes.append(f"{top_p} not sent: Claude models refuse temperature and top_p together")
        return notes

    def _no_temperature(self) -> str:
        """Why the legacy API version sends no temperature."""
        return (
            self._fixed_sampling()
            or f"with thinking on, Claude takes no temperature ({THINKING_PAGE})"
        )

    def _fixed_sampling(self) -> str | None:
        """Why no sampling parameter is sent to a model that refuses them; None: it takes them."""
        if self.rules is None or not self.rules.fixed_sampling:
            return None
        return (
            f"{self.model} takes no sampling parameters other than their defaults "
            f"({SAMPLING_REMOVED})"
        )

    @property
    def client(self) -> AsyncAnthropic:
        return self._client

    def request_body(self, messages: list[Message], sent: dict[str, Any]) -> dict[str, Any]:
        """The Messages API request body for ``messages`` with the generation parameters
        ``sent``, as it goes on the wire (a direct call's JSON, a batch request's ``params``);
        with ``prompt_cache`` "auto", shared prefixes marked for caching (prompt_cache)."""
        marked = breakpoints(messages, self.model) if self.prompt_cache == "auto" else set()
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": sent["max_tokens"],
            "messages": [_turn(m, i in marked) for i, m in enumerate(messages)
                         if m.role != "system"],
        }  # fmt: skip
        if system:
            body["system"] = system_blocks(messages, marked) or system
        for name in ("stop_sequences", "thinking", "output_config", "temperature"):
            if name in sent:
                body[name] = sent[name]
        return body

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion:
        sent = self.sent_params(params)
        body = self.request_body(messages, sent)
        if "temperature" in body:
            # The SDK's create() takes no temperature (its API version refuses one): the
            # legacy version's goes in as an extra body field, to the same place in the JSON.
            body["extra_body"] = {"temperature": body.pop("temperature")}
        try:
            msg = await self._client.messages.create(**body)
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
        return completion_of(msg, sent)

    def batch_api(self) -> AnthropicBatchAPI:
        """Message Batches on this transport's client (``--batch``)."""
        from hpt.backends.anthropic_batch import AnthropicBatchAPI

        return AnthropicBatchAPI(self)

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
        """Check the endpoint and credentials, and read what the model takes from its Models
        API entry (https://platform.claude.com/docs/en/api/models) where the endpoint has one
        with ``capabilities``; else its generation's rules stand."""
        try:
            info = await self._client.models.retrieve(self.model)
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
            return  # reachable; a proxy may not describe models
        self.rules = rules_for(self.model, info.to_dict(mode="json").get("capabilities"))

    async def aclose(self) -> None:
        await self._client.close()


def _turn(message: Message, marked: bool = False) -> dict[str, Any]:
    """A user or assistant turn. An assistant turn with thinking blocks sends them first,
    unchanged (signatures and all), then its answer; a ``marked`` turn is split into text
    blocks at its shared prefix, that one marked for caching; any other turn is plain text,
    as before thinking existed."""
    if message.reasoning_blocks:
        answer = [{"type": "text", "text": message.content}] if message.content else []
        return {"role": message.role, "content": [*message.reasoning_blocks, *answer]}
    if marked:
        cut = min(message.shared_prefix or 0, len(message.content))
        return {"role": message.role, "content": text_blocks(message.content, [cut])}
    return {"role": message.role, "content": message.content}
