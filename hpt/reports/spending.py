"""What a cell's calls cost, by level: tokens by class summed per called model, priced by
token class (``hpt.results.costs``) at batch rates for batched calls. Calls hpt's own
response cache answered cost nothing: their list price is what the cache saved. A call an
identical one in flight answered (``Call.shared``: threshold cells ask each call once) was
paid for the cell as much as for its twin's: in each cell's cost, once in a total.

A call counts where its record keeps it: an attempt's calls (its judge's and extractor's
included) at the attempt's level, adaptive HPF's selector turns apart."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel

from hpt.results.costs import ModelPrice, PriceBook, RunPrices, call_cost
from hpt.results.records import Call, SampleRecord
from hpt.types import Usage

SELECTOR = "selector"
# Where calls count: a level (1..m), or the selector.
Where = int | str


class LevelCost(BaseModel):
    """A cell's calls at one level (or the selector's), and what they cost."""

    where: str  # "1".."m", or "selector"
    calls: int = 0
    # Of ``calls``: answered without a model call (hpt's response cache, or an identical call
    # in flight), through a Batch API.
    cached_calls: int = 0
    batched_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # None: no call here reported provider cache reads.
    cache_read_tokens: int | None = None
    # Of the calls sent (not answered by hpt's response cache): prompt tokens, cache reads.
    sent_prompt_tokens: int = 0
    sent_cache_read_tokens: int | None = None
    # ``cost_usd`` includes the calls an identical one in flight answered (``shared_usd``).
    cost_usd: float | None = None
    saved_usd: float | None = None
    shared_usd: float | None = None

    @property
    def cached_input_share(self) -> float | None:
        """The share of the input sent that the provider read from its prompt cache."""
        read, sent = self.sent_cache_read_tokens, self.sent_prompt_tokens
        return None if read is None or not sent else read / sent


@dataclass
class _Use:
    """Summed usage of calls with the same model, place, batching and caching."""

    calls: int = 0
    usage: Usage = field(default_factory=Usage)

    def add(self, usage: Usage) -> None:
        self.calls += 1
        total = self.usage
        total.prompt_tokens += usage.prompt_tokens
        total.completion_tokens += usage.completion_tokens
        if usage.cache_read_tokens is not None:
            total.cache_read_tokens = (total.cache_read_tokens or 0) + usage.cache_read_tokens
        if usage.cache_write_tokens is not None:
            total.cache_write_tokens = (total.cache_write_tokens or 0) + usage.cache_write_tokens


# (called model's label, where, batched, answered without a call, by one in flight)
_Key = tuple[str, Where, bool, bool, bool]


@dataclass
class CellCost:
    """A cell's cost: None where some called model has no price."""

    cost_usd: float | None
    saved_usd: float | None
    # Of ``cost_usd``: the calls an identical call in flight answered (another cell's too).
    shared_usd: float | None
    levels: list[LevelCost]
    # The prices used, and the models without one (with why and what to do), by label.
    prices: dict[str, ModelPrice]
    unpriced: dict[str, str]

    @property
    def listed(self) -> bool:
        """Some call has a per-token price (not only self-hosted models, which are free)."""
        return any(not p.free for p in self.prices.values())


@dataclass
class CellSpend:
    """The running sums of a cell's calls, priced once every record is read."""

    uses: dict[_Key, _Use] = field(default_factory=dict)

    def add(self, record: SampleRecord) -> None:
        for attempt in record.attempts:
            for call in attempt.calls:
                self._add(call, attempt.level)
        for selection in record.selections:
            if selection.call is not None:
                self._add(selection.call, SELECTOR)

    def _add(self, call: Call, where: Where) -> None:
        key = (call.model, where, call.batched, call.cached, call.shared)
        use = self.uses.get(key)
        if use is None:
            use = self.uses[key] = _Use()
        use.add(call.usage)

    def priced(self, lookup: Callable[[str], ModelPrice | str] | None) -> CellCost:
        """Every level's calls, tokens and cost, levels first, the selector last. ``lookup``:
        a called model's price, or why it has none and how to give one; None: no costs."""
        prices: dict[str, ModelPrice] = {}
        unpriced: dict[str, str] = {}
        for label in dict.fromkeys(key[0] for key in self.uses):
            found = lookup(label) if lookup is not None else ""
            if isinstance(found, ModelPrice):
                prices[label] = found
            elif lookup is not None:
                unpriced[label] = found
        levels: dict[Where, LevelCost] = {}
        known = lookup is not None and not unpriced
        for (label, where, batched, cached, shared), use in self.uses.items():
            level = levels.get(where)
            if level is None:
                level = levels[where] = LevelCost(where=str(where))
                level.cost_usd = level.saved_usd = level.shared_usd = 0.0 if known else None
            usage = use.usage
            level.calls += use.calls
            level.cached_calls += use.calls if cached else 0
            level.batched_calls += use.calls if batched else 0
            level.prompt_tokens += usage.prompt_tokens
            level.completion_tokens += usage.completion_tokens
            read = usage.cache_read_tokens
            if read is not None:
                level.cache_read_tokens = (level.cache_read_tokens or 0) + read
            saved = cached and not shared  # hpt's response cache answered it
            if not saved:
                level.sent_prompt_tokens += usage.prompt_tokens
                if read is not None:
                    level.sent_cache_read_tokens = (level.sent_cache_read_tokens or 0) + read
            if known:
                cost = call_cost(usage, batched, prices[label])
                if saved:
                    level.saved_usd = (level.saved_usd or 0.0) + cost
                else:
                    level.cost_usd = (level.cost_usd or 0.0) + cost
                if shared:
                    level.shared_usd = (level.shared_usd or 0.0) + cost
        order = sorted(levels, key=lambda w: (isinstance(w, str), w if isinstance(w, int) else 0))
        shown = [levels[w] for w in order]
        return CellCost(
            cost_usd=sum(lv.cost_usd or 0.0 for lv in shown) if known else None,
            saved_usd=sum(lv.saved_usd or 0.0 for lv in shown) if known else None,
            shared_usd=sum(lv.shared_usd or 0.0 for lv in shown) if known else None,
            levels=shown,
            prices=prices,
            unpriced=unpriced,
        )


class RunningCost:
    """A cell's cost as records arrive, priced as ``hpt report`` prices it (``run``'s
    prices from ``book``): what the trace viewer's summary shows."""

    def __init__(self, book: PriceBook, run: RunPrices) -> None:
        self.book, self.run, self.spend = book, run, CellSpend()

    def add(self, record: SampleRecord) -> None:
        self.spend.add(record)

    def usd(self) -> float | None:
        """The cost so far; None where a called model has no price."""
        run, book = self.run, self.book
        return self.spend.priced(
            lambda label: run.price(book, label) or run.unknown(book, label)
        ).cost_usd
