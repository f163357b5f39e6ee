"""What a ladder run records: one Attempt per level climbed, each with every model call."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Annotated, Any, NotRequired, TypedDict

from pydantic import BaseModel, Field

from hpt.backends import Completion, Message, Usage
from hpt.tasks import Reading, Sample


def mean_token_prob(logprobs: Sequence[float] | None) -> float | None:
    """The mean of the tokens' probabilities, exp(logprob), as GKP ranks candidates."""
    if not logprobs:
        return None
    return sum(math.exp(lp) for lp in logprobs) / len(logprobs)


class Call(BaseModel):
    """One model call inside a strategy (a least-to-most step, a knowledge request, ...)."""

    purpose: str
    model: str
    messages: list[Message]
    completion: str
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    # Served from the response cache (no model call was made).
    cached: bool = False
    # Mean of exp(logprob) over the completion's tokens, when logprobs were asked for.
    mean_token_prob: float | None = None

    @classmethod
    def of(cls, purpose: str, model: str, messages: list[Message], result: Completion) -> Call:
        return cls(
            purpose=purpose,
            model=model,
            messages=messages,
            completion=result.text,
            finish_reason=result.finish_reason,
            usage=result.usage,
            latency_s=result.latency_s,
            cached=result.cached,
            mean_token_prob=mean_token_prob(result.logprobs),
        )


class Attempt(BaseModel):
    level: int
    # Adaptive HPF: the selector iteration that chose this level.
    iteration: int | None = None
    strategy: str
    calls: list[Call] = Field(default_factory=list)
    # The completion the task checked (the last call's, for multi-call strategies).
    completion: str | None = None
    parsed: str | None = None
    resolved: bool = False
    # The task's reason, where it has one (HumanEval: the failing test or sandbox verdict).
    detail: str | None = None
    # The task's graded score on a 0-1 scale (sentence BLEU, ROUGE-L), where it has one.
    score: float | None = None
    # What the strategy says about itself (generated knowledge: which candidate, by what rule).
    notes: dict[str, str] = Field(default_factory=dict)
    # Other readers' answers to the same completion ("strict", "rule"); they never decide.
    alternatives: dict[str, Reading] = Field(default_factory=dict)
    error: str | None = None

    @property
    def prompt_tokens(self) -> int:
        return sum(c.usage.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.usage.completion_tokens for c in self.calls)

    @property
    def latency_s(self) -> float:
        return sum(c.latency_s for c in self.calls)


class LadderState(TypedDict):
    sample: Sample
    attempts: Annotated[list[Attempt], operator.add]
    # Which of the run's independent climbs of this sample (--samples-per-task) this is.
    draw: NotRequired[int]
    # Adaptive HPF: every prompt-selector turn (hpt.graphs.adaptive.Selection).
    selections: NotRequired[Annotated[list[Any], operator.add]]
