"""A provider's Batch API as hpt's batch mode uses it (``--batch``): requests gathered into
one provider batch, submitted, polled, and their results read back by custom id.

A transport whose provider has one offers it through ``batch_api()`` (OpenAI's Files +
Batches, Anthropic's Message Batches); ``hpt.backends.batching`` gathers the calls, keeps
the batches in the run directory and answers the waiting climbs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from hpt.types import Completion, GenerationParams, Message

# A provider batch as hpt follows it: still working, or ended (its results, maybe partial,
# can be read: completed, expired, cancelled); "failed": rejected as a whole (OpenAI's
# validation failure), no results.
BatchPhase = Literal["in_progress", "ended", "failed"]


@dataclass
class BatchStatus:
    phase: BatchPhase
    # The provider's own word for it ("validating", "finalizing", "canceling", ...).
    state: str
    # The provider's request counts as it reports them ({"completed": 3, "failed": 1, ...}).
    counts: dict[str, int] = field(default_factory=dict)
    # Why the batch failed as a whole, in the provider's words.
    error: str | None = None


@dataclass
class RequestFailed:
    """One request of a batch that has no completion: ``transient`` (expired, cancelled, a
    server error, a rate limit) goes in a later batch as the retry policy allows; otherwise
    the sample's call fails with ``message``."""

    message: str
    transient: bool


class BatchAPI(Protocol):
    provider: str
    # The most requests and bytes one batch may carry (the provider's documented limits).
    max_requests: int
    max_bytes: int
    # Whether ``find`` can tell a batch submitted under a local id (OpenAI's metadata); False:
    # it always answers None (Anthropic keeps no metadata on a batch).
    can_find: bool

    def request(
        self, custom_id: str, messages: list[Message], params: GenerationParams
    ) -> dict[str, Any]:
        """One request as the provider's batch carries it (a JSONL line for OpenAI, a
        ``{custom_id, params}`` entry for Anthropic): the same body a direct call sends."""
        ...

    async def submit(self, requests: list[dict[str, Any]], local_id: str) -> str:
        """Create a batch of ``requests``; the provider's batch id. ``local_id`` is hpt's own
        name for it, attached where the provider keeps metadata (``find``)."""
        ...

    async def find(self, local_id: str, since: datetime | None = None) -> str | None:
        """The batch submitted as ``local_id`` (a process killed between submitting it and
        saving its id), made no earlier than ``since`` (None: any time); None when there is
        none, or the provider cannot say (``can_find``). ``batch_errors.CannotTell`` when
        the search stopped (a page limit) before reaching ``since``: it may exist."""
        ...

    async def status(self, batch_id: str) -> BatchStatus: ...

    async def results(self, batch_id: str) -> dict[str, Completion | RequestFailed]:
        """An ended batch's outcome per custom id (requests it holds no line for are
        missing: the caller treats them as expired)."""
        ...

    async def cancel(self, batch_id: str) -> None: ...
