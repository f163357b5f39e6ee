"""Async model backends behind one protocol."""

from hpt.backends.base import Backend, Completion, GenerationParams, Message, Usage
from hpt.backends.errors import BackendError, FatalBackendError
from hpt.backends.registry import (
    BackendOptions,
    ModelSpec,
    UnknownModelSpecError,
    open_backend,
    parse_model_spec,
)
from hpt.backends.retry import CallLimiter, RetryPolicy

__all__ = [
    "Backend",
    "BackendError",
    "BackendOptions",
    "CallLimiter",
    "Completion",
    "FatalBackendError",
    "GenerationParams",
    "Message",
    "ModelSpec",
    "RetryPolicy",
    "UnknownModelSpecError",
    "Usage",
    "open_backend",
    "parse_model_spec",
]
