"""``hpt decompose``'s settings: the command's options, the files it keeps in its output
folder, and the paper's limits on what is generated."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from hpt.backends import GenerationParams
from hpt.orchestrator.models import ModelSettings

PROMPTS = "depthqa_decompose"
STATE_FILE = "decompose_state.jsonl"
SUMMARY_FILE = "decompose_summary.json"
REPLIES_FILE = "decompose_replies.jsonl"
MAX_CHILDREN = 4  # "maximum of 4" sub-questions per question (tables 23-26, section 3.3)
JSON_ATTEMPTS = 3
# The paper's augmentation ran at temperature 0.7 (appendix A); the default here too.
DEFAULT_TEMPERATURE = 0.7

Note = Callable[[str], None]


class DecomposeSpec(ModelSettings):
    """``hpt decompose``: the model options are every model command's."""

    model: str
    embedding_model: str | None = None
    # The embedding model's endpoint, for an openai:MODEL spec (a tgi:URL names its own).
    embedding_base_url: str | None = None
    questions: Path
    out: Path
    limit: int | None = Field(None, ge=1)
    concurrency: int = Field(8, ge=1)
    params: GenerationParams = Field(
        default_factory=lambda: GenerationParams(temperature=DEFAULT_TEMPERATURE)
    )
    cache: bool = True
    resume: bool = False

    @field_validator("params", mode="before")
    @classmethod
    def _paper_temperature(cls, value: Any) -> Any:
        # A [run] params table or flags that set no temperature get the paper's.
        if isinstance(value, dict) and "temperature" not in value:
            return {**value, "temperature": DEFAULT_TEMPERATURE}
        return value

    def base_url_models(self) -> Sequence[str]:
        return [self.model]
