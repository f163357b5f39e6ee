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
from urllib.parse import urlsplit

from pydantic import ValidationError

import hpt.backends.builtin  # noqa: F401  (registers the built-in providers)
from hpt.backends.batching import BatchOptions
from hpt.backends.cache import ResponseCache
from hpt.backends.errors import BackendError
from hpt.backends.gate import CallGate
from hpt.backends.managed import ManagedBackend
from hpt.backends.providers import (
    PROVIDERS,
    ModelConfig,
    UnknownModelSpecError,
    model_config_from,
    spec_help,
)
from hpt.backends.secrets import redact_url, redact_urls, remember_url_credentials


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
        config = provider.from_spec(rest.strip())
    except ValueError as exc:  # UnknownModelSpecError, or the config's ValidationError
        raise UnknownModelSpecError(
            f"model spec {redact_urls(spec)!r}: {_reason(exc)}; use '{provider.spec_help}'"
        ) from None
    for endpoint in config.endpoints:  # tgi:URL: a URL may carry credentials
        try:
            check_endpoint(endpoint)
        except ValueError as exc:
            raise UnknownModelSpecError(f"model spec {redact_urls(spec)!r}: {exc}") from None
    return config


def check_endpoint(url: str) -> str:
    """``url`` if it can be a model's endpoint (http or https, a host, a port 1-65535); else
    a ValueError saying what is wrong, the URL shown without its credentials. Either way its
    credentials are remembered first, so no later text shows them."""
    remember_url_credentials(url)
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a bad IPv6 host or port
        raise ValueError(f"{shown!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{shown!r} is not an http(s) URL with a host, such as http://localhost:8000/v1"
        )
    if port == 0:
        raise ValueError(f"{shown!r}: port 0 is no server's port")
    return url


def _authority(url: str) -> str:
    """The ``user:password@host:port`` part of a URL."""
    return url.partition("//")[2].partition("/")[0].partition("?")[0]


def spec_label(spec: str, config: ModelConfig) -> str:
    """The key-free name records and displays use for a model: the spec as written, any
    URL in it without its credentials."""
    return redact_urls(spec.strip())


@contextlib.asynccontextmanager
async def open_backend(
    config: ModelConfig,
    *,
    label: str,
    cache: ResponseCache | None = None,
    base_url: str | None = None,
    gate: CallGate | None = None,
    batch: BatchOptions | None = None,
) -> AsyncIterator[ManagedBackend]:
    """Yield a ready backend; anything it started (the embedded server) stops on exit.

    ``base_url`` serves the model there instead of at its own endpoints; ``gate`` is asked
    before every call it sends (the run's budget); ``batch`` turns batch mode on where the
    provider has a Batch API (``ManagedBackend.batched`` says whether it had).
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
            think_tags=config.think_tags,
            gate=gate,
            batch=batch,
        )
        # Closed before the provider's context exits: the transport before its servers.
        stack.push_async_callback(backend.aclose)
        try:
            await backend.check()
        except ValueError as exc:
            # aiohttp's refusal to send both a URL's user:password and the key's header.
            with_user = [e for e in config.endpoints if "@" in _authority(e)]
            if not with_user:
                raise
            raise BackendError(
                f"{label}: {redact_url(with_user[0])} carries user:password credentials, and "
                f"the provider sends its own key in the same Authorization header; drop one "
                f"of them ({type(exc).__name__})"
            ) from None
        yield backend
