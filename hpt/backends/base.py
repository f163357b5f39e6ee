"""The backend protocol: chat messages + generation parameters -> one completion."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from hpt.types import Completion, GenerationParams, Message, Usage, valid_text

__all__ = ["Backend", "Completion", "GenerationParams", "Message", "Usage", "valid_text"]


@runtime_checkable
class Backend(Protocol):
    """An async chat model. Implementations must be safe to call concurrently."""

    @property
    def name(self) -> str:
        """A stable, key-free description such as ``openai:gpt-4o``."""
        ...

    async def complete(
        self, messages: list[Message], params: GenerationParams, *, cache_seed: str = ""
    ) -> Completion:
        """Return one completion, retrying transient failures; raise BackendError otherwise.

        ``cache_seed`` names the sample and epoch asking, so a cached answer is reused only
        for the same question in the same place.
        """
        ...

    async def check(self) -> None:
        """Fail fast (FatalBackendError) if the endpoint cannot be reached or refuses us."""
        ...

    async def aclose(self) -> None: ...
