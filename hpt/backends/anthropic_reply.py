"""How a Messages API reply reads as a completion: the answer apart from the thinking, and
usage by token class. Shared by the direct call (``hpt.backends.anthropic_backend``) and
Message Batches (``hpt.backends.anthropic_batch``), so both read a reply alike."""

from __future__ import annotations

from typing import Any

import anthropic

from hpt.types import Completion, Usage

# How a redacted thinking block (encrypted, no text) shows in a completion's reasoning.
REDACTED = "[redacted thinking]"


def completion_of(msg: anthropic.types.Message, sent: dict[str, Any] | None) -> Completion:
    """A Messages API reply (a direct call's, or a batch's succeeded result) as a completion.
    ``input_tokens`` counts only the input after the last cache breakpoint: the prompt is
    that and the tokens read from and written to the cache."""
    text = "".join(block.text for block in msg.content if block.type == "text")
    blocks = [
        block.to_dict(mode="json")
        for block in msg.content
        if block.type in ("thinking", "redacted_thinking")
    ]
    usage = msg.usage
    details = usage.output_tokens_details
    read, written = usage.cache_read_input_tokens, usage.cache_creation_input_tokens
    return Completion(
        text=text,
        reasoning=_reasoning(blocks),
        reasoning_blocks=blocks or None,
        finish_reason=msg.stop_reason,
        usage=Usage(
            prompt_tokens=usage.input_tokens + (read or 0) + (written or 0),
            completion_tokens=usage.output_tokens,
            reasoning_tokens=details.thinking_tokens if details is not None else None,
            cache_read_tokens=read,
            cache_write_tokens=written,
        ),
        params=sent,
    )


def _reasoning(blocks: list[dict[str, Any]]) -> str | None:
    """The thinking blocks' text, a redacted block noted as such; None when none returned
    any (models that omit their thinking's text still sign it)."""
    parts = [
        REDACTED if b["type"] == "redacted_thinking" else str(b.get("thinking") or "")
        for b in blocks
    ]
    return "\n\n".join(p for p in parts if p) or None
