"""What a run saves: one ``SampleRecord`` per line of ``samples.jsonl``, holding the sample's
attempts (one per level climbed, each with every model call) and, in adaptive mode, the
prompt-selector's turns. These types are the whole saved format; nothing here runs a model."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from hpt.types import CUT_OFF, REASONING_EFFORTS, Completion, Message, Usage, unset, unset_flag

# Where a completion cut off at the token limit was cut (``Call.truncation``): inside its
# thinking, so before any answer, or inside its answer.
Truncation = Literal["thinking", "answer"]


def mean_token_prob(logprobs: Sequence[float] | None) -> float | None:
    """The mean of the tokens' probabilities, exp(logprob), as GKP ranks candidates."""
    if not logprobs:
        return None
    return sum(math.exp(lp) for lp in logprobs) / len(logprobs)


class Reading(BaseModel):
    """One reader's answer to a completion, and whether it matches the target."""

    parsed: str | None
    resolved: bool


class Verdict(BaseModel):
    """A judge model's verdict on one answer: its score on the judge's scale (None when no
    valid score was given, after retries: missing, never 0), its feedback and raw replies."""

    score: int | None
    feedback: str = ""
    replies: list[str] = Field(default_factory=list)


class Call(BaseModel):
    """One model call inside a strategy (a least-to-most step, a knowledge request, ...)."""

    purpose: str
    model: str
    messages: list[Message]
    completion: str
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    # No model call was made for this one: served from the response cache, or (``shared``)
    # the answer of an identical call already in flight (e.g. a threshold cell's twin).
    cached: bool = False
    # Mean of exp(logprob) over the completion's tokens, when logprobs were asked for.
    mean_token_prob: float | None = None
    shared: bool = False
    # The generation parameters as sent on the wire, after the provider's mapping (names as
    # sent, e.g. llama.cpp's "repeat_penalty"; one the provider does not take is absent).
    # None: not known (a cache entry written before hpt recorded them, a plugin transport).
    params: dict[str, Any] | None = None
    # A reasoning model's thinking, apart from ``completion`` (its answer); None: none was
    # returned.
    reasoning: str | None = Field(None, exclude_if=unset)
    # Answered through a provider's Batch API, billed at its batch price.
    batched: bool = Field(False, exclude_if=unset_flag)

    @property
    def truncation(self) -> Truncation | None:
        """Where the call was cut off at the token limit: before any answer (inside its
        thinking), or inside its answer; None: it was not."""
        if self.finish_reason not in CUT_OFF:
            return None
        return "answer" if self.completion.strip() else "thinking"

    @classmethod
    def of(cls, purpose: str, model: str, messages: list[Message], result: Completion) -> Call:
        return cls(
            purpose=purpose,
            model=model,
            messages=messages,
            completion=result.text,
            reasoning=result.reasoning,
            finish_reason=result.finish_reason,
            usage=result.usage,
            latency_s=result.latency_s,
            cached=result.cached,
            mean_token_prob=mean_token_prob(result.logprobs),
            shared=result.shared,
            params=result.params,
            batched=result.batched,
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
    # Tasks checked by a judge model (DepthQA): the judge's verdict; its calls are in calls.
    verdict: Verdict | None = None
    error: str | None = None
    # The completion checked was cut off at the token limit, inside its thinking or its
    # answer: the attempt is unresolved because of it, whatever its answer read.
    truncated: Truncation | None = Field(None, exclude_if=unset)

    @property
    def prompt_tokens(self) -> int:
        return sum(c.usage.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.usage.completion_tokens for c in self.calls)

    @property
    def latency_s(self) -> float:
        return sum(c.latency_s for c in self.calls)


class Selection(BaseModel):
    """One turn of adaptive HPF's prompt-selector."""

    iteration: int
    answer: str
    # None: a hallucination (not a valid level), a failed call, or a reply cut off before it
    # named one
    level: int | None
    call: Call | None = None
    error: str | None = None
    # The reply was cut off at the token limit (its call says where).
    truncated: bool = Field(False, exclude_if=lambda cut: not cut)

    @property
    def hallucinated(self) -> bool:
        """The selector named what is no level. A reply cut off before it named any chose
        nothing: the run's token limit, not the selector, decided that turn."""
        return self.level is None and self.error is None and not self.truncated


@dataclass(frozen=True)
class Cell:
    """One dataset x model x mode (x threshold x variant) of a run, the identity records,
    summaries, report rows and comparisons share; every label of a cell is spelled here."""

    dataset: str
    model: str  # the evaluated model's label, as records name it
    mode: str
    threshold: float | None = None
    # A dataset's own run dimension (DepthQA's inference mode); None for the plain ladder.
    variant: str | None = None
    # Reasoning models: the effort and thinking budget asked (--reasoning-effort,
    # --thinking-budget); None: the provider's default.
    reasoning_effort: str | None = None
    thinking_budget: int | None = None

    @staticmethod
    def at(threshold: float | None) -> str:
        """A threshold as a label writes it after a name: " @0.15"; nothing for none."""
        return "" if threshold is None else f" @{threshold:g}"

    @property
    def dataset_label(self) -> str:
        """The dataset with its threshold ("iwslt @0.15"): a column of datasets, a plot's."""
        return self.dataset + self.at(self.threshold)

    @property
    def label(self) -> str:
        """The dataset as report rows name it: with its threshold, variant and reasoning
        settings, where it has them ("iwslt @0.15", "depthqa · multi-turn",
        "gsm8k · effort high"); the model and mode are columns."""
        return self.dataset_label + self._variant

    @property
    def mode_label(self) -> str:
        """The mode with the variant, where the dataset is a column: "standard · multi-turn"."""
        return self.mode + self._variant

    @property
    def title(self) -> str:
        """The whole cell, for messages: "iwslt @0.15 · gpt-4o · standard"."""
        return f"{self.dataset_label} · {self.model} · {self.mode}{self._variant}"

    @property
    def reasoning_label(self) -> str:
        """The reasoning settings asked: "effort high", "thinking 4096", both, or ""."""
        parts = []
        if self.reasoning_effort is not None:
            parts.append(f"effort {self.reasoning_effort}")
        if self.thinking_budget is not None:
            parts.append(f"thinking {self.thinking_budget}")
        return " · ".join(parts)

    @property
    def _variant(self) -> str:
        parts = [p for p in (self.variant, self.reasoning_label) if p]
        return "".join(f" · {p}" for p in parts)

    def order(self) -> tuple[object, ...]:
        """Where the cell stands in summaries and reports: by model, dataset, the standard
        ladder before the adaptive one, threshold and variant. Not the order of first records,
        which follows whichever call returned first and changes from run to run."""
        return (self.model, self.dataset, self.mode != "standard", self.mode,
                self.threshold is not None, self.threshold or 0.0, self.variant or "",
                *self.reasoning_rank())  # fmt: skip

    def reasoning_rank(self) -> tuple[int, bool, int]:
        """Where the cell's reasoning settings stand among others: efforts from least to
        most (REASONING_EFFORTS' order; unset first), then budgets, smallest first."""
        effort = self.reasoning_effort
        known = REASONING_EFFORTS
        rank = -1 if effort is None else known.index(effort) if effort in known else len(known)
        return rank, self.thinking_budget is not None, self.thinking_budget or 0

    def key(self, sample_id: str, draw: int) -> tuple[object, ...]:
        """A record's identity within a run (``SampleRecord.key``)."""
        return (self.dataset, self.model, self.mode, self.threshold, self.variant,
                self.reasoning_effort, self.thinking_budget, sample_id, draw)  # fmt: skip


class SampleRecord(BaseModel):
    sample_id: str
    # 0..n-1 with --samples-per-task n: independent climbs of the same sample.
    draw: int = 0
    dataset: str
    model: str
    mode: str = "standard"
    # Translation/summarisation: the score that resolved a sample in this run's cell.
    threshold: float | None = None
    # A dataset's own run dimension: DepthQA's inference mode ("zero-shot", ...).
    variant: str | None = None
    # Reasoning models: the effort and thinking budget the cell asked for (None: not set).
    reasoning_effort: str | None = Field(None, exclude_if=unset)
    thinking_budget: int | None = Field(None, exclude_if=unset)
    strategies: list[str]
    m: int
    penalty: float
    target: str
    # 1..m, or None when no level resolved the sample (or it ended in an error).
    resolved_level: int | None
    # k when resolved at level k; m + penalty when unresolved; None when not scored: an error,
    # or a level whose judge gave no valid score (hpt.results.scoring.unjudged).
    hpi_score: float | None
    # How many answers a uniform random guess picks from (the chance level); None: an open
    # answer, or a record written before hpt recorded it.
    options: int | None = Field(default=None, ge=1)
    error: str | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    # Adaptive HPF: the selector iteration that resolved the sample, and every selector turn.
    iteration: int | None = None
    selections: list[Selection] = Field(default_factory=list)
    wall_s: float = 0.0

    @property
    def cell(self) -> Cell:
        return Cell(self.dataset, self.model, self.mode, self.threshold, self.variant,
                    self.reasoning_effort, self.thinking_budget)  # fmt: skip

    @property
    def key(self) -> tuple[object, ...]:
        """What identifies a record within a run: its cell, sample and draw."""
        return self.cell.key(self.sample_id, self.draw)

    def all_calls(self) -> list[Call]:
        """Every call of the climb, the prompt-selector's included."""
        calls = [c for a in self.attempts for c in a.calls]
        return calls + [s.call for s in self.selections if s.call is not None]

    @property
    def prompt_tokens(self) -> int:
        """Every call's, the prompt-selector's included."""
        selector = sum(s.call.usage.prompt_tokens for s in self.selections if s.call)
        return sum(a.prompt_tokens for a in self.attempts) + selector

    @property
    def completion_tokens(self) -> int:
        selector = sum(s.call.usage.completion_tokens for s in self.selections if s.call)
        return sum(a.completion_tokens for a in self.attempts) + selector

    @property
    def reasoning_tokens(self) -> int | None:
        """Of ``completion_tokens``, those spent thinking, where any call reported them."""
        counts = [c.usage.reasoning_tokens for c in self.all_calls()]
        known = [n for n in counts if n is not None]
        return sum(known) if known else None

    @property
    def calls(self) -> int:
        return sum(len(a.calls) for a in self.attempts) + sum(
            s.call is not None for s in self.selections
        )

    @property
    def cached_calls(self) -> int:
        selector = sum(s.call.cached for s in self.selections if s.call)
        return sum(c.cached for a in self.attempts for c in a.calls) + selector


class DepthRecord(SampleRecord):
    """A DepthQA node's record: one per (node, cell), never one per question. ``sample_id``
    is the node id; the graph edges travel with it so that depth means and discrepancies are
    computed from the records alone."""

    kind: Literal["depth"] = "depth"
    node_id: str
    qid: str
    depth: int
    predecessors: list[str] = Field(default_factory=list)
    successors: list[str] = Field(default_factory=list)
    # The messages of the answering call, the prediction judged, and the judge's verdict
    # (of the resolving attempt, else the last).
    prompt: list[Message] = Field(default_factory=list)
    prediction: str | None = None
    judge_score: int | None = None
    feedback: str | None = None
    judge_replies: list[str] = Field(default_factory=list)
    # Min-K% probability (K = 20%) of the prediction, when the backend gave logprobs.
    min_k_prob: float | None = None


_KIND = re.compile(r'"kind"\s*:\s*"(\w+)"')
# Record types by the ``record_kind`` a task declares.
RECORD_KINDS: dict[str, type[SampleRecord]] = {"depth": DepthRecord}


def parse_record_json(line: str) -> SampleRecord:
    """A line of samples.jsonl as the record kind it holds. Inside JSON strings quotes are
    escaped, so an unescaped "kind" key can only be the record's own."""
    kind = _KIND.search(line)
    if kind is not None and kind.group(1) in RECORD_KINDS:
        return RECORD_KINDS[kind.group(1)].model_validate_json(line)
    return SampleRecord.model_validate_json(line)
