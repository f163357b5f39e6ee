"""A responder for the test server that plays a model which resolves a sample only from a
chosen ladder level on: it recognises the strategy from the prompt and knows the answers."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from hpt.graphs import DEFAULT_LADDER as LADDER

_LTM_OPENERS = ("Summarize the main points", "Analyze", "Elaborate", "Find the part", "Break the")
# Double-quoted in most templates; single-quoted in BoolQ's generated-knowledge prompt.
_QUESTION = re.compile(r"question: (?:\"([^\"]+)\"|'(.+?)' using)")
_PASSAGE = re.compile(r"passage: ?\"(.{60})", re.DOTALL)


def strategy_of(body: Mapping[str, Any]) -> str:
    messages = body["messages"]
    last = messages[-1]["content"]
    if last.startswith("Generate"):
        return "knowledge"
    if "using knowledge of" in last or "using an interpretation" in last:
        return "generated_knowledge"
    if len(messages) > 1 or last.startswith(_LTM_OPENERS):
        return "least_to_most"
    if "Let's think step by step" in last:
        return "zero_shot_cot"
    if last.count("Answer:") >= 3:
        return "three_shot_cot"
    return "role"


class KeyedResponder:
    """Answers correctly from ``resolve_from`` upwards, unparseably below it. ``answers`` maps
    "PASSAGE[:60]|QUESTION" and QUESTION (see ``boolq_answer_key``) to the gold answer."""

    def __init__(self, answers: Mapping[str, str], resolve_from: str | None) -> None:
        self.answers = dict(answers)
        self.first = LADDER.index(resolve_from) if resolve_from else len(LADDER)

    def __call__(self, body: dict[str, Any]) -> str:
        kind = strategy_of(body)
        if kind == "knowledge":
            return "Some background knowledge about the passage."
        last = body["messages"][-1]["content"]
        if kind == "least_to_most" and not last.startswith("Based on the passage, what is"):
            return "An intermediate step."
        # Some BoolQ questions repeat with other passages: the passage decides where shown.
        passages = _PASSAGE.findall(last)[-1:]
        questions = ["".join(groups) for groups in _QUESTION.findall(last)[-1:]]
        keys = [p + "|" + q for p in passages for q in questions] + questions
        gold = next((self.answers[k] for k in keys if k in self.answers), None)
        if gold is None or LADDER.index(kind) < self.first:
            return "I am not sure how to answer that."
        return f"The answer is {gold}."


def boolq_answer_key(samples: Iterable[Any]) -> dict[str, str]:
    """Keys for KeyedResponder from BoolQ samples (passages and questions both repeat)."""
    answers: dict[str, str] = {}
    for s in samples:
        passage, question = str(s.fields["passage"]), str(s.fields["question"])
        answers[passage[:60] + "|" + question] = s.target
        answers[question] = s.target
    return answers
