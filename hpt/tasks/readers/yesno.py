"""Reading a True/False (yes/no) answer: ``parse_bool``; tests/test_readers.py holds the
table of completions that specifies it."""

from __future__ import annotations

import re
from collections.abc import Sequence

from hpt.tasks.readers.cues import (
    CLOSE,
    CONDITION_AFTER,
    CONTRACTED_NOT,
    NEGATING,
    WRAP,
    answer_is,
    conditional_before,
    in_question,
    last_retraction,
)
from hpt.tasks.readers.echo import strip_echo

_BOOL_WORDS = {"true": "True", "yes": "True", "false": "False", "untrue": "False", "no": "False"}
_FLIP = {"True": "False", "False": "True"}
# Naming the two choices ("True/False", "true or false") is not making one.
_BOOL_PAIR = re.compile(
    r"\b(?:true|yes)\s*(?:/|or)\s*(?:false|no)\b|\b(?:false|no)\s*(?:/|or)\s*(?:true|yes)\b", re.I
)
# "Yes"/"no" as a whole answer, not "no longer", "no doubt".
_YES_NO_END = (
    r"""\s*(?:[.,;:!?)\]"'”’*\n]|$)|\s+(?:because|since|as|based|according|given|for|and|but|"""
    r"""so|here)\b"""
)
_BOOL_STATED = re.compile(
    answer_is("-", nouns="answer|verdict|conclusion") + r"[\s*_:]*"
    r"(?:that\s+)?(?:it\s+is\s+)?"
    r"(?:(?:probably|likely|most likely|definitely|clearly|therefore|thus|indeed|simply)\s+)?"
    r"(?P<neg>not\s+)?" + WRAP + r"(?P<word>true|false|(?:yes|no)(?=" + _YES_NO_END + r"))\b",
    re.IGNORECASE,
)
# A leading truth word counts only as a whole answer: "No, it is not" but not "No doubt".
_BOOL_LEAD = re.compile(
    r"^" + WRAP + r"(true|false|yes|no)" + CLOSE + r"(?:[.,!:;\n]|$)", re.IGNORECASE
)
# "Yes, I'd be happy to answer": a courtesy, not a verdict.
_PLEASANTRY = re.compile(
    r"\s*[,!.]?\s*(?:I(?:'d|’d|\s+would|\s+will|'ll|’ll|\s+can|'m|’m|\s+am)\s+(?:be\s+)?"
    r"(?:happy|glad|answer|help|try|going\s+to)|here\b|sure\b|of\s+course\b|certainly\b)",
    re.IGNORECASE,
)
_BOOL_BARE = re.compile(r"\b(true|false|untrue)\b", re.IGNORECASE)
# "It is (not) correct", "this isn't correct", "the statement is incorrect".
_BOOL_CORRECT = re.compile(
    r"\b(?:it|this|that|statement|claim|assertion)(?:\s+(?:is|was)|'s|’s)\s+(?P<neg>not\s+)?"
    r"(?P<word>correct|incorrect)\b"
    r"|\b(?:it|this|that|statement|claim|assertion)\s+(?P<neg2>isn't|isn’t|wasn't|wasn’t)\s+"
    r"(?P<word2>correct|incorrect)\b",
    re.IGNORECASE,
)
# "So, no." / "Therefore, yes, ..." at the start of a sentence.
_BOOL_CONCLUDE = re.compile(
    r"(?:^|[.!\n]\s*)(?:so|therefore|thus|hence|in conclusion|in short|in summary|overall|"
    r"ultimately)\s*,?\s*(yes|no)\b(?=\s*(?:[,.!;:\n]|$))",
    re.IGNORECASE,
)
_NEGATED = re.compile(rf"(?:\b(?:{NEGATING})|{CONTRACTED_NOT})\s+(?:be\s+)?$", re.IGNORECASE)
# "The opposite is true": the claim is false.
_OPPOSITE = re.compile(r"\b(?:opposite|reverse|contrary)\s+(?:is|was|would be)\s+$", re.IGNORECASE)
# "not entirely true", "may be true", "might not be false": hedges, not verdicts.
_HEDGED = re.compile(
    rf"(?:(?:\bnot|{CONTRACTED_NOT})\s+(?:entirely|necessarily|completely|fully|totally|wholly|strictly|"
    r"quite|exactly|always|all|universally|generally)\s+"
    r"|\b(?:may|might|could)\s+(?:also\s+)?(?:not\s+)?(?:be\s+)?"
    r"|\b(?:partially|partly|somewhat|mostly|largely|half|sort of|kind of|technically|"
    r"arguably)\s+)$",
    re.IGNORECASE,
)


