"""Reading the DepthQA judge's reply (paper table 30): "Feedback: ... [RESULT] n".

Only parsing lives here; the judge prompt is a prompt file. The reference code
(kaistAI/knowledge-reasoning, src/evaluation/output_parser.py) takes the *first* of many
labels ("Score", "Feedback:", "[RESULT]", ...), so "Feedback: 1. The response ..." reads as
1 and a rubric line the judge echoes ("Score 5: ...") beats the real "[RESULT] 2", and
it never checks the 1-5 range. Here only "[RESULT]" counts, the last one wins, and a score
outside 1-5 or no "[RESULT] n" at all is recorded as missing (None), never as 0.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

# "[RESULT] 3", "[RESULT]: 3", "[RESULT] (3)", "[RESULT] **3**", "[RESULT ] 3" (the paper's
# own spelling), "**[RESULT]** 3", "[RESULT] Score: 3". The sign and a decimal part are
# captured so that "-1" or "4.5" are rejected rather than misread as 1 or 4.
_RESULT = re.compile(
    r"""
    \[\s*RESULT\s*\]
    [\s*:]*                     # closing bold, a colon, spaces
    (?:score\s*:?\s*)?          # "[RESULT] Score: 3"
    [(\[]?\s*(?:\*\*)?\s*       # "(3)", "[3]", "**3**"
    (?P<score>[-+]?\d+(?:\.\d+)?)
    """,
    re.IGNORECASE | re.VERBOSE,
)
# "Feedback:", "**Feedback:**", "**Feedback**:", "### Feedback:" at the start of the reply
_FEEDBACK_LABEL = re.compile(
    r"^\s*(?:\*\*|\#+\s*)?feedback\s*(?:\*\*)?\s*:\s*(?:\*\*)?\s*", re.IGNORECASE
)

MIN_SCORE = 1
MAX_SCORE = 5


class JudgeVerdict(BaseModel):
    """One judgement: the 1-5 score, or None when the reply holds no valid score."""

    score: int | None = Field(ge=MIN_SCORE, le=MAX_SCORE)
    feedback: str


def parse_judgement(reply: str) -> JudgeVerdict:
    """The score of the last "[RESULT] n" in ``reply`` and the feedback written before it.

    The last one wins because a judge that restates the output format or corrects itself
    puts its final answer last. If that last score is not an integer in 1-5 the verdict has
    no score: an earlier "[RESULT]" is not used instead, since the judge's final word was
    invalid, not absent.
    """
    matches = list(_RESULT.finditer(reply))
    if not matches:
        return JudgeVerdict(score=None, feedback=_feedback(reply))
    last = matches[-1]
    return JudgeVerdict(
        score=_score(last.group("score")), feedback=_feedback(reply[: last.start()])
    )


def _score(text: str) -> int | None:
    value = float(text)
    if not value.is_integer() or not MIN_SCORE <= value <= MAX_SCORE:
        return None
    return int(value)


def _feedback(text: str) -> str:
    return _FEEDBACK_LABEL.sub("", text, count=1).strip()
