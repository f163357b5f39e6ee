"""``decompose_summary.json``: what a build made, what deduplication removed, how the model's
replies read, what was called, and what failed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class Failure(BaseModel):
    item: str
    question: str
    step: str
    problem: str


class DedupSummary(BaseModel):
    method: Literal["embeddings", "exact-text"]
    embedding_model: str | None
    note: str | None
    thresholds: dict[str, float | list[float]]
    d2_removed_like_d1: int
    d2_duplicates_removed: int
    d2_shared_across_trees: int
    d1_removed_like_d2: int
    d1_removed_with_parent: int
    d1_merged_in_tree: int
    d1_shared_across_trees: int


class GenerationSummary(BaseModel):
    json_replies: int  # sub-question replies read, retries included
    json_retries: int
    json_failures: int
    cut_to_max: int  # lists longer than MAX_CHILDREN, cut to their first four


class CallSummary(BaseModel):
    model_requests: int  # sent to the model by this run
    cache_hits: int  # answered by the response cache
    steps_from_checkpoint: int
    embedding_requests: int
    texts_embedded: int
    embeddings_cached: int


class DecomposeSummary(BaseModel):
    questions: dict[str, int]  # depth -> count
    nodes: dict[str, int]
    edges: int
    shared_questions: int
    dedup: DedupSummary
    augmented: dict[str, int]
    generation: GenerationSummary
    calls: CallSummary
    failures: list[Failure]
    errors: list[str]
