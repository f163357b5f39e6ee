"""The cues every answer reader shares: statements ("the answer is"), retractions ("Wait,
...", "I made a mistake"), negations, and what makes a statement asked or supposed rather
than made.

Readers build their patterns from these pieces. Where one reader takes a cue more widely or
more narrowly than another (the verbs after "answer", the words after "let me"), the
difference is an argument at the reader's call, so it shows there instead of hiding in a
second copy of the pattern.
"""

from __future__ import annotations

import re

# Markdown emphasis, quotes and brackets that models wrap answers in.
WRAP = r"[\s\*_`\"'“”‘’\(\[\{]*"
CLOSE = r"[\s\*_`\"'”’\)\]\}]*"

# -- statements ---------------------------------------------------------------------------
# The verbs and signs by which a reply says what its answer is.
ANSWER_VERBS = ("is", "would be", "will be", "should be", "must be", ":", "=")
# Explicit answer marks: GSM8K's "#### 42" and LaTeX's "\boxed{42}".
HASHES = "####"
BOXED = r"\\boxed\{"


def answer_is(*more: str, nouns: str = "answer") -> str:
    """The cue "NOUN VERB": one of ``nouns`` (a regex alternation), emphasis, then one of
    ``ANSWER_VERBS`` or of ``more`` ("the answer is", "Answer:", "final answer ="). The noun
    must be followed by its verb or sign: "has to answer 30 questions" states nothing."""
    return rf"\b(?:{nouns})[\s*_]*(?:{'|'.join((*ANSWER_VERBS, *more))})"


# -- retractions --------------------------------------------------------------------------
MISTAKE = r"\bI made (?:a|an) (?:mistake|error)\b"
CORRECTION = r"\bcorrection\s*:"
# What every reader's "let me ..." takes as a second look.
AGAIN = "re-?calculate|re-?check|redo"


def opening(words: str, *, marked: bool = True) -> str:
    """A sentence (or the reply) opening with one of ``words`` ("Wait, ...", "Oops!");
    ``marked``: only with punctuation after the word ("Wait, " but not "Wait for it")."""
    return rf"(?:^|[.!?\n]\s*)(?:{words})\b" + (r"\s*[,.!:—-]" if marked else "")


def let_me(verbs: str) -> str:
    """ "let me recalculate", "let me redo", ... for ``verbs`` (a regex alternation)."""
    return rf"\blet me (?:{verbs})\b"


def that_is(judgements: str, *, curly: bool = True) -> str:
    """ "that's wrong", "that was incorrect" for ``judgements``; ``curly``: also "that’s"."""
    return rf"\bthat(?:'s|{'’s|' if curly else ''} is| was) (?:{judgements})\b"


# A model withdrawing what it said before: "Wait, ...", "I made a mistake", "Correction:".
RETRACTION = re.compile(
    "|".join(
        (
            opening("wait|oops"),
            MISTAKE,
            let_me(AGAIN + "|reconsider|correct (?:that|this|myself)"),
            CORRECTION,
        )
    ),
    re.IGNORECASE,
)


def last_retraction(text: str) -> int:
    """Where the last withdrawal (``RETRACTION``) ends, or -1."""
    return max((m.end() for m in RETRACTION.finditer(text)), default=-1)


# -- negations ----------------------------------------------------------------------------
CONTRACTED_NOT = "n't|n’t"  # "isn't", "doesn’t"
NOT = rf"(?:not|{CONTRACTED_NOT})"
# Words that negate what follows them ("not true", "never correct", "cannot be right").
NEGATING = "not|never|cannot"

# -- asked or supposed, not stated --------------------------------------------------------
# Where a sentence ends: "!", "?", a line break, or a full stop that is no decimal point.
SENTENCE_END = re.compile(r"[!?\n]|\.(?!\d)")
# A condition after a statement: "would be true if ...", "18, unless ...".
CONDITION_AFTER = re.compile(
    r"\s*,?\s*(?:if|unless|only if|provided|when|as long as)\b", re.IGNORECASE
)
_CONDITION_OPENS = re.compile(r"\b(?:if|whether|unless|suppose|supposing|assuming)\b", re.I)


def in_question(text: str, pos: int) -> bool:
    """Whether ``pos`` lies in a sentence that ends with a question mark."""
    end = SENTENCE_END.search(text, pos)
    return end is not None and end.group() == "?"


def conditional_before(text: str, pos: int) -> bool:
    """Whether the clause holding ``pos`` opens as a condition ("if ...", "whether ...")."""
    start = max(text.rfind(c, 0, pos) for c in ",;:.!?\n")
    return _CONDITION_OPENS.search(text[start + 1 : pos]) is not None
