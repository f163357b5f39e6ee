"""Model specs (``local``, ``openai:MODEL``) and opening the backend each one names."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Literal

from pydantic import BaseModel

from hpt.backends.base import Backend
from hpt.backends.local import LOCAL_MODEL_NAME, local_server
from hpt.backends.openai_backend import OpenAIBackend
from hpt.backends.retry import CallLimiter, RetryPolicy

Provider = Literal["local", "openai"]
SPEC_HELP = "use 'local' (the embedded SmolLM2 model) or 'openai:MODEL'"


class UnknownModelSpecError(ValueError):
    pass


class ModelSpec(BaseModel):
    provider: Provider
    model: str

    def __str__(self) -> str:
        return "local" if self.provider == "local" else f"{self.provider}:{self.model}"


def parse_model_spec(spec: str) -> ModelSpec:
    spec = spec.strip()
    if spec == "local":
        return ModelSpec(provider="local", model=LOCAL_MODEL_NAME)
    provider, sep, model = spec.partition(":")
    if not sep or not model.strip():
        raise UnknownModelSpecError(f"model spec {spec!r} is not PROVIDER:MODEL; {SPEC_HELP}")
    if provider != "openai":
        raise UnknownModelSpecError(f"unknown model provider {provider!r} in {spec!r}; {SPEC_HELP}")
    return ModelSpec(provider="openai", model=model.strip())


class BackendOptions(BaseModel):
    base_url: str | None = None
    max_concurrency: int | None = None
    requests_per_minute: int | None = None
    retry: RetryPolicy = RetryPolicy()
    timeout_s: float = 600.0


@contextlib.asynccontextmanager
async def open_backend(spec: ModelSpec, options: BackendOptions) -> AsyncIterator[Backend]:
    """Yield a ready backend; anything it started (the embedded server) stops on exit."""
    limiter = CallLimiter(options.max_concurrency, options.requests_per_minute)
    async with contextlib.AsyncExitStack() as stack:
        if spec.provider == "local":
            url = await stack.enter_async_context(local_server())
            backend = OpenAIBackend(
                spec.model,
                base_url=url,
                api_key="no-key",  # the embedded server takes none
                retry=options.retry,
                limiter=limiter,
                timeout_s=options.timeout_s,
                repetition_penalty_field="repeat_penalty",  # llama.cpp's name for it
                label=f"local:{spec.model}",
            )
        else:
            backend = OpenAIBackend(
                spec.model,
                base_url=options.base_url,
                retry=options.retry,
                limiter=limiter,
                timeout_s=options.timeout_s,
            )
        stack.push_async_callback(backend.aclose)
        await backend.check()
        yield backend
