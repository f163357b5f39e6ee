"""The messages each step sends the model, from the prompt file ``depthqa_decompose``
(DepthQA appendix J.1, tables 20-26)."""

from __future__ import annotations

from hpt.backends import Message
from hpt.orchestrator.decompose.sources import SourceQuestion
from hpt.prompts import PromptSet


def _messages(system: str, user: str) -> list[Message]:
    return [Message(role="system", content=system), Message(role="user", content=user)]


def d3_answer_messages(prompts: PromptSet, source: SourceQuestion) -> list[Message]:
    """Table 20 for a row with TutorEval's chapter, key points and explanation; its plain
    variant (the prompt file's adaptation) for a row without them."""
    p = prompts
    if source.chapter and source.key_points and source.explanation:
        points = source.key_points
        if isinstance(points, list):
            points = "\n".join(f"- {k}" for k in points)
        fields = {
            "chapter": source.chapter,
            "question": source.question,
            "key_points": points,
            "explanation": source.explanation,
        }
        return _messages(
            p.text("d3_answer", "system"),
            p.render("d3_answer", p.text("d3_answer", "user"), fields),
        )
    return _messages(
        p.text("d3_answer", "system_plain"),
        p.render("d3_answer", p.text("d3_answer", "user_plain"), {"question": source.question}),
    )


def answer_messages(prompts: PromptSet, question: str) -> list[Message]:
    """Table 21: the reference answer of a generated (depth-2 or depth-1) question."""
    p = prompts
    return _messages(
        p.text("answer", "system"),
        p.render("answer", p.text("answer", "user"), {"question": question}),
    )


def generate_messages(prompts: PromptSet, section: str, fields: dict[str, str]) -> list[Message]:
    """Tables 22-26: the shared system prompt and the section's request for sub-questions."""
    p = prompts
    return _messages(
        p.text("generate", "system"), p.render(section, p.text(section, "user"), fields)
    )
