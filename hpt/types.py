"""What flows to and from models: chat messages, generation parameters, completions and their
usage. A leaf: every room may import it, and it imports nothing of hpt."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

Role = Literal["system", "user", "assistant"]
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# How servers say a completion was cut at the token limit: OpenAI-compatible servers (vLLM,
# llama.cpp, TGI) "length", Anthropic "max_tokens".
CUT_OFF = frozenset({"length", "max_tokens"})

# The reasoning efforts a run may ask for: OpenAI's ``reasoning_effort`` values and Anthropic's
# ``output_config.effort`` ones ("max"); each provider takes the ones its model takes
# (hpt.backends.openai_reasoning, hpt.backends.anthropic_thinking) and refuses the others
# before any call.
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
REASONING_EFFORTS: tuple[str, ...] = ReasoningEffort.__args__  # type: ignore[attr-defined]


def unset(value: Any) -> bool:
    # Fields added for reasoning models leave no trace where they are not used: cache keys,
    # run.json and records of other runs stay as they were.
    return value is None


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate as U+FFFD, the replacement character. A server that
    splits a character's bytes may send its halves as escapes ("\\ud800"); text holding one
    cannot be written as UTF-8, so its record and cache entry could not be saved."""
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


class Message(BaseModel):
    role: Role
    content: str
    # An assistant turn's thinking as its provider returned it (Anthropic's signed thinking
    # blocks), sent back with the turn where the API asks for it (multi-turn DepthQA).
    reasoning_blocks: list[dict[str, Any]] | None = Field(None, exclude_if=unset)
    # How many leading characters of ``content`` are the same for every sample asked this
    # prompt (a template's text before its first per-sample field): where a transport may
    # mark a provider prompt-cache breakpoint. Never saved, never part of a cache key.
    shared_prefix: int | None = Field(None, exclude=True)


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
    # Reasoning models: how hard to think (``--reasoning-effort``) and a thinking budget in
    # tokens (``--thinking-budget``; 0 turns thinking off where a model can). None: the
    # provider's default. Each provider maps them to its model's own form (or refuses them).
    reasoning_effort: ReasoningEffort | None = Field(None, exclude_if=unset)
    thinking_budget: int | None = Field(None, ge=0, exclude_if=unset)

    def without_reasoning(self) -> GenerationParams:
        """These settings without a cell's reasoning settings (effort, thinking budget): what
        a run's instruments are given -- judges, the answer extractor, MIPROv2's instruction
        proposer -- so every cell is measured alike, and what a model other than the
        evaluated one is given. The same object where it has none."""
        if self.reasoning_effort is None and self.thinking_budget is None:
            return self
        dropped = {"reasoning_effort", "thinking_budget"}
        return GenerationParams.model_validate(self.model_dump(exclude_unset=True, exclude=dropped))


def unset_flag(value: bool) -> bool:
    # A flag added for batches leaves no trace where it is off (records stay as they were).
    return not value


class Usage(BaseModel):
    """Tokens by class, from the provider's own fields. ``prompt_tokens`` is every input
    token, those read from or written to a provider's prompt cache included (OpenAI counts
    them so; Anthropic's ``input_tokens`` does not, and its transport adds them)."""

    prompt_tokens: int = 0
    # Every output token, reasoning tokens included (as every provider bills them).
    completion_tokens: int = 0
    # Of ``completion_tokens``, those spent thinking, where the provider counts them (OpenAI's
    # ``completion_tokens_details.reasoning_tokens``); None: not reported.
    reasoning_tokens: int | None = Field(None, exclude_if=unset)
    # Of ``prompt_tokens``, those read from the provider's prompt cache (OpenAI's
    # ``prompt_tokens_details.cached_tokens``, Anthropic's ``cache_read_input_tokens``) and
    # those written to it (Anthropic's ``cache_creation_input_tokens``); None: not reported.
    cache_read_tokens: int | None = Field(None, exclude_if=unset)
    cache_write_tokens: int | None = Field(None, exclude_if=unset)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def fresh_input_tokens(self) -> int:
        """Input tokens neither read from nor written to the provider's prompt cache."""
        cached = (self.cache_read_tokens or 0) + (self.cache_write_tokens or 0)
        return max(self.prompt_tokens - cached, 0)


class Completion(BaseModel):
    # The answer: what readers, judges and selectors read. A reasoning model's thinking is
    # never part of it (hpt.backends.thinking keeps them apart).
    text: str
    # The thinking, where the provider returned it (a reasoning field, thinking blocks, an
    # inline <think> block); None: none returned.
    reasoning: str | None = None
    # The provider's own record of the thinking, to send back with the turn (Anthropic's
    # signed ``thinking`` and ``redacted_thinking`` blocks); see ``Message.reasoning_blocks``.
    reasoning_blocks: list[dict[str, Any]] | None = None
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    # Per-token log probabilities of the completion, when asked for and the server gives them.
    logprobs: list[float] | None = None
    # True when no model call was made for this asker: it came from the response cache, or
    # (``shared``) from an identical request already in flight.
    cached: bool = False
    shared: bool = False
    # Answered through a provider's Batch API (billed at its batch price).
    batched: bool = False
    # The generation parameters as the transport put them on the wire, after its provider's
    # mapping (names as sent, e.g. llama.cpp's ``repeat_penalty``; a dropped one is absent).
    # None: not reported (a plugin's transport, or a cache entry older than this field).
    params: dict[str, Any] | None = None

    @property
    def truncated(self) -> bool:
        """Cut off at the token limit."""
        return self.finish_reason in CUT_OFF
