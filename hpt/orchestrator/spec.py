"""A run's full description; saved as ``run.json`` so a run can be repeated."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hpt.backends import GenerationParams, ModelConfig, RetryPolicy, parse_model_spec, spec_label
from hpt.graphs import DEFAULT_LADDER


class RunSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str
    model: str = "local"
    knowledge_model: str | None = None  # None: the evaluated model
    base_url: str | None = None  # the evaluated model's endpoint, for a PROVIDER:MODEL spec
    # Named models from a run config file; --model may name one. They hold no keys.
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    strategies: list[str] = Field(default_factory=lambda: list(DEFAULT_LADDER))
    # "adaptive": a prompt-selector picks each level (HPT appendix E); default the model.
    mode: Literal["standard", "adaptive"] = "standard"
    selector_model: str | None = None
    limit: int | None = Field(None, ge=1)
    seed: int = 0
    concurrency: int = Field(8, ge=1)
    # Per-backend overrides of the models' own limits and retry policy.
    max_concurrency: int | None = Field(None, ge=1)
    requests_per_minute: int | None = Field(None, ge=1)
    tokens_per_minute: int | None = Field(None, ge=1)
    retry: RetryPolicy | None = None
    params: GenerationParams = Field(default_factory=GenerationParams)
    # Translation/summarisation: the score (0-1) that resolves a sample; None: the dataset's
    # default (IWSLT 0.15 sentence BLEU, SAMSum 0.20 ROUGE-L F, as in the paper).
    threshold: float | None = Field(None, gt=0.0, le=1.0)
    # Independent climbs per sample; pass@k (k <= n) is reported for level 1 and for HPF.
    samples_per_task: int = Field(1, ge=1)
    cache: bool = True
    # Part of every cache key: a new epoch asks the models afresh.
    epoch: int = Field(0, ge=0)
    data_dir: Path | None = None
    out: Path | None = None

    def resolve_model(self, name: str, *, evaluated: bool) -> tuple[str, ModelConfig]:
        """The label and effective config of a model spec, with this run's overrides."""
        config = parse_model_spec(name, self.models)
        update: dict[str, object] = {}
        if self.max_concurrency is not None:
            update["max_concurrency"] = self.max_concurrency
        if self.requests_per_minute is not None:
            update["requests_per_minute"] = self.requests_per_minute
        if self.tokens_per_minute is not None:
            update["tokens_per_minute"] = self.tokens_per_minute
        if self.retry is not None:  # only the fields the run sets; the model keeps the rest
            update["retry"] = config.retry.model_copy(
                update=self.retry.model_dump(exclude_unset=True)
            )
        if evaluated and self.base_url and name not in self.models:
            update["endpoints"] = [self.base_url]
        config = config.model_copy(update=update)
        return spec_label(name, config), config
