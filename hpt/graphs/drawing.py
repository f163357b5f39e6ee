"""The ladder's and the adaptive graph's Mermaid diagrams (``hpt graph``)."""

from __future__ import annotations

from collections.abc import Sequence

from hpt.graphs.adaptive import build_adaptive
from hpt.graphs.ladder import build_ladder


def mermaid(strategies: Sequence[str], adaptive: bool = False) -> str:
    """The graph's Mermaid diagram, drawn locally (no mermaid.ink call)."""
    graph = build_adaptive(strategies) if adaptive else build_ladder(strategies)
    return str(graph.get_graph().draw_mermaid())
