"""Async model backends behind one protocol."""

from hpt.backends.base import Backend, Completion, GenerationParams, Message, Usage
from hpt.backends.batching import BatchOptions
from hpt.backends.cache import CacheError, CacheStats, ResponseCache, default_cache_path
from hpt.backends.errors import BackendError, FatalBackendError, SettingRefused, TransientError
from hpt.backends.limits import BackendLimits, BackendStats, RateLimitFields
from hpt.backends.managed import ManagedBackend, Transport
from hpt.backends.providers import (
    PROVIDERS,
    AnyModelConfig,
    ModelConfig,
    OpenedTransport,
    Provider,
    SimpleProvider,
    UnknownModelSpecError,
    api_key,
    model_config_from,
    providers,
    register_provider,
    spec_help,
    unregister_provider,
)
from hpt.backends.retry import RetryPolicy
from hpt.backends.secrets import load_dotenv_file, redact
from hpt.backends.specs import open_backend, parse_model_spec, spec_label

__all__ = [
    "PROVIDERS",
    "AnyModelConfig",
    "Backend",
    "BackendError",
    "BackendLimits",
    "BackendStats",
    "BatchOptions",
    "CacheError",
    "CacheStats",
    "Completion",
    "FatalBackendError",
    "GenerationParams",
    "ManagedBackend",
    "Message",
    "ModelConfig",
    "OpenedTransport",
    "Provider",
    "RateLimitFields",
    "ResponseCache",
    "RetryPolicy",
    "SettingRefused",
    "SimpleProvider",
    "TransientError",
    "Transport",
    "UnknownModelSpecError",
    "Usage",
    "api_key",
    "default_cache_path",
    "load_dotenv_file",
    "model_config_from",
    "open_backend",
    "parse_model_spec",
    "providers",
    "redact",
    "register_provider",
    "spec_help",
    "spec_label",
    "unregister_provider",
]
