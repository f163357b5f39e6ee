"""Deduplication of the generated questions (DepthQA appendix A, "Question deduplication and
augmentation"): by the cosine similarity of their embeddings, or without an embedding model
by exact (normalised) text."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, Field

from hpt.backends.embeddings import cosine
from hpt.orchestrator.decompose.items import Item

# Deduplication thresholds on cosine similarity, from the paper's appendix A ("Question
# deduplication and augmentation"): within depth 1 or 2, >= 0.9 is a duplicate; across
# depths, a depth-2 question >= 0.9 similar to a depth-1 question is removed (it is really a
# depth-1 question) and a depth-1 question between 0.8 and 0.9 similar to a depth-2 question
# is removed (it is really a depth-2 one). The reference code (kaistAI/knowledge-reasoning)
# holds only inference and evaluation, so the paper is the only source.
SAME_DEPTH = 0.9
D2_LIKE_D1 = 0.9
D1_LIKE_D2 = (0.8, 0.9)

EXACT_NOTE = (
    "no --embedding-model: duplicates were found by exact text only (case, spacing and end "
    "punctuation ignored), not by embedding similarity as in the paper; near-duplicates that "
    "are worded differently were kept"
)


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold().rstrip("?.!").strip()


Similarity = Callable[[Sequence[Item], Sequence[Item]], NDArray[np.float64]]


def exact_similarity(a: Sequence[Item], b: Sequence[Item]) -> NDArray[np.float64]:
    """1 where two questions read the same once normalised, else 0."""
    codes: dict[str, int] = {}
    left = np.array([codes.setdefault(_normalise(i.text), len(codes)) for i in a], dtype=np.int64)
    right = np.array([codes.setdefault(_normalise(i.text), len(codes)) for i in b], dtype=np.int64)
    return np.equal.outer(left, right).astype(np.float64)


def vector_similarity(vectors: dict[str, NDArray[np.float32]]) -> Similarity:
    def similarity(a: Sequence[Item], b: Sequence[Item]) -> NDArray[np.float64]:
        if not a or not b:
            return np.zeros((len(a), len(b)))
        return cosine(np.vstack([vectors[i.id] for i in a]), np.vstack([vectors[i.id] for i in b]))

    return similarity


class Dedup(BaseModel):
    """What deduplication decided. ``removed``: item id -> reason; ``canonical``: each kept
    depth-1/2 item -> the item whose question it uses (itself when not a duplicate)."""

    removed: dict[str, str] = Field(default_factory=dict)
    canonical: dict[str, str] = Field(default_factory=dict)


def _leaders(items: Sequence[Item], sim: NDArray[np.float64], threshold: float) -> list[int]:
    """For each item, the index of its cluster's first item: an item joins the first earlier
    leader at least ``threshold`` similar, else leads its own cluster. Comparing with leaders
    only keeps a chain of near-duplicates from drifting to unrelated questions."""
    leaders: list[int] = []
    out: list[int] = []
    for i in range(len(items)):
        found = next((j for j in leaders if sim[i, j] >= threshold), None)
        if found is None:
            leaders.append(i)
            found = i
        out.append(found)
    return out


def deduplicate(d2: Sequence[Item], d1: Sequence[Item], similarity: Similarity) -> Dedup:
    """The paper's deduplication (appendix A), on the depth-2 and depth-1 questions as
    generated, each list in build order.

    Removals across depths come first, so that no removed question is the one others merge
    into (the paper lists the same-depth step first; the thresholds are its own):

    1. a depth-2 question at least ``D2_LIKE_D1`` similar to any depth-1 question is removed,
       with the depth-1 questions generated from it ("d2 like d1");
    2. depth-2 duplicates (``SAME_DEPTH``): within one depth-3 tree they are siblings, so all
       but the first are removed with their sub-questions ("duplicate"); in other trees they
       keep their node but use the first one's question (DepthQA shares questions between
       nodes: 1699 nodes, 1571 questions on the hub);
    3. a depth-1 question whose similarity to any depth-2 question left is in ``D1_LIKE_D2``
       is removed ("d1 like d2"). The paper's sentence says "to D1 questions", but it gives the
       reason "the D2 question is effectively at D1 level and vice versa", so depth 2 is meant;
    4. depth-1 duplicates (``SAME_DEPTH``) become one question. Within one tree they become one
       node whose successors are every depth-2 question that asked for them (the hub's
       1_d1_n2 -> 1_d2_n1, 1_d2_n2); across trees, nodes sharing the question. Duplicates
       under the same depth-2 question leave it one sub-question short, which augmentation
       fills (the paper's table 5).
    """
    result = Dedup()
    removed = result.removed
    if d2 and d1:
        cross = similarity(d2, d1)
        for i, item in enumerate(d2):
            if cross[i].max() >= D2_LIKE_D1:
                removed[item.id] = "d2 like d1"
    for item in d1:
        if item.parent in removed:
            removed[item.id] = "parent removed"

    kept2 = [i for i in d2 if i.id not in removed]
    leaders = _leaders(kept2, similarity(kept2, kept2), SAME_DEPTH)
    first_in_group: dict[tuple[int, str], str] = {}
    for item, lead in zip(kept2, leaders, strict=True):
        mine = first_in_group.setdefault((lead, item.group), item.id)
        if mine != item.id:
            removed[item.id] = "duplicate"
        else:
            result.canonical[item.id] = kept2[lead].id
    for item in d1:
        if item.id not in removed and item.parent in removed:
            removed[item.id] = "parent removed"

    kept2 = [i for i in d2 if i.id not in removed]
    kept1 = [i for i in d1 if i.id not in removed]
    if kept1 and kept2:
        low, high = D1_LIKE_D2
        cross = similarity(kept1, kept2)
        for i, item in enumerate(kept1):
            if ((cross[i] >= low) & (cross[i] < high)).any():
                removed[item.id] = "d1 like d2"
    kept1 = [i for i in kept1 if i.id not in removed]
    for item, lead in zip(
        kept1, _leaders(kept1, similarity(kept1, kept1), SAME_DEPTH), strict=True
    ):
        result.canonical[item.id] = kept1[lead].id
    return result
