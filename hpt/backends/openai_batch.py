"""OpenAI's Batch API (``--batch``): chat-completion requests uploaded as one JSONL file
(Files API, purpose "batch"), run as one batch within 24 hours at half the price, their
answers read back from the batch's output and error files
(https://developers.openai.com/api/docs/guides/batch).

Through the official SDK's own calls (``files.create``, ``batches.create/retrieve/list/
cancel``, ``files.content``). Each line carries exactly the body a direct call sends, and
each answer is parsed by the same code as a direct call's (``openai_protocol``).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Any, Final

import openai
from openai import AsyncOpenAI
from pydantic_core import from_json, to_json

from hpt.backends.batch_api import BatchPhase, BatchStatus, RequestFailed
from hpt.backends.batch_errors import CannotTell, sdk_errors
from hpt.backends.errors import TransientError
from hpt.backends.openai_protocol import (
    ChatFields,
    chat_body,
    chat_completion,
    chat_params,
    classify_status,
    short,
)
from hpt.types import Completion, GenerationParams, Message

ROUTE: Final = "/v1/chat/completions"
# The provider's states, by what hpt makes of them.
PHASES: dict[str, BatchPhase] = {
    "validating": "in_progress",
    "in_progress": "in_progress",
    "finalizing": "in_progress",
    "cancelling": "in_progress",
    "completed": "ended",
    "expired": "ended",
    "cancelled": "ended",
    "failed": "failed",
}
# A request's own error (not an HTTP status) that another batch may well not meet: the
# window ran out (batch_expired), the batch was cancelled, the service was busy.
TRANSIENT_CODES = ("expired", "cancel", "rate_limit", "server_error", "timeout")
# find() reads the list (newest first, 100 a page) back to the batch's creation time, less
# this much for the provider's clock and ours to differ, and at most this many batches: a
# run resumed days later on a busy account may not get there (then it cannot tell).
FIND_CLOCK_SLACK_S = 15 * 60
FIND_AT_MOST = 10_000


class OpenAIBatchAPI:
    # The documented limits of one batch: 50,000 requests, an input file of 200 MB.
    max_requests = 50_000
    max_bytes = 200_000_000
    can_find = True  # by the metadata each batch carries

    def __init__(
        self, client: AsyncOpenAI, model: str, fields: ChatFields, provider: str = "openai"
    ) -> None:
        self.provider = provider
        self._client = client
        self._model = model
        self._fields = fields
        self.endpoint = str(client.base_url)

    def request(
        self, custom_id: str, messages: list[Message], params: GenerationParams
    ) -> dict[str, Any]:
        body = chat_body(self._model, messages, chat_params(params, self._fields))
        return {"custom_id": custom_id, "method": "POST", "url": ROUTE, "body": body}

    def _calling(
        self, what: str, *, creates: bool = False, batch_id: str | None = None
    ) -> contextlib.AbstractContextManager[None]:
        return sdk_errors(openai, what, self.endpoint, self.provider, "OPENAI_API_KEY",
                          creates=creates, batch_id=batch_id)  # fmt: skip

    async def submit(self, requests: list[dict[str, Any]], local_id: str) -> str:
        data = b"".join(to_json(r) + b"\n" for r in requests)
        with self._calling("upload the batch input file"):
            upload = await self._client.files.create(
                file=(f"hpt-{local_id}.jsonl", data, "application/jsonl"), purpose="batch"
            )
        with self._calling("create the batch", creates=True):
            batch = await self._client.batches.create(
                input_file_id=upload.id,
                endpoint=ROUTE,
                completion_window="24h",
                metadata={"hpt_batch": local_id},
            )
        return batch.id

    async def find(self, local_id: str, since: datetime | None = None) -> str | None:
        """The batch whose metadata names ``local_id``, searched newest first back to
        ``since`` (the API filters on no metadata); ``CannotTell`` when ``FIND_AT_MOST``
        batches did not reach back that far."""
        oldest = None if since is None else since.timestamp() - FIND_CLOCK_SLACK_S
        seen, last = 0, None
        with self._calling("list batches"):
            async for batch in self._client.batches.list(limit=100):
                if (batch.metadata or {}).get("hpt_batch") == local_id:
                    return batch.id
                if oldest is not None and batch.created_at < oldest:
                    return None
                seen, last = seen + 1, batch.created_at
                if seen >= FIND_AT_MOST:
                    break
            else:
                return None  # the whole list was read
        reached = datetime.fromtimestamp(last or 0, UTC)
        raise CannotTell(
            f"the search of {self.provider}'s batches for it stopped at the newest {seen}, "
            f"made back to {reached:%Y-%m-%d %H:%M} UTC, before reaching its creation"
        )

    async def status(self, batch_id: str) -> BatchStatus:
        with self._calling(f"batch {batch_id}", batch_id=batch_id):
            batch = await self._client.batches.retrieve(batch_id)
        rc = batch.request_counts
        counts = {"total": rc.total, "completed": rc.completed, "failed": rc.failed} if rc else {}
        error = None
        if batch.status == "failed":  # its input refused: errors.data says why, line by line
            errors = (batch.errors.data or []) if batch.errors else []
            error = "; ".join(e.message or e.code or "" for e in errors) or "the batch failed"
        return BatchStatus(PHASES.get(batch.status, "in_progress"), batch.status, counts, error)

    async def results(self, batch_id: str) -> dict[str, Completion | RequestFailed]:
        with self._calling(f"batch {batch_id}", batch_id=batch_id):
            batch = await self._client.batches.retrieve(batch_id)
        texts = []
        # A batch whose every request failed has an error file and no output file.
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                with self._calling(f"the files of batch {batch_id}", batch_id=batch_id):
                    texts.append((await self._client.files.content(file_id)).content)
        # Parsing a file of up to 50,000 answers takes a while: off the event loop.
        return await asyncio.to_thread(self._read, texts)

    def _read(self, files: list[bytes]) -> dict[str, Completion | RequestFailed]:
        out: dict[str, Completion | RequestFailed] = {}
        for data in files:
            for line in data.splitlines():
                try:
                    entry = from_json(line)
                    out[str(entry["custom_id"])] = self._outcome(entry)
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue  # a blank or broken line: its request counts as expired
        return out

    async def cancel(self, batch_id: str) -> None:
        with self._calling(f"cancel batch {batch_id}"):
            await self._client.batches.cancel(batch_id)

    def _outcome(self, entry: dict[str, Any]) -> Completion | RequestFailed:
        """One line of an output or error file: an answer, an HTTP error the request met,
        or the batch's own error for it (expired, cancelled)."""
        response, error = entry.get("response"), entry.get("error")
        if response is not None:
            code = int(response.get("status_code") or 0)
            body = response.get("body")
            if code == 200:
                try:
                    return chat_completion(body)
                except TransientError as exc:
                    return RequestFailed(str(exc), transient=True)
            detail = short(_error_message(body) or f"HTTP {code}")
            failure = classify_status(code, detail, {}, self.endpoint, self._model)
            return RequestFailed(str(failure), transient=isinstance(failure, TransientError))
        error = error or {}
        why = str(error.get("code") or "")
        message = f"{why}: {error.get('message') or 'no answer'}" if why else "no answer"
        return RequestFailed(message, transient=any(c in why for c in TRANSIENT_CODES))


def _error_message(body: Any) -> str | None:
    """The message of an OpenAI error body (``{"error": {"message": ...}}``)."""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return str(message) if message else None
