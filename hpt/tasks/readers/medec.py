"""Reading MEDEC's verdict: does the clinical note contain a medical error?"""

from __future__ import annotations

import re

from hpt.tasks.readers.cues import CONTRACTED_NOT, NEGATING

# Verdicts a completion states, as (pattern, verdict); the last one stated wins. HELM's own
# reading takes a reply starting with "CORRECT" as no error and one starting with a sentence
# ID as an error; this reads the same replies, and also says-so-in-words ones.
_MEDEC_VERDICTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?<![A-Za-z])CORRECT(?![A-Za-z])"), "CORRECT"),
    (re.compile(r"error[_ ]flag\W{0,4}0\b", re.I), "CORRECT"),
    (re.compile(r"error[_ ]flag\W{0,4}1\b", re.I), "ERROR"),
    (
        re.compile(
            r"\b(?:no|not any|without|free of)\s+(?:medical\s+|clinical\s+|factual\s+)?errors?\b"
            r"|\b(?:does not|doesn['’]t|did not|didn['’]t)\s+(?:contain|have|include)\s+"
            r"(?:an?|any)\s+"
            r"(?:medical\s+|clinical\s+)?error"
            r"|\b(?:text|note|narrative)\s+is\s+(?:medically\s+)?(?:correct|accurate|error-free)\b"
            r"|\b(?:don['’]t|do not)\s+(?:think|believe|see)\s+(?:that\s+)?there(?:\s+is|['’]s)\s+"
            r"(?:an?|any)\s+(?:medical\s+|clinical\s+)?error",
            re.I,
        ),
        "CORRECT",
    ),
    (
        re.compile(
            r"\b(?:contains?|has|have|there\s+is|there['’]s|includes?)\s+(?:an?|one)\s+"
            r"(?:\w+\s+)?(?:medical\s+|clinical\s+)?error\b"
            r"|\berror\s+(?:is\s+)?in\s+sentence\s+(?:id\s*)?\d+"
            r"|\bsentence\s+(?:id\s*)?\d+\s+(?:contains|has|is\s+(?:wrong|incorrect|erroneous))\b"
            # HELM's reply format: the sentence ID, a space, the corrected sentence.
            r"|^\s*\d+\s+[A-Za-z\"']",
            re.I | re.M,
        ),
        "ERROR",
    ),
]


def read_medec_verdict(text: str) -> str | None:
    """ "CORRECT" (the note has no error) or "ERROR" (it has one), as the completion's last
    verdict states it; None when it states none."""
    events: list[tuple[int, bool, str]] = []
    for pattern, verdict in _MEDEC_VERDICTS:
        for m in pattern.finditer(text):
            if verdict == "ERROR" and _NEGATED.search(text, max(0, m.start() - 30), m.start()):
                continue  # "does not contain an error", "I don't think there is an error"
            # At the same place, "no error" outranks the "error" inside it.
            events.append((m.end(), verdict == "CORRECT", verdict))
    return max(events)[2] if events else None


# A negation shortly before an error statement, in its own sentence. Beyond the other readers'
# negations it takes "no" and "without".
_NEGATED = re.compile(
    rf"(?:\b(?:{NEGATING}|no|without)\b|(?:{CONTRACTED_NOT})\b)(?:(?![.!?\n]).)*$", re.I
)
