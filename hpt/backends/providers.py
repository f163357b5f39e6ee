"""Model providers: the common ``ModelConfig``, the ``Provider`` protocol and the registry.

A provider names its own config class (``ModelConfig`` plus only its own settings), reads
the part of a command-line spec after ``NAME:`` and opens its ``Transport``. The built-in
providers (hpt.backends.builtin) are registered through ``register_provider`` exactly as a
plugin's are, and everything else (spec parsing, config files, ``open_backend``) looks
providers up here, so a new one needs no change anywhere else.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Protocol, Self, get_args

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from hpt.backends.errors import FatalBackendError
from hpt.backends.limits import BackendLimits, RateLimitFields
from hpt.backends.managed import Transport
from hpt.backends.retry import RetryPolicy
from hpt.backends.secrets import secret_from_env
from hpt.backends.thinking import DEFAULT_THINK_TAGS
from hpt.errors import HptError

_KEYISH = {"api_key", "apikey", "key", "token", "secret", "password", "auth_token"}


class UnknownModelSpecError(HptError, ValueError):
    pass


def _invalid(
    title: str, loc: tuple[str, ...], value: Any, kind: str, message: str
) -> ValidationError:
    """A validation error at ``loc``: raised inside a validator, pydantic keeps the location
    (prefixed with the field's own), so a config file's error names the exact key."""
    detail = InitErrorDetails(
        type=PydanticCustomError(kind, "{message}", {"message": message}), loc=loc, input=value
    )
    return ValidationError.from_exception_data(title, [detail])


class ModelConfig(RateLimitFields):
    """One logical model: where it is served and how hard it may be pushed.

    The settings every provider shares. Each provider subclasses it with
    ``provider: Literal["NAME"]`` and its own settings; ``model_config_from`` (or a field
    typed ``AnyModelConfig``) picks the subclass from ``provider``.
    """

    model_config = ConfigDict(extra="forbid")

    # Whether several endpoints make a replica pool; otherwise a model takes at most one.
    several_endpoints: ClassVar[bool] = False

    provider: str
    # The model id sent to the server; a TGI server reports its own through /info.
    model: str | None = None
    # Base URLs (several only where the provider pools replicas).
    endpoints: list[str] = Field(default_factory=list)
    # The environment variable (or .env entry) holding the key; keys never go in files.
    api_key_env: str | None = None
    # max_concurrency, requests_per_minute and tokens_per_minute come from RateLimitFields.
    min_concurrency: int = Field(1, ge=1)
    adaptive_concurrency: bool = True
    timeout_s: float = Field(600.0, gt=0)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    # The inline thinking blocks (opening, closing tag) a completion may start with; the
    # thinking is kept apart from the answer the readers read (hpt.backends.thinking).
    # [] reads every completion whole.
    think_tags: list[tuple[str, str]] = Field(default_factory=lambda: list(DEFAULT_THINK_TAGS))

    @field_validator("think_tags")
    @classmethod
    def _tags_given(cls, tags: list[tuple[str, str]]) -> list[tuple[str, str]]:
        if any(not opening.strip() or not closing.strip() for opening, closing in tags):
            raise ValueError("each think tag pair is two non-empty tags, such as "
                             '["<think>", "</think>"]')  # fmt: skip
        return tags

    @model_validator(mode="before")
    @classmethod
    def _check_keys(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        for name in data:
            if str(name).lower() in _KEYISH:
                raise ValueError(
                    f"'{name}' looks like a secret; keys never go in config files. Put it "
                    "in the environment or a .env file and name the variable with api_key_env"
                )
        if cls is ModelConfig:
            return data
        # Say whose setting a stray key is, rather than only that it is not allowed here.
        for name in data:
            if name in cls.model_fields:
                continue
            owners = [p.name for p in _registry.values() if name in p.config.model_fields]
            if owners:
                own = get_args(cls.model_fields["provider"].annotation)
                which = own[0] if own else data.get("provider", "these")
                raise _invalid(
                    cls.__name__,
                    (str(name),),
                    data[name],
                    "provider_setting",
                    f"'{name}' is not a setting of {which} models (only of "
                    f"{' and '.join(owners)} models)",
                )
        return data

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, name: str) -> str:
        # A provider's own class pins its name; the bare base at least names a real one.
        if cls is ModelConfig and name not in _registry:
            raise ValueError(f"unknown model provider {name!r}; known: {', '.join(_registry)}")
        return name

    @model_validator(mode="after")
    def _check_endpoints(self) -> Self:
        if len(self.endpoints) > 1 and not self.several_endpoints:
            pooled = [p.name for p in _registry.values() if p.config.several_endpoints]
            raise ValueError(
                f"a {self.provider} model takes one endpoint, not {len(self.endpoints)}; "
                f"only {', '.join(pooled) or 'no'} models pool several"
            )
        return self

    @property
    def endpoint(self) -> str | None:
        """The first (for most providers the only) endpoint, if any."""
        return self.endpoints[0] if self.endpoints else None

    def with_endpoint(self, url: str) -> Self:
        """This config served at ``url`` alone (a ``--base-url`` override)."""
        return self.model_copy(update={"endpoints": [url]})

    @property
    def limits(self) -> BackendLimits:
        return BackendLimits(
            max_concurrency=self.max_concurrency,
            requests_per_minute=self.requests_per_minute,
            tokens_per_minute=self.tokens_per_minute,
            min_concurrency=self.min_concurrency,
            adaptive=self.adaptive_concurrency,
        )


@dataclass(frozen=True)
class OpenedTransport:
    """What a provider opened for one model."""

    transport: Transport
    # What stands for the endpoint in cache keys when the URL is not stable (the embedded
    # server gets a new port every run); None: the transport's own endpoint.
    cache_endpoint: str | None = None


class Provider(Protocol):
    """A model provider. Read-only members, so plain class attributes satisfy them."""

    @property
    def name(self) -> str:
        """What specs and configs call it: ``NAME:...`` and ``provider = "NAME"``."""
        ...

    @property
    def config(self) -> type[ModelConfig]:
        """Its config class: ``provider: Literal["NAME"]`` and its own settings only."""
        ...

    @property
    def spec_help(self) -> str:
        """The spec's form for help texts, such as ``openai:MODEL``."""
        ...

    def from_spec(self, rest: str) -> ModelConfig:
        """The config for ``NAME:rest`` (``rest`` is "" for the bare ``NAME``); raise
        ``UnknownModelSpecError`` (or a ``ValueError``) saying what is wrong with it."""
        ...

    def open_transport(self, config: ModelConfig) -> AbstractAsyncContextManager[OpenedTransport]:
        """Open the transport for ``config`` (always an instance of ``self.config``).

        The caller starts and closes the transport itself (``ManagedBackend``); leaving the
        context stops whatever else was started for it (the embedded servers).
        """
        ...


class SimpleProvider(ABC):
    """A base for providers whose transport needs nothing running beside it: implement
    ``from_spec`` and ``make_transport``."""

    name: ClassVar[str]
    config: ClassVar[type[ModelConfig]]
    spec_help: ClassVar[str]

    @abstractmethod
    def from_spec(self, rest: str) -> ModelConfig: ...

    @abstractmethod
    def make_transport(self, config: ModelConfig) -> Transport: ...

    @contextlib.asynccontextmanager
    async def open_transport(self, config: ModelConfig) -> AsyncIterator[OpenedTransport]:
        yield OpenedTransport(self.make_transport(config))


# Registration order is the order of help texts and listings.
_registry: dict[str, Provider] = {}
PROVIDERS: Mapping[str, Provider] = MappingProxyType(_registry)


def register_provider(provider: Provider, *, replace: bool = False) -> Provider:
    """Make ``provider`` available to specs, config files and ``open_backend``.

    A name already registered is an error unless ``replace`` (a plugin overriding a
    built-in on purpose).
    """
    name = provider.name
    if not name or any(c in name for c in ":, \t") or name != name.lower():
        raise ValueError(f"provider name {name!r}: use lowercase letters without ':' or ','")
    config = provider.config
    if not (isinstance(config, type) and issubclass(config, ModelConfig)):
        raise TypeError(f"provider {name!r}: config must be a ModelConfig subclass")
    field = config.model_fields.get("provider")
    if field is None or get_args(field.annotation) != (name,):
        raise TypeError(
            f"provider {name!r}: {config.__name__} must declare provider: Literal[{name!r}]"
        )
    if name in _registry and not replace:
        raise ValueError(
            f"a model provider named {name!r} is already registered; pass replace=True to "
            "replace it"
        )
    _registry[name] = provider
    return provider


def unregister_provider(name: str) -> Provider:
    """Remove a provider (a test's or a plugin's); returns it."""
    try:
        return _registry.pop(name)
    except KeyError:
        raise ValueError(f"no model provider named {name!r} is registered") from None


def providers() -> tuple[Provider, ...]:
    """The registered providers, in registration order."""
    return tuple(_registry.values())


def spec_help() -> str:
    """How to name a model, for error messages and --help, from the registry as it is now."""
    forms = ", ".join(f"'{p.spec_help}'" for p in _registry.values())
    return f"use {forms} or the name of a [models.NAME] entry in the run config"


def model_config_from(data: Mapping[str, Any] | ModelConfig) -> ModelConfig:
    """Validate a model's config as its provider's own config class.

    A mapping (a config file's entry, a saved run.json) is read by the class ``provider``
    names; a ``ModelConfig`` of another class (the bare base) is re-read the same way; one of
    the right class is returned as it is. An unknown provider is a ``ValidationError`` (a
    ``ValueError``) at ``provider`` naming the known ones.
    """
    if isinstance(data, ModelConfig):
        provider = _registry.get(data.provider)
        if provider is not None and isinstance(data, provider.config):
            return data
        data = {**data.model_dump(exclude_unset=True), "provider": data.provider}
    if not isinstance(data, Mapping) or "provider" not in data:
        # The base class reports it as pydantic does (not a table; 'provider' missing).
        return ModelConfig.model_validate(data)
    name = data["provider"]
    provider = _registry.get(name) if isinstance(name, str) else None
    if provider is None:
        raise _invalid(
            "ModelConfig",
            ("provider",),
            name,
            "unknown_provider",
            f"unknown model provider {name!r}; known: {', '.join(_registry)}",
        )
    return provider.config.model_validate(data)


# The type of a field holding any provider's config: validated through model_config_from
# (so the provider's own class), and dumped with that class's fields, not only the base's.
AnyModelConfig = Annotated[SerializeAsAny[ModelConfig], BeforeValidator(model_config_from)]


def api_key(config: ModelConfig, default_env: str | None) -> str | None:
    """The key for ``config``: from its ``api_key_env``, else from the provider's usual
    variable (``default_env``). A named variable that is not set stops the run."""
    env = config.api_key_env or default_env
    key = secret_from_env(env) if env else None
    if config.api_key_env and key is None:
        raise FatalBackendError(
            f"{config.api_key_env} is not set; put the key in the environment or a .env file"
        )
    return key
