"""``tgi:URL[,URL...]``: Text Generation Inference servers; several URLs make a pool."""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import Field, model_validator

from hpt.backends.managed import Transport
from hpt.backends.providers import ModelConfig, SimpleProvider, UnknownModelSpecError, api_key

ApiChoice = Literal["auto", "chat", "generate"]


class TGIConfig(ModelConfig):
    several_endpoints: ClassVar[bool] = True

    provider: Literal["tgi"] = "tgi"
    # "chat", "generate", or "auto" (chat, falling back to /generate without a template)
    api: ApiChoice = "auto"
    # How often a pool polls its replicas' /health
    health_interval_s: float = Field(5.0, gt=0)

    @model_validator(mode="after")
    def _check_urls(self) -> Self:
        if not self.endpoints:
            raise ValueError("a tgi model needs 'endpoints' (one URL, or several for a pool)")
        bad = [u for u in self.endpoints if not u.startswith(("http://", "https://"))]
        if bad:
            raise ValueError(f"tgi endpoints must be http(s) URLs, not {', '.join(map(repr, bad))}")
        return self


class TGIProvider(SimpleProvider):
    name = "tgi"
    config = TGIConfig
    spec_help = "tgi:URL[,URL...]"

    def from_spec(self, rest: str) -> TGIConfig:
        urls = [u.strip() for u in rest.split(",") if u.strip()]
        if not urls:
            raise UnknownModelSpecError("no server URL given")
        return TGIConfig(endpoints=urls)

    def make_transport(self, config: ModelConfig) -> Transport:
        from hpt.backends.pool import ReplicaPool
        from hpt.backends.tgi import TGITransport

        assert isinstance(config, TGIConfig)
        token = api_key(config, "HF_TOKEN")
        replicas = [
            TGITransport(url, api=config.api, token=token, timeout_s=config.timeout_s)
            for url in config.endpoints
        ]
        if len(replicas) == 1:
            return replicas[0]
        return ReplicaPool(replicas, health_interval_s=config.health_interval_s)
