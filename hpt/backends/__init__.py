"""Async model backends behind one protocol."""

from hpt.backends.base import Backend, Completion, GenerationParams, Message, Usage
from hpt.backends.cache import CacheError, CacheStats, ResponseCache, default_cache_path
from hpt.backends.errors import BackendError, FatalBackendError, TransientError
from hpt.backends.limits import BackendLimits, BackendStats
from hpt.backends.managed import ManagedBackend, Transport
from hpt.backends.registry import (
    PROVIDERS,
    SPEC_HELP,
    ModelConfig,
    UnknownModelSpecError,
    open_backend,
    parse_model_spec,
    spec_label,
)
from hpt.backends.retry import RetryPolicy
from hpt.backends.secrets import load_dotenv_file, redact

__all__ = [
    "PROVIDERS",
    "SPEC_HELP",
    "Backend",
    "BackendError",
    "BackendLimits",
    "BackendStats",
    "CacheError",
    "CacheStats",
    "Completion",
    "FatalBackendError",
    "GenerationParams",
    "ManagedBackend",
    "Message",
    "ModelConfig",
    "ResponseCache",
    "RetryPolicy",
    "TransientError",
    "Transport",
    "UnknownModelSpecError",
    "Usage",
    "default_cache_path",
    "load_dotenv_file",
    "open_backend",
    "parse_model_spec",
    "redact",
    "spec_label",
]
