"""Running a compiled ladder without Pregel's per-step machinery.

The ladder and the adaptive graph are LangGraph ``StateGraph``s: users draw them, stream them
and add strategies as nodes, and those graphs stay as they are. Running one sample through
Pregel, though, costs more CPU than the model call it makes (channels, tasks, callbacks and
config merging on every step). These graphs take one node at a time (every node has exactly
one way out: an edge or a conditional edge), so ``GraphWalker`` runs the same nodes and the
same edge functions in the same order, merges each node's update into the state with the
graph's own reducers (the ``operator.add`` of ``attempts``), and returns what ``ainvoke``
would. ``GraphWalker.of`` declines a graph of any other shape (parallel branches, a node
with two ways out, a checkpointer), which then runs through LangGraph.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.channels.last_value import LastValue
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START

State = dict[str, Any]
Node = Callable[[State], Awaitable[Mapping[str, Any] | None]]
Edge = Callable[[State], Awaitable[str]]


class GraphWalker:
    """``ainvoke`` for a compiled one-node-at-a-time StateGraph (see the module docstring)."""

    def __init__(
        self,
        graph: Any,
        nodes: dict[str, Node],
        fixed: dict[str, str],
        branches: dict[str, tuple[Edge, dict[str, str]]],
        reducers: dict[str, Callable[[Any, Any], Any]],
    ) -> None:
        self.graph = graph
        self._nodes = nodes
        self._fixed = fixed  # node -> the node a plain edge leads to
        self._branches = branches  # node -> (edge function, its label -> node map)
        self._reducers = reducers

    @classmethod
    def of(cls, graph: Any) -> GraphWalker | None:
        """A walker for ``graph`` (a compiled StateGraph), or None if its shape needs
        Pregel."""
        builder = getattr(graph, "builder", None)
        if builder is None or getattr(graph, "checkpointer", None) is not None:
            return None
        nodes: dict[str, Node] = {}
        for name, spec in builder.nodes.items():
            afunc = getattr(spec.runnable, "afunc", None)
            if afunc is None or not inspect.iscoroutinefunction(afunc):
                return None
            nodes[name] = afunc
        fixed: dict[str, str] = {}
        for start, end in builder.edges:
            if not isinstance(start, str) or start in fixed:
                return None  # a join (several sources) or a fan-out
            fixed[start] = end
        branches: dict[str, tuple[Edge, dict[str, str]]] = {}
        for source, specs in builder.branches.items():
            if len(specs) != 1 or source in fixed:
                return None
            (spec,) = specs.values()
            path = getattr(spec.path, "afunc", None)
            if path is None or not inspect.iscoroutinefunction(path) or not spec.ends:
                return None
            branches[source] = (path, dict(spec.ends))
        if START not in fixed or any(n not in fixed and n not in branches for n in nodes):
            return None
        reducers: dict[str, Callable[[Any, Any], Any]] = {}
        for key, channel in builder.channels.items():
            if isinstance(channel, BinaryOperatorAggregate):
                reducers[key] = channel.operator
            elif not isinstance(channel, LastValue):
                return None
        return cls(graph, nodes, fixed, branches, reducers)

    async def ainvoke(
        self, state: Mapping[str, Any], config: Mapping[str, Any] | None = None
    ) -> State:
        limit = int((config or {}).get("recursion_limit", 25))
        current: State = dict(state)
        node = self._fixed[START]
        steps = 0
        while node != END:
            steps += 1
            if steps > limit:
                raise GraphRecursionError(
                    f"Recursion limit of {limit} reached without hitting a stop condition."
                )
            update = await self._nodes[node](current)
            if update:
                current = self._merge(current, update)
            node = await self._next(node, current)
        return current

    def _merge(self, state: State, update: Mapping[str, Any]) -> State:
        merged = dict(state)
        for key, value in update.items():
            reducer = self._reducers.get(key)
            merged[key] = reducer(merged[key], value) if reducer and key in merged else value
        return merged

    async def _next(self, node: str, state: State) -> str:
        if node in self._fixed:
            return self._fixed[node]
        path, ends = self._branches[node]
        return ends[await path(state)]
