"""Reading the sub-question lists the model writes as JSON (prompt tables 23-26)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from hpt.orchestrator.decompose.sources import NonBlank


class _QuestionList(BaseModel):
    questions: list[NonBlank] = Field(min_length=1)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_questions(reply: str, keys: Sequence[str]) -> list[str] | str:
    """The question list of a reply such as ``{"Depth-2_questions": [...]}``, or what is wrong.

    The object may sit in a code fence or among prose. A Python-style literal with single
    quotes is read too: the prompts' own examples are written that way, and models copy them.
    """
    fenced = _FENCE.search(reply)
    text = fenced.group(1) if fenced else reply
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return "no JSON object in the reply"
    block = text[start : end + 1]
    try:
        data: Any = json.loads(block)
    except ValueError:
        try:
            data = ast.literal_eval(block)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return "the reply's object is not valid JSON"
    if not isinstance(data, dict):
        return "the reply's JSON is not an object"
    key = next((k for k in keys if k in data), None)
    if key is None:
        return f"the reply's object has no {' or '.join(map(repr, keys))} list"
    try:
        return _QuestionList.model_validate({"questions": data[key]}).questions
    except ValidationError as exc:
        return f"{key!r} is not a non-empty list of question strings ({exc.errors()[0]['msg']})"
