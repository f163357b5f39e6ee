"""GraphWalker runs a one-node-at-a-time StateGraph as LangGraph's ainvoke does, and declines
the graphs it cannot."""

from __future__ import annotations

import operator
from typing import Annotated, NotRequired, TypedDict

import pytest
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, StateGraph

from hpt.graphs.walk import GraphWalker


class Toy(TypedDict):
    seen: Annotated[list[str], operator.add]
    count: int
    note: NotRequired[str]


def toy_graph(loop_until: int) -> StateGraph[Toy]:
    graph: StateGraph[Toy] = StateGraph(Toy)

    async def a(state: Toy) -> dict[str, object]:
        return {"seen": ["a"], "count": state["count"] + 1}

    async def b(state: Toy) -> dict[str, object]:
        return {"seen": [f"b{state['count']}"], "note": "b ran"}

    async def route(state: Toy) -> str:
        return "done" if state["count"] >= loop_until else "again"

    graph.add_node("a", a)
    graph.add_node("b", b)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_conditional_edges("b", route, {"done": END, "again": "a"})
    return graph


async def test_the_same_result_as_langgraph() -> None:
    compiled = toy_graph(3).compile()
    walker = GraphWalker.of(compiled)
    assert walker is not None
    start = {"seen": ["start"], "count": 0}
    expected = await compiled.ainvoke(start)
    assert await walker.ainvoke(start) == expected
    assert expected["seen"] == ["start", "a", "b1", "a", "b2", "a", "b3"]


async def test_the_recursion_limit_stops_it_as_langgraph_does() -> None:
    compiled = toy_graph(100).compile()
    walker = GraphWalker.of(compiled)
    assert walker is not None
    with pytest.raises(GraphRecursionError):
        await compiled.ainvoke({"seen": [], "count": 0}, config={"recursion_limit": 5})
    with pytest.raises(GraphRecursionError):
        await walker.ainvoke({"seen": [], "count": 0}, config={"recursion_limit": 5})


def test_graphs_it_cannot_walk_are_left_to_langgraph() -> None:
    fan_out: StateGraph[Toy] = StateGraph(Toy)

    async def node(state: Toy) -> dict[str, object]:
        return {}

    for name in ("x", "y", "z"):
        fan_out.add_node(name, node)
    fan_out.add_edge(START, "x")
    fan_out.add_edge("x", "y")
    fan_out.add_edge("x", "z")  # two ways out of x: parallel steps
    fan_out.add_edge("y", END)
    fan_out.add_edge("z", END)
    assert GraphWalker.of(fan_out.compile()) is None


async def test_a_plain_function_node_runs_as_langgraph_runs_it() -> None:
    """LangGraph gives a plain function an async wrapper (a worker thread); so does this."""
    sync: StateGraph[Toy] = StateGraph(Toy)

    def plain(state: Toy) -> dict[str, object]:
        return {"seen": ["p"], "count": state["count"] + 1}

    sync.add_node("p", plain)
    sync.add_edge(START, "p")
    sync.add_edge("p", END)
    compiled = sync.compile()
    walker = GraphWalker.of(compiled)
    assert walker is not None
    start = {"seen": [], "count": 1}
    assert (
        await walker.ainvoke(start) == await compiled.ainvoke(start) == {"seen": ["p"], "count": 2}
    )
