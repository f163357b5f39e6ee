"""Model specs, and opening the backend a model's config names.

A model is named on the command line as ``PROVIDER:REST`` (``openai:MODEL``,
``tgi:URL[,URL...]``, ...), as a bare provider name that takes nothing more (``local``), or
by the name of a ``[models.NAME]`` entry in a run config file, which can also set limits and
endpoints. Which providers exist, and how each reads its spec, is the registry's
(providers.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping

from pydantic import ValidationError

import hpt.backends.builtin  # noqa: F401  (registers the built-in providers)
from hpt.backends.cache import ResponseCache
from hpt.backends.managed import ManagedBackend
from hpt.backends.providers import (
    PROVIDERS,
    ModelConfig,
    UnknownModelSpecError,
    model_config_from,
    spec_help,
)


def _reason(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            ".".join(map(str, e["loc"])) + (": " if e["loc"] else "")
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        )  # fmt: skip
    return str(exc)


def parse_model_spec(spec: str, named: Mapping[str, ModelConfig] | None = None) -> ModelConfig:
    """Turn a command-line model spec (or a config entry's name) into a ModelConfig."""
    spec = spec.strip()
    if named and spec in named:
        return model_config_from(named[spec])
    name, sep, rest = spec.partition(":")
    provider = PROVIDERS.get(name.strip())
    if provider is None:
        if sep:
            raise UnknownModelSpecError(
                f"unknown model provider {name!r} in {spec!r}; {spec_help()}"
            )
        raise UnknownModelSpecError(f"model spec {spec!r} is not PROVIDER:MODEL; {spec_help()}")
    try:
        return provider.from_spec(rest.strip())
    except ValueError as exc:  # UnknownModelSpecError, or the config's ValidationError
        raise UnknownModelSpecError(
            f"model spec {spec!r}: {_reason(exc)}; use '{provider.spec_help}'"
        ) from None


def spec_label(spec: str, config: ModelConfig) -> str:
    """The key-free name records and displays use for a model: the spec as written."""
    return spec.strip()


@contextlib.asynccontextmanager
async def open_backend(
    config: ModelConfig,
    *,
    label: str,
    cache: ResponseCache | None = None,
    base_url: str | None = None,
) -> AsyncIterator[ManagedBackend]:
    """Yield a ready backend; anything it started (the embedded server) stops on exit.

    ``base_url`` serves the model there instead of at its own endpoints.
    """
    config = model_config_from(config)
    if base_url:
        config = config.with_endpoint(base_url)
    provider = PROVIDERS[config.provider]
    async with contextlib.AsyncExitStack() as stack:
        opened = await stack.enter_async_context(provider.open_transport(config))
        backend = ManagedBackend(
            opened.transport,
            label=label,
            limits=config.limits,
            retry=config.retry,
            cache=cache,
            cache_endpoint=opened.cache_endpoint,
        )
        # Closed before the provider's context exits: the transport before its servers.
        stack.push_async_callback(backend.aclose)
        await backend.check()
        yield backend
