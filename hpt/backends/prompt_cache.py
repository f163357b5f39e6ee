"""Where Anthropic's prompt-cache breakpoints go (``--prompt-cache auto``).

Anthropic caches a prompt prefix only where a request marks it with ``cache_control``
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching): at most four marks,
the prefix in the order tools, system, messages, and a marked prefix shorter than the
model's minimum is simply not cached (no error, no charge). A ``Message`` says how much of
its content every sample shares (``shared_prefix``, set where the prompt is rendered); a
mark goes at the end of such a shared part, and only while everything before it is shared
too: a prefix holding one sample's text would be written for that sample and read by none.
The marks split a text into blocks whose concatenation is the text itself: no prompt
changes, and the response cache key (from ``Message.content``) stays the same.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from hpt.types import Message

PromptCache = Literal["auto", "off"]
PROMPT_CACHE_PAGE = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"
MAX_BREAKPOINTS = 4
EPHEMERAL = {"type": "ephemeral"}
# Anthropic's system prompt is one text: hpt joins the system messages with this.
SYSTEM_JOIN = "\n\n"
# Claude's tokenizer is not published, and counting through the API (count_tokens) would
# cost a call per prompt: a prefix's length is estimated at four characters a token, the
# usual figure for English text. Claude's tokens average a little shorter (about 3.5
# characters), so the estimate errs low: a prefix just over the minimum may go unmarked,
# one well under it is never marked.
CHARS_PER_TOKEN = 4

# The minimum cacheable prompt length in tokens by model line and version (the prompt
# caching page, read 2026-11-24; it changes often). A version takes the entry of its line
# at or below it within its major version.
MIN_TOKENS: dict[str, dict[tuple[int, int], int]] = {
    "opus": {(3, 0): 1024, (4, 0): 1024, (4, 5): 4096, (4, 7): 2048, (4, 8): 1024,
             (5, 0): 512},
    "sonnet": {(3, 0): 1024, (4, 0): 1024, (5, 0): 1024, (5, 5): 512},
    "haiku": {(3, 0): 2048, (4, 5): 4096, (5, 5): 512},
    "fable": {(5, 0): 512},
    "mythos": {(5, 0): 512},
}  # fmt: skip
MYTHOS_PREVIEW_MIN = 2048
# A model hpt cannot place (a proxy's alias): the smallest documented minimum, as marking a
# prefix too short to cache costs nothing.
UNKNOWN_MIN = 512

# claude-opus-4-5, claude-sonnet-4-20250514 (a date is no minor version), anthropic.claude-...
_LINE_FIRST = re.compile(r"claude-(opus|sonnet|haiku|fable|mythos)-(\d+)(?:-(\d{1,2}))?(?!\d)")
# claude-3-7-sonnet-20250219, claude-3-opus-20240229
_VERSION_FIRST = re.compile(r"claude-(\d)(?:-(\d))?-(opus|sonnet|haiku)")


def min_cacheable_tokens(model: str) -> int:
    """The shortest prompt prefix ``model`` caches, in tokens."""
    if "claude-mythos-preview" in model:
        return MYTHOS_PREVIEW_MIN
    if m := _LINE_FIRST.search(model):
        line, version = m[1], (int(m[2]), int(m[3] or 0))
    elif m := _VERSION_FIRST.search(model):
        line, version = m[3], (int(m[1]), int(m[2] or 0))
    else:
        return UNKNOWN_MIN
    known = [v for v in MIN_TOKENS[line] if v[0] == version[0] and v <= version]
    return MIN_TOKENS[line][max(known)] if known else UNKNOWN_MIN


def breakpoints(messages: list[Message], model: str) -> set[int]:
    """The indexes of ``messages`` whose shared part ends with a breakpoint: the latest (at
    most four) whose prefix -- the system messages, then the others, in order -- every sample
    shares and is long enough for ``model`` to cache."""
    order = [i for i, m in enumerate(messages) if m.role == "system"]
    order += [i for i, m in enumerate(messages) if m.role != "system"]
    least = min_cacheable_tokens(model) * CHARS_PER_TOKEN
    chars, marked = 0, []
    for i in order:
        message = messages[i]
        shared = min(message.shared_prefix or 0, len(message.content))
        # Thinking blocks cannot be marked, and go before the turn's text.
        if shared == 0 or message.reasoning_blocks:
            break
        if chars + shared >= least:
            marked.append(i)
        if shared < len(message.content):
            break  # this sample's own text follows
        chars += shared + (len(SYSTEM_JOIN) if message.role == "system" else 0)
    return set(marked[-MAX_BREAKPOINTS:])


def text_blocks(text: str, cuts: list[int]) -> list[dict[str, Any]]:
    """``text`` as text blocks, each ending at one of ``cuts`` (increasing, inside the text)
    marked for caching, and the rest unmarked; the blocks' texts joined are ``text``."""
    blocks: list[dict[str, Any]] = []
    start = 0
    for cut in cuts:
        blocks.append({"type": "text", "text": text[start:cut], "cache_control": EPHEMERAL})
        start = cut
    if start < len(text):
        blocks.append({"type": "text", "text": text[start:]})
    return blocks


def system_blocks(messages: list[Message], marked: set[int]) -> list[dict[str, Any]] | None:
    """The system messages of ``messages`` joined as hpt sends them, split into blocks at the
    shared part of each whose index is in ``marked``; None: none is."""
    system = [(i, m) for i, m in enumerate(messages) if m.role == "system"]
    cuts, start = [], 0
    for i, message in system:
        if i in marked:
            cuts.append(start + min(message.shared_prefix or 0, len(message.content)))
        start += len(message.content) + len(SYSTEM_JOIN)
    if not cuts:
        return None
    return text_blocks(SYSTEM_JOIN.join(m.content for _, m in system), cuts)
