"""LangGraph state machines: the HPF ladder and its strategy nodes."""

from hpt.graphs.ladder import LadderRuntime, build_ladder, mermaid, recursion_limit
from hpt.graphs.state import Attempt, Call, LadderState
from hpt.graphs.strategies import (
    DEFAULT_LADDER,
    STRATEGIES,
    StrategyContext,
    UnknownStrategyError,
    resolve_strategies,
    strategy,
)

__all__ = [
    "DEFAULT_LADDER",
    "STRATEGIES",
    "Attempt",
    "Call",
    "LadderRuntime",
    "LadderState",
    "StrategyContext",
    "UnknownStrategyError",
    "build_ladder",
    "mermaid",
    "recursion_limit",
    "resolve_strategies",
    "strategy",
]
