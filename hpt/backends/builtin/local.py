"""``local``: the embedded model, served by llama.cpp servers started for the run."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Literal

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
        from hpt.backends.local import LocalTransport, find_gguf, local_servers
        from hpt.backends.openai_lean import LeanOpenAITransport

        assert isinstance(config, LocalConfig)
        api_key(config, None)  # the servers take none; a named but unset variable still stops
        # Two llama.cpp servers behind one transport: logprob calls go to the second.
        async with local_servers() as servers:
            fast = LeanOpenAITransport(
                config.model,
                base_url=servers.base_url,
                api_key="no-key",
                timeout_s=config.timeout_s,
                repetition_penalty_field="repeat_penalty",  # llama.cpp's name for it
                provider=self.name,
            )
            transport = LocalTransport(
                servers, fast, model=config.model, timeout_s=config.timeout_s
            )
            # The port changes every run; the cache keys the model by its GGUF file.
            yield OpenedTransport(transport, cache_endpoint=f"llama.cpp:{find_gguf().name}")
