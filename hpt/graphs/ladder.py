"""The Hierarchical Prompting Framework as a LangGraph state machine.

One node per strategy in ladder order; after each node a conditional edge ends the run when
the task resolved the sample (or the model call failed) and otherwise moves one level up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph

from hpt.backends import Backend, BackendError, FatalBackendError, GenerationParams
from hpt.graphs.state import Attempt, LadderState
from hpt.graphs.strategies import STRATEGIES, StrategyContext, resolve_strategies
from hpt.tasks import Sample, Task

# Edge labels. A failed model call ends the climb like a resolve does (the sample is then
# recorded as an error); one label keeps the drawn graph to one edge per pair of nodes.
STOP = "resolved/error"
NEXT = "unresolved"
Outcome = Literal["resolved/error", "unresolved"]


@dataclass
class LadderRuntime:
    """What the nodes need at run time; absent when the graph is only drawn."""

    task: Task
    model: Backend
    knowledge_model: Backend
    params: GenerationParams
    exemplar_pool: Sequence[Sample]
    # Part of every cache key: a new epoch asks the model afresh.
    epoch: int = 0


def cache_seed(sample_id: str, epoch: int, draw: int) -> str:
    """What keeps one climb's cached answers apart from every other climb's."""
    return f"{sample_id}#{epoch}" + (f"/{draw}" if draw else "")


def _node(
    level: int, name: str, runtime: LadderRuntime | None, iteration_from: str | None = None
) -> Any:
    fn = STRATEGIES[name]

    async def run(state: LadderState) -> dict[str, list[Attempt]]:
        if runtime is None:
            raise RuntimeError("this ladder was built for drawing only")
        ctx = StrategyContext(
            sample=state["sample"],
            task=runtime.task,
            level=level,
            model=runtime.model,
            knowledge_model=runtime.knowledge_model,
            params=runtime.params,
            exemplar_pool=runtime.exemplar_pool,
            previous=state["attempts"],
            cache_seed=cache_seed(state["sample"].id, runtime.epoch, state.get("draw", 0)),
        )
        attempt = Attempt(level=level, strategy=name)
        if iteration_from is not None:  # adaptive: the selector turn that chose this level
            attempt.iteration = len(state.get("selections", []))
        try:
            completion = await fn(ctx)
        except FatalBackendError:
            raise
        except BackendError as exc:
            attempt.error = str(exc)
        else:
            check = await runtime.task.acheck(state["sample"], completion)
            attempt.completion, attempt.parsed, attempt.resolved = (
                completion,
                check.parsed,
                check.resolved,
            )
            attempt.detail, attempt.score = check.detail, check.score
        attempt.calls = ctx.calls
        attempt.notes = ctx.notes
        return {"attempts": [attempt]}

    return run


def _outcome(state: LadderState) -> Outcome:
    last = state["attempts"][-1]
    return "resolved/error" if last.resolved or last.error is not None else "unresolved"


def build_ladder(strategies: Sequence[str], runtime: LadderRuntime | None = None) -> Any:
    """Compile the ladder over ``strategies`` (registered names, lowest level first)."""
    names = resolve_strategies(strategies)
    graph: StateGraph[LadderState] = StateGraph(LadderState)
    for level, name in enumerate(names, 1):
        graph.add_node(name, _node(level, name, runtime))
    graph.add_edge(START, names[0])
    for i, name in enumerate(names):
        after = names[i + 1] if i + 1 < len(names) else END
        graph.add_conditional_edges(name, _outcome, {STOP: END, NEXT: after})
    return graph.compile()


def recursion_limit(levels: int) -> int:
    return levels + 5


def mermaid(strategies: Sequence[str], adaptive: bool = False) -> str:
    """The ladder's Mermaid diagram, drawn locally (no mermaid.ink call)."""
    if adaptive:
        from hpt.graphs.adaptive import build_adaptive  # it builds on this module

        return str(build_adaptive(strategies).get_graph().draw_mermaid())
    return str(build_ladder(strategies).get_graph().draw_mermaid())
