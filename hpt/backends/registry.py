"""Model specs and configs, and opening the backend each one names.

A model is named on the command line as ``local``, ``openai:MODEL``, ``anthropic:MODEL``,
``tgi:URL[,URL...]`` (several URLs make a replica pool) or ``hf:MODEL_ID``, or by the name
of a ``[models.NAME]`` entry in a run config file, which can also set limits and endpoints.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hpt.backends.cache import ResponseCache
from hpt.backends.errors import FatalBackendError
from hpt.backends.limits import BackendLimits
from hpt.backends.local import LOCAL_MODEL_NAME, LocalTransport, find_gguf, local_servers
from hpt.backends.managed import ManagedBackend, Transport
from hpt.backends.retry import RetryPolicy
from hpt.backends.secrets import secret_from_env

Provider = Literal["local", "openai", "anthropic", "tgi", "hf"]
ApiChoice = Literal["auto", "chat", "generate"]
PROVIDERS: tuple[str, ...] = ("local", "openai", "anthropic", "tgi", "hf")
SPEC_HELP = (
    "use 'local', 'openai:MODEL', 'anthropic:MODEL', 'tgi:URL[,URL...]', 'hf:MODEL_ID' "
    "or the name of a [models.NAME] entry in the run config"
)
DEFAULT_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "tgi": "HF_TOKEN",
    "hf": "HF_TOKEN",
}
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
_KEYISH = {"api_key", "apikey", "key", "token", "secret", "password", "auth_token"}


class UnknownModelSpecError(ValueError):
    pass


class ModelConfig(BaseModel):
    """One logical model: where it is served and how hard it may be pushed."""

    model_config = ConfigDict(extra="forbid")

    provider: Provider
    # The model id sent to the server; a TGI server reports its own through /info.
    model: str | None = None
    # Base URLs. Several TGI URLs form a replica pool; the others take at most one.
    endpoints: list[str] = Field(default_factory=list)
    # The environment variable (or .env entry) holding the key; keys never go in files.
    api_key_env: str | None = None
    max_concurrency: int | None = Field(None, ge=1)
    requests_per_minute: int | None = Field(None, ge=1)
    tokens_per_minute: int | None = Field(None, ge=1)
    min_concurrency: int = Field(1, ge=1)
    adaptive_concurrency: bool = True
    timeout_s: float = Field(600.0, gt=0)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    # tgi: "chat", "generate", or "auto" (chat, falling back to /generate without a template)
    api: ApiChoice = "auto"
    # hf: which inference provider ("auto" lets Hugging Face choose)
    hf_provider: str | None = None
    # anthropic: pin "2023-06-01" to send a temperature (the current API refuses one)
    anthropic_version: str | None = None
    # openai-compatible servers: the body field for a repetition penalty ("auto": by host)
    repetition_penalty_field: str | None = "auto"
    # openai: the official SDK, or hpt's lean aiohttp client ("auto": the SDK for
    # api.openai.com, the lean client for self-hosted servers, where call rates are high)
    client: Literal["auto", "sdk", "aiohttp"] = "auto"
    health_interval_s: float = Field(5.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _no_keys_in_files(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for name in data:
                if str(name).lower() in _KEYISH:
                    raise ValueError(
                        f"'{name}' looks like a secret; keys never go in config files. Put it "
                        "in the environment or a .env file and name the variable with api_key_env"
                    )
        return data

    @model_validator(mode="after")
    def _check_shape(self) -> ModelConfig:
        if self.provider in ("openai", "anthropic", "hf") and not self.model:
            raise ValueError(f"a {self.provider} model needs 'model'")
        if self.provider == "tgi" and not self.endpoints:
            raise ValueError("a tgi model needs 'endpoints' (one URL, or several for a pool)")
        if self.provider != "tgi" and len(self.endpoints) > 1:
            raise ValueError(f"only tgi models take several endpoints, not {self.provider}")
        return self

    @property
    def limits(self) -> BackendLimits:
        return BackendLimits(
            max_concurrency=self.max_concurrency,
            requests_per_minute=self.requests_per_minute,
            tokens_per_minute=self.tokens_per_minute,
            min_concurrency=self.min_concurrency,
            adaptive=self.adaptive_concurrency,
        )


def parse_model_spec(spec: str, named: Mapping[str, ModelConfig] | None = None) -> ModelConfig:
    """Turn a command-line model spec (or a config entry's name) into a ModelConfig."""
    spec = spec.strip()
    if named and spec in named:
        return named[spec]
    if spec == "local":
        return ModelConfig(provider="local", model=LOCAL_MODEL_NAME)
    provider, sep, rest = spec.partition(":")
    rest = rest.strip()
    if not sep or not rest:
        raise UnknownModelSpecError(f"model spec {spec!r} is not PROVIDER:MODEL; {SPEC_HELP}")
    if provider not in PROVIDERS or provider == "local":
        raise UnknownModelSpecError(f"unknown model provider {provider!r} in {spec!r}; {SPEC_HELP}")
    if provider == "tgi":
        urls = [u.strip() for u in rest.split(",") if u.strip()]
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        if bad:
            raise UnknownModelSpecError(
                f"tgi endpoints must be http(s) URLs, not {', '.join(map(repr, bad))}"
            )
        return ModelConfig(provider="tgi", endpoints=urls)
    return ModelConfig(provider=provider, model=rest)


def spec_label(spec: str, config: ModelConfig) -> str:
    """The key-free name records and displays use for a model: the spec as written."""
    return spec.strip()


def _transport(config: ModelConfig, base_url: str | None) -> Transport:
    # Each provider's SDK is imported when it is used: anthropic alone takes over a second.
    key_env = config.api_key_env or DEFAULT_KEY_ENV.get(config.provider)
    key = secret_from_env(key_env) if key_env else None
    if config.api_key_env and key is None:
        raise FatalBackendError(
            f"{config.api_key_env} is not set; put the key in the environment or a .env file"
        )
    endpoint = base_url or (config.endpoints[0] if config.endpoints else None)
    assert config.model is not None or config.provider == "tgi"
    if config.provider in ("openai", "local"):
        from hpt.backends.openai_protocol import is_openai_host

        local = config.provider == "local"
        url = endpoint or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_URL
        lean = config.client == "aiohttp" or (config.client == "auto" and not is_openai_host(url))
        if lean and not local and not key:
            raise FatalBackendError(
                "no OpenAI API key: set OPENAI_API_KEY in the environment or .env (any value "
                "for a local server that ignores keys)"
            )
        options: dict[str, Any] = {
            "api_key": "no-key" if local else key,
            "timeout_s": config.timeout_s,
            # llama.cpp's name for the penalty
            "repetition_penalty_field": "repeat_penalty"
            if local
            else config.repetition_penalty_field,
            "provider": config.provider,
        }
        if lean:
            from hpt.backends.openai_lean import LeanOpenAITransport

            return LeanOpenAITransport(config.model or "", base_url=url, **options)
        from hpt.backends.openai_backend import OpenAITransport

        return OpenAITransport(config.model or "", base_url=url, **options)
    if config.provider == "anthropic":
        from hpt.backends.anthropic_backend import AnthropicTransport

        return AnthropicTransport(
            config.model or "",
            base_url=endpoint,
            api_key=key,
            timeout_s=config.timeout_s,
            anthropic_version=config.anthropic_version,
        )
    from hpt.backends.pool import ReplicaPool
    from hpt.backends.tgi_backend import HFTransport

    if config.provider == "hf":
        return HFTransport(
            config.model or "",
            is_url=False,
            hf_provider=config.hf_provider,
            token=key,
            timeout_s=config.timeout_s,
        )
    urls = [base_url] if base_url else config.endpoints
    replicas = [
        HFTransport(u, is_url=True, api=config.api, token=key, timeout_s=config.timeout_s)
        for u in urls
    ]
    if len(replicas) == 1:
        return replicas[0]
    return ReplicaPool(replicas, health_interval_s=config.health_interval_s)


@contextlib.asynccontextmanager
async def open_backend(
    config: ModelConfig,
    *,
    label: str,
    cache: ResponseCache | None = None,
    base_url: str | None = None,
) -> AsyncIterator[ManagedBackend]:
    """Yield a ready backend; anything it started (the embedded server) stops on exit."""
    async with contextlib.AsyncExitStack() as stack:
        cache_endpoint = None
        if config.provider == "local":
            # Two llama.cpp servers behind one transport: logprob calls go to the second.
            servers = await stack.enter_async_context(local_servers())
            transport: Transport = LocalTransport(
                servers,
                _transport(config, servers.base_url),
                model=config.model or LOCAL_MODEL_NAME,
                timeout_s=config.timeout_s,
            )
            cache_endpoint = f"llama.cpp:{find_gguf().name}"
        else:
            transport = _transport(config, base_url)
        backend = ManagedBackend(
            transport,
            label=label,
            limits=config.limits,
            retry=config.retry,
            cache=cache,
            cache_endpoint=cache_endpoint,
        )
        stack.push_async_callback(backend.aclose)
        await backend.check()
        yield backend
