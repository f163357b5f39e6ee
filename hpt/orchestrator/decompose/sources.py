"""The depth-3 questions ``hpt decompose`` starts from: one row each, read from a JSONL file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from hpt.errors import validation_message
from hpt.tasks import DatasetError

NonBlank = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class SourceQuestion(BaseModel):
    """A depth-3 input row. chapter, key_points and explanation are TutorEval's context for
    table 20; rows without them get the plain variant."""

    model_config = ConfigDict(extra="ignore")

    qid: NonBlank
    question: NonBlank
    answer: str | None = None
    domain: str | None = None
    chapter: str | None = None
    key_points: str | list[str] | None = None
    explanation: str | None = None


def load_depth3(path: Path, limit: int | None = None) -> list[tuple[int, SourceQuestion]]:
    """(position, row) for the depth-3 rows of a JSONL file, position counting from 1 in the
    file's depth-3 rows, so ``limit`` only shortens the list and never renumbers it.

    When any row has a ``depth`` field only rows with depth 3 are taken (the hub's
    questions.jsonl holds all three depths); a file without depth fields is taken whole.
    """
    from hpt.tasks.sources import read_jsonl

    if not path.is_file():
        raise DatasetError(f"{path}: no such file; --questions takes a JSONL of questions")
    rows = list(read_jsonl(path))
    has_depth = any("depth" in row for _, row in rows)
    chosen: list[tuple[int, SourceQuestion]] = []
    seen: dict[str, int] = {}
    for lineno, row in rows:
        if has_depth and row.get("depth") != 3:
            continue
        try:
            source = SourceQuestion.model_validate(row)
        except ValidationError as exc:
            raise DatasetError(validation_message(exc, f"{path}:{lineno}", whole="row")) from None
        if source.qid in seen:
            raise DatasetError(
                f"{path}:{lineno}: duplicate qid {source.qid!r} (first on line {seen[source.qid]})"
            )
        seen[source.qid] = lineno
        chosen.append((len(chosen) + 1, source))
    if not chosen:
        which = "depth-3 rows (depth = 3)" if has_depth else "rows"
        raise DatasetError(f"{path}: no {which} to decompose")
    return chosen[:limit] if limit else chosen
