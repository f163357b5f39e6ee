"""Reading a completion the server cut off at the length limit.

Such a reply (finish reason "length"; Anthropic's "max_tokens") stops mid-thought: its last
characters may be the first digits of a number ("#### 1" of "#### 18") or half a sentence.
The answer readers read it only up to where it is whole, and read nothing from one cut off
while repeating itself.

Whole: the reply up to the end of its last finished line or sentence, that is, up to its last
line break, or its last ".", "!" or "?" followed by white space. What follows is dropped; a
reply without one reads as nothing.

A repeating loop: the whole part ends in one block of lines or sentences written again and
again, verbatim (white space aside): a single line or sentence at least ``LOOP_REPEATS`` (3)
times in a row, or a block of 2 to ``LOOP_BLOCK`` (12) of them at least twice. A model that
ran out of tokens that way was not going to conclude; whatever it repeats ("#### 7" line
after line) is not an answer, and whatever it said before the loop is not one either. Lines
that are alike but not equal ("Day 1: 7 hours", "Day 2: 7 hours") are a list, not a loop,
and so are two equal lines in a row; lines without a letter or digit ("}", "---") are passed
over.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from hpt.types import CUT_OFF

__all__ = ["CUT_OFF", "Whole", "noted", "whole_part"]

LOOP_REPEATS = 3
LOOP_BLOCK = 12
# The detail's kinds, which the trace viewer names ("(none: repeating loop)").
CUT = "cut off"
LOOP = "repeating loop"

# The end of a line, or of a sentence: ".", "!" or "?" (closing quotes, brackets and emphasis
# after it) before white space.
_END = re.compile(r"\n|[.!?]+[\"'”’)\]*_]*(?=\s)")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w")


class Whole(NamedTuple):
    # What the readers read: the whole part ("" when there is nothing whole, or a loop).
    text: str
    # What was done, for the check's detail ("cut off: ...", "repeating loop: ...").
    note: str


def whole_part(text: str) -> Whole:
    """What of a reply cut off at the length limit the readers read (see the module)."""
    ends = [m.end() for m in _END.finditer(text)]
    if not ends:
        return Whole("", f"{CUT}: at the length limit, before a whole line or sentence")
    whole = text[: ends[-1]]
    units = [
        u for a, b in zip([0, *ends], ends, strict=False)
        if _WORD.search(u := _SPACE.sub(" ", text[a:b]).strip())
    ]  # fmt: skip
    loop = _loop(units)
    if loop is not None:
        block, times = loop
        shown = block if len(block) <= 60 else block[:57] + "..."
        return Whole("", f'{LOOP}: cut off at the length limit repeating "{shown}" {times} times')
    dropped = len(text) - len(whole)
    if not dropped:
        return Whole(whole, f"{CUT}: at the length limit, after a whole line or sentence")
    return Whole(whole, f"{CUT}: at the length limit; its unfinished last {dropped} characters "
                        "were not read")  # fmt: skip


def noted(detail: str | None, note: str) -> str:
    """A check's detail with the cut-off note after it: the reader's own reason comes first,
    since it says why there is no answer where it can."""
    return note if detail is None else f"{detail}; {note}"


def _loop(units: list[str]) -> tuple[str, int] | None:
    """The block the units end by repeating, and how many times, if that is a loop."""
    for size in range(1, LOOP_BLOCK + 1):
        block = units[-size:]
        if len(block) < size:
            return None
        times = 1
        while units[-size * (times + 1) : len(units) - size * times] == block:
            times += 1
        if times >= (LOOP_REPEATS if size == 1 else 2):
            return " ".join(block), times
    return None
