"""What a whole run will cost, projected from the samples it has run (``hpt run --estimate N``).

A ladder's depth varies by sample (one resolved at level 1 makes one call, one that climbs to
the top makes a dozen), so a sample's cost is one draw from a skewed spread: the projection
resamples the samples' own costs rather than assume a shape."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from hpt.backends.gate import prompt_token_bound
from hpt.results.costs import ModelPrice, call_cost, worst_cost
from hpt.results.records import Call, SampleRecord

# Bootstrap replicates, and the share of them the interval holds.
REPLICATES = 4000
LEVEL = 0.95
# The fewest samples per cell an estimate runs: a bootstrap of two or three costs barely
# varies (most resamples repeat one value), so its interval would claim too much.
ESTIMATE_MIN = 5


@dataclass(frozen=True)
class SampleCost:
    """One recorded climb's cost: its calls answered by a model, and those answered by the
    response cache (or a twin in flight), which cost nothing."""

    usd: float
    calls: int
    cached_calls: int
    # Its costliest level's calls at their worst (prompt bound and token limit, as a
    # budget reserves them): in batch mode every climb's level waits at once.
    level_worst_usd: float = 0.0


# Where a call's parameters as sent name its token limit.
TOKEN_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "max_new_tokens")


def sample_cost(
    record: SampleRecord, prices: Mapping[str, ModelPrice | None], max_tokens: int
) -> SampleCost:
    """What ``record``'s calls cost at ``prices`` (by backend label; an unpriced label's calls
    count as calls at no cost). ``max_tokens``: the token limit of a call whose recorded
    parameters do not name its own."""
    usd, calls, cached = 0.0, 0, 0
    for call in record.all_calls():
        if call.cached:
            cached += 1
            continue
        calls += 1
        price = prices.get(call.model)
        if price is not None:
            usd += call_cost(call.usage, call.batched, price)

    def worst(group: list[Call]) -> float:
        return sum(_worst(c, prices.get(c.model), max_tokens) for c in group)

    levels = [a.calls for a in record.attempts] + [[s.call] for s in record.selections if s.call]
    return SampleCost(usd, calls, cached, max((worst(g) for g in levels), default=0.0))


def _worst(call: Call, price: ModelPrice | None, max_tokens: int) -> float:
    if price is None:
        return 0.0
    sent = call.params or {}
    limit = next((v for k in TOKEN_LIMITS if isinstance(v := sent.get(k), int)), max_tokens)
    return worst_cost(price, prompt_token_bound(call.messages), limit, call.batched)


class CellEstimate(BaseModel):
    """One cell's projection: ``planned`` climbs, ``run`` of them recorded at ``spent_usd``
    and ``calls``; the whole cell's cost (``projected_usd``, within ``low_usd``..``high_usd``)
    and calls (``projected_calls``)."""

    title: str
    planned: int
    run: int
    spent_usd: float
    calls: int
    cached_calls: int
    projected_usd: float
    low_usd: float
    high_usd: float
    projected_calls: float


class Estimate(BaseModel):
    """Every cell's projection and the run's (its interval from the same replicates: cells'
    errors do not simply add)."""

    cells: list[CellEstimate]
    spent_usd: float
    projected_usd: float
    low_usd: float
    high_usd: float
    calls: int
    cached_calls: int
    projected_calls: float
    # One level's calls of every climb left, at their worst as the climbs run show it: what
    # batch mode reserves at once (every climb waits together), which a budget must allow.
    level_worst_usd: float = 0.0
    level: float = LEVEL


@dataclass(frozen=True)
class CellCosts:
    """What a cell's projection is made from: its title, its planned climbs and the costs of
    those recorded."""

    title: str
    planned: int
    costs: Sequence[SampleCost]


def project(cells: Iterable[CellCosts], *, seed: int = 0) -> Estimate:
    """Each cell's cost and the run's: what was spent, plus the remaining climbs at the
    recorded climbs' mean, with a ``LEVEL`` interval. Each bootstrap replicate resamples a
    cell's recorded costs (the mean's uncertainty) and draws the remaining climbs' total
    around that mean with the resample's spread (their own variation), so the interval is
    one for the run's actual cost, not only for its expected cost."""
    rng = np.random.default_rng(seed)
    totals = np.zeros(REPLICATES)
    estimates: list[CellEstimate] = []
    level_worst = 0.0
    for cell in cells:
        usd = np.array([c.usd for c in cell.costs], dtype=float)
        spent, run = float(usd.sum()), len(usd)
        remaining = max(cell.planned - run, 0)
        calls = sum(c.calls for c in cell.costs)
        level_worst += remaining * max((c.level_worst_usd for c in cell.costs), default=0.0)
        replicates = _replicates(usd, remaining, rng)
        totals += replicates
        low, high = _interval(replicates)
        mean = spent / run if run else 0.0
        estimates.append(
            CellEstimate(
                title=cell.title,
                planned=cell.planned,
                run=run,
                spent_usd=spent,
                calls=calls,
                cached_calls=sum(c.cached_calls for c in cell.costs),
                projected_usd=spent + remaining * mean,
                low_usd=spent + low,
                high_usd=spent + high,
                projected_calls=calls + (remaining * calls / run if run else 0.0),
            )
        )
    low, high = _interval(totals)
    spent = sum(c.spent_usd for c in estimates)
    return Estimate(
        cells=estimates,
        spent_usd=spent,
        projected_usd=sum(c.projected_usd for c in estimates),
        low_usd=spent + low,
        high_usd=spent + high,
        calls=sum(c.calls for c in estimates),
        cached_calls=sum(c.cached_calls for c in estimates),
        projected_calls=sum(c.projected_calls for c in estimates),
        level_worst_usd=level_worst,
    )


def _replicates(usd: NDArray[np.float64], remaining: int, rng: np.random.Generator) -> Any:
    """``REPLICATES`` draws of what the ``remaining`` climbs will cost."""
    if not remaining or not len(usd):
        return np.zeros(REPLICATES)
    resamples = rng.choice(usd, size=(REPLICATES, len(usd)), replace=True)
    means, spreads = resamples.mean(axis=1), resamples.std(axis=1)
    # The remaining climbs' total: near-normal around remaining x mean (a sum of many).
    drawn = remaining * means + rng.normal(0.0, 1.0, REPLICATES) * spreads * np.sqrt(remaining)
    return np.maximum(drawn, 0.0)


def _interval(values: Any) -> tuple[float, float]:
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return float(low), float(high)