def _bool_asserted(text: str, start: int, end: int) -> bool:
    """Whether the truth word at ``start:end`` is asserted, not asked, hedged or supposed."""
    return not (
        CONDITION_AFTER.match(text, end)
        or in_question(text, start)
        or conditional_before(text, start)
    )


def parse_bool(text: str, echo: Sequence[str] = ()) -> str | None:
    """ "True"/"False", read in this order:

    1. a stated answer ("The answer is False", "Answer: yes", "The answer is not true"): the
       last one wins;
    2. a whole-answer truth word opening the completion ("No, it is not.", "True."), but
       not a courtesy ("Yes, I'd be happy to answer ...");
    3. otherwise every asserted truth ("it is not true that ...", "the statement is not false",
       "this is incorrect", "So, no.") must agree; "not"/"n't"/"never" before a truth word
       flips it, so "not false" is True.

    After a withdrawal ("Wait, ...", "I made a mistake", "let me reconsider") only what
    follows it counts. "The opposite is true" asserts False. A truth word does not count
    inside a question ("Is it true?"), after "if"/"whether" in its clause, when a condition
    follows ("would be true if ..."), when hedged ("not entirely true", "may be true",
    "partially true"), or in "True/False". Text copied from ``echo`` (the passage, the
    question) is not read. Nothing readable, or disagreement: None.
    """
    text = _BOOL_PAIR.sub(" ", strip_echo(text, echo))
    stated = [
        (m.end(), _FLIP[v] if m.group("neg") else v)
        for m in _BOOL_STATED.finditer(text)
        if _bool_asserted(text, m.start("word"), m.end("word"))
        and not _PLEASANTRY.match(text, m.end())
        for v in [_BOOL_WORDS[m.group("word").lower()]]
    ]
    withdrawn = last_retraction(text)
    if stated and stated[-1][0] > withdrawn:
        return stated[-1][1]
    if withdrawn >= 0:  # what the model said before withdrawing it does not count
        return _bool_assertions(text[withdrawn:])
    lead = _BOOL_LEAD.match(text.lstrip(" \n\t.,;:!?-"))
    if lead and not _PLEASANTRY.match(text.lstrip(" \n\t.,;:!?-"), lead.end()):
        return _BOOL_WORDS[lead.group(1).lower()]
    return _bool_assertions(text)


def _bool_assertions(text: str) -> str | None:
    """The one truth every assertion in ``text`` agrees on, else None."""
    found: set[str] = set()
    for m in _BOOL_BARE.finditer(text):
        # What stands just before the word, its quotes and emphasis reduced to a space.
        before = re.sub(r"[\s\*_`\"'“”‘’]+$", " ", text[max(0, m.start() - 60) : m.start()])
        if _HEDGED.search(before) or not _bool_asserted(text, m.start(), m.end()):
            continue
        value = _BOOL_WORDS[m.group(1).lower()]
        flips = bool(_NEGATED.search(before)) != bool(_OPPOSITE.search(before))
        found.add(_FLIP[value] if flips else value)
    for m in _BOOL_CORRECT.finditer(text):
        if _bool_asserted(text, m.start(), m.end()):
            value = (
                "True" if (m.group("word") or m.group("word2")).lower() == "correct" else "False"
            )
            found.add(_FLIP[value] if m.group("neg") or m.group("neg2") else value)
    for m in _BOOL_CONCLUDE.finditer(text):
        if _bool_asserted(text, m.start(1), m.end(1)):
            found.add(_BOOL_WORDS[m.group(1).lower()])
    return found.pop() if len(found) == 1 else None
