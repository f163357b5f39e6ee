"""Anthropic's Message Batches (``--batch``): Messages API requests run as one batch within
24 hours at half the price, their results read back by custom id
(https://platform.claude.com/docs/en/build-with-claude/batch-processing).

Through the official SDK's own calls (``messages.batches.create/retrieve/results/cancel``).
Each request's ``params`` is exactly the body a direct call sends (prompt-cache marks
included; the legacy API version's temperature in the body, where the direct call passes
it as an extra field), and each answer is read by the same code (``completion_of``).
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anthropic
import httpx2

from hpt.backends.anthropic_reply import completion_of
from hpt.backends.batch_api import BatchPhase, BatchStatus, RequestFailed
from hpt.backends.batch_errors import sdk_errors
from hpt.backends.errors import TransientError
from hpt.backends.openai_protocol import short
from hpt.types import Completion, GenerationParams, Message

if TYPE_CHECKING:
    from hpt.backends.anthropic_backend import AnthropicTransport

PHASES: dict[str, BatchPhase] = {
    "in_progress": "in_progress",
    "canceling": "in_progress",
    "ended": "ended",
}
# The error types of a request that another batch may well not meet.
TRANSIENT_ERRORS = frozenset({"api_error", "overloaded_error", "rate_limit_error", "timeout_error"})


class AnthropicBatchAPI:
    provider = "anthropic"
    # The documented limits of one batch: 100,000 requests or 256 MB.
    max_requests = 100_000
    max_bytes = 256_000_000
    can_find = False  # a Message Batch carries no metadata

    def __init__(self, transport: AnthropicTransport) -> None:
        self._transport = transport
        self._client = transport.client
        self.endpoint = transport.endpoint

    def request(
        self, custom_id: str, messages: list[Message], params: GenerationParams
    ) -> dict[str, Any]:
        t = self._transport
        return {"custom_id": custom_id, "params": t.request_body(messages, t.sent_params(params))}

    def _calling(
        self, what: str, *, creates: bool = False, batch_id: str | None = None
    ) -> contextlib.AbstractContextManager[None]:
        return sdk_errors(anthropic, what, self.endpoint, self.provider, "ANTHROPIC_API_KEY",
                          creates=creates, batch_id=batch_id)  # fmt: skip

    async def submit(self, requests: list[dict[str, Any]], local_id: str) -> str:
        with self._calling("create the message batch", creates=True):
            batch = await self._client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        return batch.id

    async def find(self, local_id: str, since: datetime | None = None) -> str | None:
        """Always None: a message batch carries no metadata to name it by, so a batch whose
        id was not saved (the process killed while submitting it) cannot be told from
        another; its requests go again in a new batch."""
        return None

    async def status(self, batch_id: str) -> BatchStatus:
        with self._calling(f"message batch {batch_id}", batch_id=batch_id):
            batch = await self._client.messages.batches.retrieve(batch_id)
        rc = batch.request_counts
        counts = {
            "processing": rc.processing,
            "succeeded": rc.succeeded,
            "errored": rc.errored,
            "canceled": rc.canceled,
            "expired": rc.expired,
        }
        state = batch.processing_status
        return BatchStatus(PHASES.get(state, "in_progress"), state, counts)

    async def results(self, batch_id: str) -> dict[str, Completion | RequestFailed]:
        out: dict[str, Completion | RequestFailed] = {}
        what = f"the results of message batch {batch_id}"
        with self._calling(what, batch_id=batch_id):
            try:
                lines = await self._client.messages.batches.results(batch_id)
            except anthropic.AnthropicError as exc:
                if isinstance(exc, anthropic.APIError):
                    raise
                # The SDK's own complaint: no results_url yet (the batch has not ended).
                raise TransientError(f"message batch {batch_id}: {short(exc)}") from exc
            try:
                async for line in lines:
                    out[line.custom_id] = _outcome(line.result)
            except httpx2.TransportError as exc:  # the stream broke: the SDK passes it raw
                raise TransientError(
                    f"{what}: connection failed while reading: {short(exc)} ({self.endpoint})"
                ) from exc
            finally:
                with contextlib.suppress(httpx2.TransportError):
                    await lines.close()
        return out

    async def cancel(self, batch_id: str) -> None:
        with self._calling(f"cancel message batch {batch_id}"):
            await self._client.messages.batches.cancel(batch_id)


def _outcome(result: Any) -> Completion | RequestFailed:
    """One request's result: its message, read as a direct call's, or why it has none."""
    if result.type == "succeeded":
        return completion_of(result.message, None)
    if result.type == "errored":
        error = result.error.error
        return RequestFailed(f"{error.type}: {error.message}", error.type in TRANSIENT_ERRORS)
    return RequestFailed(str(result.type), transient=True)  # canceled, expired
