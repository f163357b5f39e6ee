"""``openai:MODEL``: OpenAI's API, or any OpenAI-compatible server named by ``endpoints``."""

from __future__ import annotations

import os
from typing import Literal

from hpt.backends.errors import FatalBackendError
from hpt.backends.managed import Transport
from hpt.backends.openai_reasoning import ReasoningControl
from hpt.backends.providers import ModelConfig, SimpleProvider, UnknownModelSpecError, api_key

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


class OpenAIConfig(ModelConfig):
    provider: Literal["openai"] = "openai"
    model: str
    # The body field for a repetition penalty ("auto": by host)
    repetition_penalty_field: str | None = "auto"
    # How the server takes --reasoning-effort and --thinking-budget: "auto" (OpenAI's rules by
    # model on api.openai.com, "reasoning_effort" elsewhere), "openai" (OpenAI's rules on any
    # host: Azure OpenAI, a proxy), "reasoning_effort" (vLLM, llama.cpp: a top-level
    # reasoning_effort, a budget as vLLM's thinking_token_budget), "chat_template_kwargs"
    # (enable_thinking on or off, as Qwen3's template takes it), "none" (no reasoning
    # settings). Each is explained in hpt.backends.openai_reasoning.
    reasoning_control: ReasoningControl = "auto"
    # The official SDK, or hpt's lean aiohttp client ("auto": the SDK for api.openai.com,
    # the lean client for self-hosted servers, where call rates are high)
    client: Literal["auto", "sdk", "aiohttp"] = "auto"


class OpenAIProvider(SimpleProvider):
    name = "openai"
    config = OpenAIConfig
    spec_help = "openai:MODEL"

    def from_spec(self, rest: str) -> OpenAIConfig:
        if not rest:
            raise UnknownModelSpecError("no model named")
        return OpenAIConfig(model=rest)

    def make_transport(self, config: ModelConfig) -> Transport:
        from hpt.backends.openai_protocol import is_openai_host

        assert isinstance(config, OpenAIConfig)
        key = api_key(config, "OPENAI_API_KEY")
        url = config.endpoint or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_URL
        lean = config.client == "aiohttp" or (config.client == "auto" and not is_openai_host(url))
        if lean and not key:
            raise FatalBackendError(
                "no OpenAI API key: set OPENAI_API_KEY in the environment or .env (any value "
                "for a local server that ignores keys)"
            )
        if lean:
            from hpt.backends.openai_lean import LeanOpenAITransport

            return LeanOpenAITransport(
                config.model,
                base_url=url,
                api_key=key,
                timeout_s=config.timeout_s,
                repetition_penalty_field=config.repetition_penalty_field,
                reasoning_control=config.reasoning_control,
            )
        from hpt.backends.openai_backend import OpenAITransport

        return OpenAITransport(
            config.model,
            base_url=url,
            api_key=key,
            timeout_s=config.timeout_s,
            repetition_penalty_field=config.repetition_penalty_field,
            reasoning_control=config.reasoning_control,
        )
