"""A reasoning model's thinking kept apart from its answer.

Providers return thinking in three forms: a field of its own (vLLM's ``reasoning``, formerly
``reasoning_content``, which llama.cpp's server still uses), content blocks of their own
(Anthropic's ``thinking`` and ``redacted_thinking``) -- each transport reads those -- or inline,
as a ``<think>...</think>`` block at the start of the text, when the server has no reasoning
parser (TGI, a vLLM or llama.cpp server started without one). The inline form is read here,
for every model, after the transport and the response cache: a model's ``think_tags`` setting
changes how its cached completions read without asking again.

Inline rules: a completion that starts (after white space) with an opening tag thinks up to
the matching closing tag, and answers after it; with no closing tag -- cut off while thinking
-- it is all thinking and has no answer. A completion holding a closing tag but no opening
tag thought up to it: chat templates such as DeepSeek-R1's open the block in the prompt, so
the completion starts inside it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hpt.types import Completion

ThinkTags = Sequence[tuple[str, str]]
DEFAULT_THINK_TAGS: tuple[tuple[str, str], ...] = (("<think>", "</think>"),)


# The blank lines an answer starts with after its thinking; the first line's indentation is
# the answer's own (a code body that continues a prompt: HumanEval's).
_LEADING_BLANK_LINES = re.compile(r"(?:[ \t]*\r?\n)+")


def split_inline(text: str, tags: ThinkTags) -> tuple[str | None, str]:
    """``text``'s inline thinking (None if it has none) and its answer."""
    head = text.lstrip()
    for opening, closing in tags:
        if head.startswith(opening):
            body = head[len(opening) :]
            end = body.find(closing)
            if end < 0:
                return body.strip(), ""
            return body[:end].strip(), _answer(body[end + len(closing) :])
    for opening, closing in tags:
        end = text.find(closing)
        if end >= 0 and opening not in text[:end]:
            return text[:end].strip(), _answer(text[end + len(closing) :])
    return None, text


def _answer(rest: str) -> str:
    """What follows the thinking, without the blank lines it starts with (or the spaces before
    an answer on the closing tag's line), its first line's indentation kept."""
    start = _LEADING_BLANK_LINES.match(rest)
    if start is not None:
        return rest[start.end() :].rstrip()
    return rest.lstrip(" \t").rstrip()


def with_thinking_apart(completion: Completion, tags: ThinkTags) -> Completion:
    """``completion`` with any inline thinking moved from its text to its reasoning (after
    the reasoning its transport read, if any), without logprobs; the same object when there
    is none."""
    if not tags:
        return completion
    inline, answer = split_inline(completion.text, tags)
    if inline is None:
        return completion
    parts = [p for p in (completion.reasoning, inline) if p]
    # The tokens' log probabilities cover the thinking too, and which of them are the
    # answer's is not known: scored as the answer's (generated knowledge's choice, Min-K%),
    # they would score the thinking. None: every rule that uses them has a fallback.
    update = {"text": answer, "reasoning": "\n\n".join(parts), "logprobs": None}
    return completion.model_copy(update=update)
