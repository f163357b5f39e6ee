"""The Hierarchical Prompting Framework as a LangGraph state machine.

One node per strategy in ladder order; after each node a conditional edge ends the run when
the task resolved the sample (or the model call failed) and otherwise moves one level up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from langgraph.graph import END, START, StateGraph

from hpt.graphs.node import LadderRuntime, attempt_ends_climb, strategy_node
from hpt.graphs.state import LadderState
from hpt.graphs.strategies import resolve_strategies

# Edge labels. A failed model call ends the climb like a resolve does (the sample is then
# recorded as an error); one label keeps the drawn graph to one edge per pair of nodes.
STOP: Final = "resolved/error"
NEXT: Final = "unresolved"
Outcome = Literal["resolved/error", "unresolved"]


# Edge functions are coroutines: LangGraph runs a plain function in a worker thread, one
# thread hop (and its synchronisation objects) per edge of every climb.
async def _outcome(state: LadderState) -> Outcome:
    return STOP if attempt_ends_climb(state["attempts"][-1]) else NEXT


def build_ladder(strategies: Sequence[str], runtime: LadderRuntime | None = None) -> Any:
    """Compile the ladder over ``strategies`` (registered names, lowest level first)."""
    names = resolve_strategies(strategies)
    graph: StateGraph[LadderState] = StateGraph(LadderState)
    for level, name in enumerate(names, 1):
        graph.add_node(name, strategy_node(level, name, runtime))
    graph.add_edge(START, names[0])
    for i, name in enumerate(names):
        after = names[i + 1] if i + 1 < len(names) else END
        graph.add_conditional_edges(name, _outcome, {STOP: END, NEXT: after})
    return graph.compile()


def recursion_limit(levels: int) -> int:
    return levels + 5
