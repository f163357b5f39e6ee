"""What flows to and from models: chat messages, generation parameters, completions and their
usage. A leaf: every room may import it, and it imports nothing of hpt."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

Role = Literal["system", "user", "assistant"]
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate as U+FFFD, the replacement character. A server that
    splits a character's bytes may send its halves as escapes ("\\ud800"); text holding one
    cannot be written as UTF-8, so its record and cache entry could not be saved."""
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


class Message(BaseModel):
    role: Role
    content: str


class GenerationParams(BaseModel):
    """Sampling settings; defaults follow the HPT paper, appendix G."""

    temperature: float = Field(0.6, ge=0.0, le=2.0)
    top_p: float = Field(0.9, gt=0.0, le=1.0)
    max_tokens: int = Field(1024, ge=1)
    # A multiplicative penalty on repeated tokens (HF/llama.cpp/vLLM sense); 1.0 disables it.
    # Backends without such a penalty ignore it rather than substituting frequency_penalty.
    repetition_penalty: float | None = Field(1.1, gt=0.0)
    seed: int | None = None
    stop: list[str] | None = None
    logprobs: bool = False


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Completion(BaseModel):
    text: str
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    # Per-token log probabilities of the completion, when asked for and the server gives them.
    logprobs: list[float] | None = None
    # True when no model call was made for this asker: it came from the response cache, or
    # (``shared``) from an identical request already in flight.
    cached: bool = False
    shared: bool = False
    # The generation parameters as the transport put them on the wire, after its provider's
    # mapping (names as sent, e.g. llama.cpp's ``repeat_penalty``; a dropped one is absent).
    # None: not reported (a plugin's transport, or a cache entry older than this field).
    params: dict[str, Any] | None = None
