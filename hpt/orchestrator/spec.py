"""A run's full description; saved as ``run.json`` so a run can be repeated."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from hpt.backends import GenerationParams, RetryPolicy
from hpt.graphs import DEFAULT_LADDER


class RunSpec(BaseModel):
    dataset: str
    model: str = "local"
    knowledge_model: str | None = None  # None: the evaluated model
    base_url: str | None = None
    strategies: list[str] = Field(default_factory=lambda: list(DEFAULT_LADDER))
    limit: int | None = Field(None, ge=1)
    seed: int = 0
    concurrency: int = Field(8, ge=1)
    requests_per_minute: int | None = Field(None, ge=1)
    params: GenerationParams = Field(default_factory=GenerationParams)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    data_dir: Path | None = None
    out: Path | None = None
