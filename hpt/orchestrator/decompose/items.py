"""The questions being built, each where it was generated in its depth-3 question's tree."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Item:
    """One generated question where it was generated. ``id`` is its path from the depth-3
    question: ``"3"`` (the third depth-3 row), ``"3.2"`` (its second depth-2 sub-question),
    ``"3.2.1"``, and ``a`` for augmented ones (``"3.a1"``, ``"3.2.a1"``) -- stable across
    reruns, so checkpoints and cache seeds find their step again."""

    id: str
    group: str
    depth: int
    text: str
    parent: str | None = None
    augmented: bool = False
    children: list[str] = field(default_factory=list)
