"""LangGraph state machines: the HPF ladder and its strategy nodes, and the registry of
strategies with what each needs (hpt.graphs.strategies)."""

# The built-in strategies, registered in this order (the order ``hpt list`` shows).
# isort: off
import hpt.graphs.hpf
import hpt.graphs.self_consistency
import hpt.graphs.depth_strategies
import hpt.graphs.structured_strategies  # noqa: F401  (HELM's baseline and DSPy's)

# isort: on
from hpt.graphs.drawing import mermaid
from hpt.graphs.ladder import build_ladder, recursion_limit
from hpt.graphs.node import LadderRuntime
from hpt.graphs.state import LadderState
from hpt.graphs.strategies import (
    DEFAULT_LADDER,
    STRATEGIES,
    Needs,
    NoParams,
    StrategyContext,
    StrategyRegistrationError,
    StrategySpec,
    UnknownStrategyError,
    ladder_needs,
    ladder_strategies,
    register_strategy,
    resolve_strategies,
    strategy,
    strategy_params,
)

__all__ = [
    "DEFAULT_LADDER",
    "STRATEGIES",
    "LadderRuntime",
    "LadderState",
    "Needs",
    "NoParams",
    "StrategyContext",
    "StrategyRegistrationError",
    "StrategySpec",
    "UnknownStrategyError",
    "build_ladder",
    "ladder_needs",
    "ladder_strategies",
    "mermaid",
    "recursion_limit",
    "register_strategy",
    "resolve_strategies",
    "strategy",
    "strategy_params",
]
