"""``hf:MODEL_ID``: a Hub model through Hugging Face's inference providers."""

from __future__ import annotations

from typing import Literal

from hpt.backends.managed import Transport
from hpt.backends.providers import ModelConfig, SimpleProvider, UnknownModelSpecError, api_key


class HFConfig(ModelConfig):
    provider: Literal["hf"] = "hf"
    model: str
    # Which inference provider ("auto" or None lets Hugging Face choose)
    hf_provider: str | None = None


class HFProvider(SimpleProvider):
    name = "hf"
    config = HFConfig
    spec_help = "hf:MODEL_ID"

    def from_spec(self, rest: str) -> HFConfig:
        if not rest:
            raise UnknownModelSpecError("no model id given")
        return HFConfig(model=rest)

    def make_transport(self, config: ModelConfig) -> Transport:
        from hpt.backends.hf_router import HFRouterTransport

        assert isinstance(config, HFConfig)
        return HFRouterTransport(
            config.model,
            hf_provider=config.hf_provider,
            token=api_key(config, "HF_TOKEN"),
            timeout_s=config.timeout_s,
        )
