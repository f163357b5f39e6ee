"""What a run may spend (``--budget-usd``) and send (``--max-calls``): the ``CallGate`` every
backend asks before each call it sends, and ``RUN/spend.json``, the ledger of what was spent,
which a resumed run starts from."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from hpt.backends.errors import BudgetSpent
from hpt.errors import StorageError
from hpt.orchestrator.spec import RunSpec
from hpt.results.costs import ModelPrice, PriceBook, PriceError, call_cost, worst_cost
from hpt.results.reader import read_records
from hpt.results.records import SampleRecord
from hpt.results.rundir import SAMPLES, RunDirError
from hpt.types import Completion

SPEND = "spend.json"
# The ledger is rewritten at most this often while calls land (and once at the end).
LEDGER_EVERY_S = 1.0


class ModelSpend(BaseModel):
    usd: float = 0.0
    calls: int = 0


# The variable each hosted provider's SDK reads its endpoint from.
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}


class Spend(BaseModel):
    """``spend.json``: what the run's calls cost (at the run's prices) and how many were
    made, in all and by model (backend label). Calls answered by the response cache are
    not in it: they cost nothing. ``batches``: the provider batches (hpt's local ids) whose
    landing is counted in it, so that one collected again after a kill is not paid twice."""

    spent_usd: float = 0.0
    calls: int = 0
    by_model: dict[str, ModelSpend] = Field(default_factory=dict)
    batches: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)

    def add(self, label: str, usd: float, calls: int = 1) -> None:
        entry = self.by_model.setdefault(label, ModelSpend())
        entry.usd += usd
        entry.calls += calls
        self.spent_usd += usd
        self.calls += calls


def load_spend(directory: Path) -> Spend | None:
    """The run's ledger; None where it kept none (a run started without a budget)."""
    path = directory / SPEND
    try:
        return Spend.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RunDirError(f"cannot read {path}: {exc.strerror}") from None
    except (ValidationError, json.JSONDecodeError) as exc:
        raise RunDirError(
            f"{path}: not a spending ledger ({type(exc).__name__}); restore it, or delete it "
            "to count the budget from the run's records"
        ) from None


def spend_of_records(
    records: Iterable[SampleRecord], prices: Mapping[str, ModelPrice | None]
) -> Spend:
    """What recorded samples' calls cost: the ledger of a run that kept none (the climbs it
    abandoned, and what a DSPy optimiser spent, are not in any record)."""
    spend = Spend()
    for record in records:
        for call in record.all_calls():
            if call.cached:
                continue
            price = prices.get(call.model)
            usd = 0.0 if price is None else call_cost(call.usage, call.batched, price)
            spend.add(call.model, usd)
    return spend


async def price_run(
    spec: RunSpec, saved: Mapping[str, ModelPrice], *, estimate: bool = False
) -> dict[str, ModelPrice | None] | None:
    """The price of every model the run may call, by backend label: the run's own where it
    recorded one (run.json's ``prices``: a resumed run keeps the prices it started with),
    else the cost map's with the user's ``--prices`` file over it. None: the run prices
    nothing (no budget, estimate or price file). A model without a price, where a budget or
    an estimate needs one, is refused before any call with how to price it."""
    need = "--budget-usd" if spec.budget_usd is not None else "--estimate" if estimate else None
    if need is None and spec.max_calls is None and spec.prices_file is None:
        return None
    user_file = spec.prices_file
    if user_file is not None and saved and not user_file.exists():
        user_file = None  # gone since the run started: the prices it recorded stand
    book = await asyncio.to_thread(PriceBook.load, user_file)
    prices: dict[str, ModelPrice | None] = {}
    for name in spec.model_names():
        model = spec.resolve(name)
        config = model.config
        label, provider, model_id = model.label, config.provider, config.model or ""
        # Where the SDK sends it when the config names no endpoint: its variable, else the
        # provider's own host (a local server reached through OPENAI_BASE_URL is not OpenAI).
        endpoint = next(iter(config.endpoints), None) or os.environ.get(
            BASE_URL_ENV.get(provider, ""), None
        )
        # The cost map is read in a thread, at the first model it is asked for.
        price = await asyncio.to_thread(
            book.price, label, provider, model_id, endpoint=endpoint, recorded=saved
        )
        if price is None and need is not None:
            why = book.unknown(label, provider, model_id, endpoint)
            raise PriceError(f"{need} needs the price of every model the run calls: {why}")
        prices[model.label] = price
    return prices


async def open_budget(
    spec: RunSpec,
    prices: Mapping[str, ModelPrice | None],
    out: Path,
    ledger: Ledger,
    *,
    resume: bool,
) -> Budget | None:
    """The run's gate, where it has a budget (``--budget-usd``, ``--max-calls``), keeping
    ``ledger``: starting from what a resumed run spent before (its ledger; a run that kept
    none, from its records' calls), which counts against the budget."""
    if spec.budget_usd is None and spec.max_calls is None:
        return None
    spend = None
    if resume:
        spend = await asyncio.to_thread(load_spend, out)
        if spend is None and (out / SAMPLES).exists():
            spend = await asyncio.to_thread(
                lambda: spend_of_records(read_records(out, None), prices)
            )
    return Budget(prices, ledger, usd=spec.budget_usd, calls=spec.max_calls, spend=spend)


@dataclass(frozen=True)
class _Ticket:
    label: str
    worst_usd: float
    price: ModelPrice | None


class Budget:
    """The run's ``CallGate``: a call is admitted only while what was spent, the worst case
    of every call in flight and this call's worst case stay within ``usd``, and the calls
    made and in flight stay within ``calls``. Calls that fail are not billed (nor counted);
    every attempt that lands is. What was spent is kept in ``ledger``. On the event loop
    only, as ``CallGate`` says."""

    def __init__(
        self,
        prices: Mapping[str, ModelPrice | None],
        ledger: Ledger,
        *,
        usd: float | None,
        calls: int | None,
        spend: Spend | None = None,
    ) -> None:
        self.prices = dict(prices)
        self.ledger = ledger
        self.usd = usd
        self.calls = calls
        self.spend = spend or Spend()
        self._counted = set(self.spend.batches)
        self.reserved_usd = 0.0
        self.in_flight = 0
        # The flag whose bound refused a call (the run then stops taking new work), and the
        # calls refused with their worst cases summed: in batch mode every climb waits at
        # once, and a resume asks them all again together (the cache answers what led there).
        self.refused: str | None = None
        self.refused_calls = 0
        self.refused_usd = 0.0
        # Bumped by every call settled: which state of the ledger a write holds.
        self.version = 0
        # The ledger could not be written: no further call may be sent.
        self.fault: StorageError | None = None

    def admit(
        self, backend: str, prompt_bound: int, max_tokens: int, *, batched: bool, must: bool = False
    ) -> _Ticket:
        if self.fault is not None:
            raise self.fault
        if backend not in self.prices:
            # Every model the run opens is priced when it starts (price_run).
            raise PriceError(f"{backend} was not priced when the run started")
        price = self.prices[backend]
        worst = 0.0 if price is None else worst_cost(price, prompt_bound, max_tokens, batched)
        if not must:
            self._check(backend, worst)
        self.reserved_usd += worst
        self.in_flight += 1
        return _Ticket(backend, worst, price)

    def _check(self, backend: str, worst: float) -> None:
        over_calls = self.calls is not None and self.spend.calls + self.in_flight + 1 > self.calls
        over_usd = (
            self.usd is not None and self.spend.spent_usd + self.reserved_usd + worst > self.usd
        )
        if over_calls or over_usd:
            self.refused_calls += 1
            self.refused_usd += worst
        if over_calls:
            self.refused = "--max-calls"
            raise BudgetSpent(
                f"--max-calls {self.calls}: {self.spend.calls} calls made and "
                f"{self.in_flight} in flight"
            )
        if over_usd:
            self.refused = "--budget-usd"
            raise BudgetSpent(
                f"--budget-usd {self.usd:g}: ${self.spend.spent_usd:.4f} spent, "
                f"${self.reserved_usd:.4f} reserved by calls in flight, and {backend}'s next "
                f"call may cost ${worst:.4f}"
            )

    def settle(self, ticket: object, completion: Completion | None) -> None:
        assert isinstance(ticket, _Ticket)
        self.in_flight -= 1
        # Floating sums drift: with nothing in flight nothing is reserved.
        left = max(self.reserved_usd - ticket.worst_usd, 0.0)
        self.reserved_usd = left if self.in_flight else 0.0
        if completion is None:
            return
        price = ticket.price
        usd = 0.0 if price is None else call_cost(completion.usage, completion.batched, price)
        self.spend.add(ticket.label, usd)
        self.version += 1

    def counted(self, batch: str) -> bool:
        return batch in self._counted

    async def landed(self, batch: str) -> None:
        """The batch's requests are settled: its spend is written now, the batch noted in
        it, before the batch journal may say it was collected."""
        if batch in self._counted:
            return
        self._counted.add(batch)
        self.spend.batches.append(batch)
        self.version += 1
        await self._write()
        if self.fault is not None:
            raise self.fault

    async def keep_ledger(self) -> None:
        """Rewrite the ledger (in a thread) at most every ``LEDGER_EVERY_S`` while calls
        land, until cancelled. A write that fails stops further calls: the gate raises its
        ``StorageError`` (what the run would spend could not be kept)."""
        while self.fault is None:
            await asyncio.sleep(LEDGER_EVERY_S)
            if self.version != self.ledger.written:
                await self._write()

    async def _write(self) -> None:
        # A copy: the calls landing meanwhile change the spend, not what is being written.
        try:
            await asyncio.to_thread(
                self.ledger.write, self.spend.model_copy(deep=True), self.version
            )
        except StorageError as exc:
            self.fault = self.fault or exc

    def write_ledger(self) -> None:
        """The last write, at the end of the run (on the event loop: one small file)."""
        self.ledger.write(self.spend, self.version)


class Ledger:
    """``spend.json``, written by ``write`` (whole or not at all). The periodic writes, a
    batch's landing and the last write (and one a cancelled ``keep_ledger`` left running in
    its thread) may meet: they take turns, and a state older than the one on disk is never
    written over it."""

    def __init__(self, write: Callable[[Spend], None]) -> None:
        self._write = write
        self._lock = threading.Lock()
        self.written = -1

    def write(self, spend: Spend, version: int) -> None:
        with self._lock:
            if version <= self.written:
                return
            self._write(spend)
            self.written = version


def spend_text(spend: Spend, prices: Mapping[str, ModelPrice | None]) -> str:
    """What was spent, in all and by model (one without a price says so), as one line."""
    models = [
        f"{label} {usd_text(entry.usd) if prices.get(label) is not None else 'unpriced'} "
        f"on {entry.calls} calls"
        for label, entry in sorted(spend.by_model.items())
    ]
    by_model = f" ({'; '.join(models)})" if models else ""
    return f"spent {usd_text(spend.spent_usd)} on {spend.calls} calls{by_model}"


def usd_text(amount: float) -> str:
    """Dollars to the cent, to a hundredth of a cent below ten cents."""
    return f"${amount:.4f}" if 0 < amount < 0.1 else f"${amount:.2f}"
