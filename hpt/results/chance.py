"""What a uniform random guesser scores: the floor every HPI and accuracy should be read
against. On a task with k options each ladder level is an independent guess, right with
probability 1/k, so the guesser is first resolved at level j with probability
(1 - 1/k)^(j-1) / k and never resolved with probability (1 - 1/k)^m. Open-ended tasks (a
number, code, free text) have no such floor."""

from __future__ import annotations

from pydantic import BaseModel


class ChanceLevels(BaseModel):
    hpi: float
    # HPF accuracy: resolved at some level of the ladder.
    accuracy: float
    level1_accuracy: float


def chance_levels(k: int, m: int, penalty: float) -> ChanceLevels:
    """A uniform guesser over ``k`` options climbing an ``m``-level ladder whose unresolved
    samples score m + ``penalty``."""
    if k < 1:
        raise ValueError(f"a guess needs at least one option, not {k}")
    if m < 1:
        raise ValueError(f"a ladder needs at least one level, not {m}")
    right = 1.0 / k
    wrong = 1.0 - right
    hpi = sum(j * wrong ** (j - 1) * right for j in range(1, m + 1)) + wrong**m * (m + penalty)
    return ChanceLevels(hpi=hpi, accuracy=1.0 - wrong**m, level1_accuracy=right)


def hpi_skill(hpi: float | None, chance_hpi: float | None) -> float | None:
    """The HPI on a scale where the guesser scores 0 and resolving everything at level 1
    scores 1 (lower HPI is better, so the scale runs the other way); negative: below chance.
    None where there is no chance level, or where chance is already level 1 (one option)."""
    if hpi is None or chance_hpi is None or chance_hpi <= 1.0:
        return None
    return (chance_hpi - hpi) / (chance_hpi - 1.0)
