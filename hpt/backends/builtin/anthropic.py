"""``anthropic:MODEL``: Anthropic's Messages API."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hpt.backends.managed import Transport
from hpt.backends.providers import ModelConfig, SimpleProvider, UnknownModelSpecError, api_key


def _auto(value: str) -> bool:
    return value == "auto"


class AnthropicConfig(ModelConfig):
    provider: Literal["anthropic"] = "anthropic"
    model: str
    # Pin "2023-06-01" to send a temperature (the current API refuses one); even then none
    # goes with thinking on, nor to models that refuse sampling parameters (Opus 4.7 on)
    anthropic_version: str | None = None
    # "auto": mark the prompt prefixes every sample shares for Anthropic's prompt cache
    # (hpt.backends.prompt_cache; the run's --prompt-cache); "off": no marks. Saved only when
    # off, so the configs (and run.json) of runs that never set it stay as they were.
    prompt_cache: Literal["auto", "off"] = Field("auto", exclude_if=_auto)


class AnthropicProvider(SimpleProvider):
    name = "anthropic"
    config = AnthropicConfig
    spec_help = "anthropic:MODEL"

    def from_spec(self, rest: str) -> AnthropicConfig:
        if not rest:
            raise UnknownModelSpecError("no model named")
        return AnthropicConfig(model=rest)

    def make_transport(self, config: ModelConfig) -> Transport:
        from hpt.backends.anthropic_backend import AnthropicTransport  # over a second to import

        assert isinstance(config, AnthropicConfig)
        return AnthropicTransport(
            config.model,
            base_url=config.endpoint,
            api_key=api_key(config, "ANTHROPIC_API_KEY"),
            timeout_s=config.timeout_s,
            anthropic_version=config.anthropic_version,
            prompt_cache=config.prompt_cache,
        )
