"""One model resolution for every command that calls models.

A model is named by a spec (``openai:gpt-4o``, ``tgi:URL``, ``local``) or by the name of a
``[models.NAME]`` entry in a config file. ``ModelSettings`` holds what turns a name into a
model -- the named entries, ``--base-url`` and the run-wide limit and retry overrides -- and
resolves each name once into a ``ResolvedModel``; the evaluated, knowledge, selector,
extractor and judge roles all use that object, and ``ModelBackends`` opens one backend per
distinct resolved model however many roles share it."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from hpt.backends import (
    AnyModelConfig,
    BackendStats,
    ModelConfig,
    RateLimitFields,
    ResponseCache,
    RetryPolicy,
    open_backend,
    parse_model_spec,
    spec_label,
)
from hpt.backends.batching import BatchOptions
from hpt.backends.builtin.local import LocalConfig
from hpt.backends.gate import CallGate
from hpt.backends.managed import ManagedBackend
from hpt.backends.secrets import without_credentials
from hpt.backends.specs import check_endpoint


@dataclass(frozen=True)
class ResolvedModel:
    """A model as every role uses it: the key-free label records carry, and its config
    with this run's overrides applied."""

    label: str
    config: ModelConfig

    @property
    def key(self) -> tuple[str, str]:
        """Two roles with the same key share one backend (one set of limits)."""
        return self.label, self.config.model_dump_json()


class ModelSettings(RateLimitFields):
    """How model names resolve; the model options every model-calling command accepts.
    The rate-limit fields override every backend's own."""

    model_config = ConfigDict(extra="forbid")

    # The endpoint of the model(s) ``base_url_models()`` names, for a PROVIDER:MODEL spec.
    base_url: str | None = None
    # Named models from a config file, each validated as its provider's own config; any
    # model option may name them. They hold no keys.
    models: dict[str, AnyModelConfig] = Field(default_factory=dict)
    # Overrides of every backend's own retry policy (only the fields set).
    retry: RetryPolicy | None = None
    # Provider prompt caching (--prompt-cache): "auto" marks shared prompt prefixes for the
    # providers that cache only where told (Anthropic's cache_control); "off" marks none.
    # Given, it overrides a named model's own; applied to the configs that have the setting.
    prompt_cache: Literal["auto", "off"] = Field("auto", exclude_if=lambda v: v == "auto")

    @field_validator("base_url")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        if value:
            check_endpoint(value)
        return value or None

    @field_validator("models")
    @classmethod
    def _check_endpoints(cls, models: dict[str, ModelConfig]) -> dict[str, ModelConfig]:
        for name, config in models.items():
            for endpoint in config.endpoints:
                try:
                    check_endpoint(endpoint)
                except ValueError as exc:
                    raise ValueError(f"{name}.endpoints: {exc}") from None
        return models

    @model_serializer(mode="wrap", when_used="json")
    def _saved_without_credentials(self, handler: SerializerFunctionWrapHandler) -> Any:
        """What is written (run.json, a summary) holds every URL without its credentials
        (``--base-url``, a config's endpoints, a tgi:URL spec, the command line): they
        stay in memory, for the calls, and are given again to resume."""
        return without_credentials(handler(self))

    def base_url_models(self) -> Sequence[str]:
        """The model names ``base_url`` is the endpoint of (the command's main model)."""
        return ()

    def resolve(self, name: str) -> ResolvedModel:
        """The one resolution of ``name``: a helper model (knowledge, selector, extractor,
        judge) named like the main model is that model, endpoint included."""
        name = name.strip()
        config = parse_model_spec(name, self.models)
        update: dict[str, object] = {}
        if self.max_concurrency is not None:
            update["max_concurrency"] = self.max_concurrency
        if self.requests_per_minute is not None:
            update["requests_per_minute"] = self.requests_per_minute
        if self.tokens_per_minute is not None:
            update["tokens_per_minute"] = self.tokens_per_minute
        if self.retry is not None:  # only the fields the run sets; the model keeps the rest
            update["retry"] = config.retry.model_copy(
                update=self.retry.model_dump(exclude_unset=True)
            )
        if "prompt_cache" in self.model_fields_set and "prompt_cache" in type(config).model_fields:
            update["prompt_cache"] = self.prompt_cache
        config = config.model_copy(update=update)
        if self.base_url and name in self.base_url_models() and name not in self.models:
            config = config.with_endpoint(self.base_url)
        return ResolvedModel(spec_label(name, config), config)


class ModelBackends:
    """Opens each distinct resolved model once, on the caller's exit stack; each asks
    ``gate`` (the run's budget) before every call it sends, and batches its calls where
    ``batch`` is given and its provider has a Batch API."""

    def __init__(
        self,
        stack: contextlib.AsyncExitStack,
        cache: ResponseCache | None,
        *,
        gate: CallGate | None = None,
        batch: BatchOptions | None = None,
        direct_concurrency: int | None = None,
    ) -> None:
        self._stack = stack
        self._cache = cache
        self._gate = gate
        self._batch = batch
        # In batch mode every climb waits at once: a model called directly is still sent at
        # most this many calls at a time (the run's --concurrency).
        self._direct_concurrency = direct_concurrency
        self._open: dict[tuple[str, str], ManagedBackend] = {}

    async def open(self, model: ResolvedModel) -> ManagedBackend:
        if model.key not in self._open:
            config = model.config
            if isinstance(config, LocalConfig) and config.slots is None:
                # The embedded server decodes together as many calls as the run keeps in
                # flight (its own default where the caller names no concurrency).
                config = config.model_copy(update={"slots": self._direct_concurrency})
            opening = open_backend(
                config, label=model.label, cache=self._cache, gate=self._gate,
                batch=self._batch,
            )  # fmt: skip
            backend = await self._stack.enter_async_context(opening)
            if self._batch is not None and not backend.batched and self._direct_concurrency:
                backend.cap_concurrency(self._direct_concurrency)
            self._open[model.key] = backend
        return self._open[model.key]

    def unbatched_notes(self) -> list[str]:
        """In batch mode, one note per model whose provider has no Batch API."""
        if self._batch is None:
            return []
        labels = dict.fromkeys(b.name for b in self._open.values() if not b.batched)
        return [
            f"{label}: its provider has no Batch API; called directly, at most "
            f"{self._direct_concurrency} calls at a time (--concurrency)"
            if self._direct_concurrency
            else f"{label}: its provider has no Batch API; called directly"
            for label in labels
        ]

    @property
    def stats(self) -> dict[str, BackendStats]:
        return {label: backend.stats for (label, _), backend in self._open.items()}
