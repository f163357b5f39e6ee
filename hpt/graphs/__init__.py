"""LangGraph state machines: the HPF ladder and its strategy nodes."""

import hpt.graphs.depth_strategies
import hpt.graphs.structured_strategies  # noqa: F401  (registers HELM's baseline and DSPy's)
from hpt.graphs.ladder import LadderRuntime, build_ladder, mermaid, recursion_limit
from hpt.graphs.state import LadderState
from hpt.graphs.strategies import (
    DEFAULT_LADDER,
    STRATEGIES,
    STRATEGY_PARAMS,
    NoParams,
    StrategyContext,
    UnknownStrategyError,
    resolve_strategies,
    strategy,
    strategy_params,
)

__all__ = [
    "DEFAULT_LADDER",
    "STRATEGIES",
    "STRATEGY_PARAMS",
    "LadderRuntime",
    "LadderState",
    "NoParams",
    "StrategyContext",
    "UnknownStrategyError",
    "build_ladder",
    "mermaid",
    "recursion_limit",
    "resolve_strategies",
    "strategy",
    "strategy_params",
]
