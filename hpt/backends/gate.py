"""What a run may spend: the ``CallGate`` a backend asks before each model call it sends.

The backend knows what it is about to send; the gate (the orchestrator's budget) knows the
prices and what was spent. Calls answered by the response cache or by an identical request in
flight never reach the gate: nothing is sent for them."""

from __future__ import annotations

import json
from typing import Protocol

from hpt.types import Completion, Message

# Per message: its role and the chat template's separators, in tokens (generous).
MESSAGE_OVERHEAD_TOKENS = 8


def prompt_token_bound(messages: list[Message]) -> int:
    """At least as many tokens as the prompt can have: a byte-level tokenizer's token covers
    one byte or more, so the UTF-8 size bounds it, whatever the language. A turn's thinking
    blocks sent back (multi-turn DepthQA with a thinking model) count as their JSON."""
    return sum(
        len(m.content.encode())
        + MESSAGE_OVERHEAD_TOKENS
        + (len(json.dumps(m.reasoning_blocks).encode()) if m.reasoning_blocks else 0)
        for m in messages
    )


class CallGate(Protocol):
    """Admits calls while the run's budget allows them. Safe to call from the event loop
    only (no locking: every caller runs on it)."""

    def admit(
        self, backend: str, prompt_bound: int, max_tokens: int, *, batched: bool, must: bool = False
    ) -> object:
        """Reserve the worst case of one call ``backend`` (its label) is about to send:
        ``prompt_bound`` input tokens and ``max_tokens`` output at its price (the batch price
        when ``batched``). Raises ``BudgetSpent`` when the spend so far plus every reservation
        in flight plus this one would pass the budget -- unless ``must``: a call already
        sent (a batch a previous process submitted), reserved whatever the budget says.
        Returns a ticket for ``settle``."""
        ...

    def settle(self, ticket: object, completion: Completion | None) -> None:
        """The call landed (``completion``: billed by its usage and ``batched``), or failed
        (None: nothing billed). Its reservation is released either way."""
        ...

    def counted(self, batch: str) -> bool:
        """Whether the landing of provider batch ``batch`` (hpt's local id) was already
        charged and saved, by this process or an earlier one: its requests are then settled
        with None when collected again (a kill came between saving the spend and the batch
        journal)."""
        ...

    async def landed(self, batch: str) -> None:
        """Every request of batch ``batch`` has been settled: save the spend, with the batch
        noted as counted, before the batch journal says it was collected (a kill between
        the two then neither loses nor repeats its cost)."""
        ...
