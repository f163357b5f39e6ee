"""The saved form of one evaluated sample: a line of ``samples.jsonl``."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from hpt.graphs import Attempt
from hpt.graphs.adaptive import Selection


@dataclass(frozen=True)
class Cell:
    """One dataset x model x mode (x threshold) of a run; records carry the same four values."""

    dataset: str
    model: str  # the evaluated model's label, as records name it
    mode: str
    threshold: float | None = None

    @property
    def title(self) -> str:
        at = f" @{self.threshold:g}" if self.threshold is not None else ""
        return f"{self.dataset}{at} · {self.model} · {self.mode}"

    def key(self, sample_id: str, draw: int) -> tuple[object, ...]:
        """A record's identity within a run (``SampleRecord.key``)."""
        return (self.dataset, self.model, self.mode, self.threshold, sample_id, draw)


class SampleRecord(BaseModel):
    sample_id: str
    # 0..n-1 with --samples-per-task n: independent climbs of the same sample.
    draw: int = 0
    dataset: str
    model: str
    mode: str = "standard"
    # Translation/summarisation: the score that resolved a sample in this run's cell.
    threshold: float | None = None
    strategies: list[str]
    m: int
    penalty: float
    target: str
    # 1..m, or None when no level resolved the sample (or it ended in an error).
    resolved_level: int | None
    # k when resolved at level k; m + penalty when unresolved; None for an error (not scored).
    hpi_score: float | None
    error: str | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    # Adaptive HPF: the selector iteration that resolved the sample, and every selector turn.
    iteration: int | None = None
    selections: list[Selection] = Field(default_factory=list)
    wall_s: float = 0.0

    @property
    def cell(self) -> Cell:
        return Cell(self.dataset, self.model, self.mode, self.threshold)

    @property
    def key(self) -> tuple[object, ...]:
        """What identifies a record within a run: its cell, sample and draw."""
        return self.cell.key(self.sample_id, self.draw)

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
    def calls(self) -> int:
        return sum(len(a.calls) for a in self.attempts) + sum(
            s.call is not None for s in self.selections
        )

    @property
    def cached_calls(self) -> int:
        selector = sum(s.call.cached for s in self.selections if s.call)
        return sum(c.cached for a in self.attempts for c in a.calls) + selector
