"""``local``: the embedded model, served by llama.cpp's llama-server, started for the run
with one decoding slot per call in flight, or the running one ``HPT_LOCAL_SERVER`` names."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Literal

from pydantic import Field

from hpt.backends.local import LOCAL_MODEL_NAME
from hpt.backends.providers import (
    ModelConfig,
    OpenedTransport,
    UnknownModelSpecError,
    api_key,
)


class LocalConfig(ModelConfig):
    provider: Literal["local"] = "local"
    model: str = LOCAL_MODEL_NAME
    # The server's decoding slots (calls decoded together): a run sets its --concurrency;
    # None, hpt run's default (8). Capped at hpt.backends.local.MAX_SLOTS.
    slots: int | None = Field(None, ge=1, exclude_if=lambda v: v is None)


class LocalProvider:
    name = "local"
    config = LocalConfig
    spec_help = "local"

    def from_spec(self, rest: str) -> LocalConfig:
        if rest:
            raise UnknownModelSpecError("the embedded model takes nothing after 'local'")
        return LocalConfig()

    @contextlib.asynccontextmanager
    async def open_transport(self, config: ModelConfig) -> AsyncIterator[OpenedTransport]:
        from hpt.backends.local import LocalTransport, find_gguf, local_endpoint

        assert isinstance(config, LocalConfig)
        api_key(config, None)  # the server takes none; a named but unset variable still stops
        async with local_endpoint(config.slots) as (base_url, slots):
            transport = LocalTransport(
                base_url, model=config.model, timeout_s=config.timeout_s, slots=slots
            )
            # The port changes every run; the cache keys the model by its GGUF file.
            yield OpenedTransport(transport, cache_endpoint=f"llama.cpp:{find_gguf().name}")
