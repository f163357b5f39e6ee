"""Reading answers out of free-form completions.

Each reader returns None when the completion states no answer it can read, or states answers
that contradict each other; the caller must treat that as unresolved, never as a default.
The readers are deliberately small and explicit: tests/test_readers.py holds the table of
completions that specifies them.

Echoes. Models repeat their prompt ('Based on the question: "..."'), and what they merely
copy is not their answer. Every reader takes ``echo``, the sample's own texts (its question,
and for BoolQ its passage), and first blanks each run of at least ``ECHO_WORDS`` (6)
consecutive words that also occurs, consecutively, in one of them. Words are compared
lower-cased, ignoring punctuation and whitespace; a blanked run becomes the word "(echo)". Six
words is longer than the phrases a model naturally shares with a question ("how many apples
does she have") and shorter than any sentence it echoes.

Why nothing was read, where a reader can say (``read_choice``: a label written with another
option's text, a reply that only lists the options), is a detail beginning with its kind
("conflict: ...", "options listed: ..."); the trace viewer names those kinds. A reply cut off
at the length limit is cut to its whole part before any reader sees it (hpt.tasks.cutoff).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import NamedTuple

# Markdown emphasis, quotes and brackets that models wrap answers in.
_WRAP = r"[\s\*_`\"'“”‘’\(\[\{]*"
_CLOSE = r"[\s\*_`\"'”’\)\]\}]*"

# -- echoes -------------------------------------------------------------------------------
ECHO_WORDS = 6
# What a blanked echo becomes: a neutral word, so that a label whose text was an echo ("A.
# <copied scenario>") does not then stand alone as if it were chosen.
ECHOED = " (echo) "
_WORD = re.compile(r"[A-Za-z0-9]+(?:[.,'’][A-Za-z0-9]+)*")


def _words(text: str) -> list[re.Match[str]]:
    return list(_WORD.finditer(text))


def _runs(words: Sequence[str]) -> Iterable[tuple[str, ...]]:
    """Every run of ECHO_WORDS consecutive words, in order."""
    return zip(*(words[i:] for i in range(ECHO_WORDS)), strict=False)  # the shortest ends it


# A climb's levels check one after another, and about as many samples as --concurrency are
# climbing at once: 256 sources keep every climb's passage without holding a whole run's
# (a long note's word runs take ~100 KB).
@lru_cache(maxsize=256)
def _grams(source: str) -> frozenset[tuple[str, ...]]:
    """A source's runs of ECHO_WORDS words, once per source: every level of a climb strips
    the same passage or note from its completion."""
    return frozenset(_runs([w.lower() for w in _WORD.findall(source)]))


def strip_echo(text: str, sources: Iterable[str]) -> str:
    """``text`` with every run of >= ECHO_WORDS words copied from ``sources`` replaced by
    ``ECHOED`` (see the module docstring)."""
    n = ECHO_WORDS
    words = _words(text)
    if len(words) < n:
        return text
    grams = [g for g in map(_grams, sources) if g]
    if not grams:
        return text
    covered = [False] * len(words)
    for i, gram in enumerate(_runs([m.group().lower() for m in words])):
        if any(gram in g for g in grams):
            covered[i : i + n] = [True] * n
    out, pos, i = [], 0, 0
    while i < len(words):
        if not covered[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(words) and covered[j + 1]:
            j += 1
        out += [text[pos : words[i].start()], ECHOED]
        pos, i = words[j].end(), j + 1
    out.append(text[pos:])
    return "".join(out)


# A model withdrawing what it said before: "Wait, ...", "I made a mistake", "Correction:".
_RETRACTION = re.compile(
    r"(?:^|[.!?\n]\s*)(?:wait|oops)\b\s*[,.!:—-]"
    r"|\bI made (?:a|an) (?:mistake|error)\b"
    r"|\blet me (?:re-?calculate|re-?check|redo|reconsider|correct (?:that|this|myself))\b"
    r"|\bcorrection\s*:",
    re.IGNORECASE,
)


def _last_retraction(text: str) -> int:
    """Where the last withdrawal ends, or -1."""
    return max((m.end() for m in _RETRACTION.finditer(text)), default=-1)


def _in_question(text: str, pos: int) -> bool:
    """Whether ``pos`` lies in a sentence that ends with a question mark."""
    end = re.compile(r"[!?\n]|\.(?!\d)").search(text, pos)
    return end is not None and end.group() == "?"


def _conditional_before(text: str, pos: int) -> bool:
    """Whether the clause holding ``pos`` opens as a condition ("if ...", "whether ...")."""
    start = max(text.rfind(c, 0, pos) for c in ",;:.!?\n")
    clause = text[start + 1 : pos]
    return (
        re.search(r"\b(?:if|whether|unless|suppose|supposing|assuming)\b", clause, re.I) is not None
    )


# -- True/False ---------------------------------------------------------------------------
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
    r"\b(?:answer|verdict|conclusion)[\s*_]*(?:is|would be|will be|should be|must be|:|=|-)[\s*_:]*"
    r"(?:that\s+)?(?:it\s+is\s+)?"
    r"(?:(?:probably|likely|most likely|definitely|clearly|therefore|thus|indeed|simply)\s+)?"
    r"(?P<neg>not\s+)?" + _WRAP + r"(?P<word>true|false|(?:yes|no)(?=" + _YES_NO_END + r"))\b",
    re.IGNORECASE,
)
# A leading truth word counts only as a whole answer: "No, it is not" but not "No doubt".
_BOOL_LEAD = re.compile(
    r"^" + _WRAP + r"(true|false|yes|no)" + _CLOSE + r"(?:[.,!:;\n]|$)", re.IGNORECASE
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
_NEGATED = re.compile(r"(?:\b(?:not|never|cannot)|n't|n’t)\s+(?:be\s+)?$", re.IGNORECASE)
# "The opposite is true": the claim is false.
_OPPOSITE = re.compile(r"\b(?:opposite|reverse|contrary)\s+(?:is|was|would be)\s+$", re.IGNORECASE)
# "not entirely true", "may be true", "might not be false": hedges, not verdicts.
_HEDGED = re.compile(
    r"(?:\b(?:not|n't|n’t)\s+(?:entirely|necessarily|completely|fully|totally|wholly|strictly|"
    r"quite|exactly|always|all|universally|generally)\s+"
    r"|\b(?:may|might|could)\s+(?:also\s+)?(?:not\s+)?(?:be\s+)?"
    r"|\b(?:partially|partly|somewhat|mostly|largely|half|sort of|kind of|technically|"
    r"arguably)\s+)$",
    re.IGNORECASE,
)
_CONDITION_AFTER = re.compile(
    r"\s*,?\s*(?:if|unless|only if|provided|when|as long as)\b", re.IGNORECASE
)


def _bool_asserted(text: str, start: int, end: int) -> bool:
    """Whether the truth word at ``start:end`` is asserted, not asked, hedged or supposed."""
    return not (
        _CONDITION_AFTER.match(text, end)
        or _in_question(text, start)
        or _conditional_before(text, start)
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
    "partially true"), or in "True/False". Nothing readable, or disagreement: None.
    """
    text = _BOOL_PAIR.sub(" ", strip_echo(text, echo))
    stated = [
        (m.end(), _FLIP[v] if m.group("neg") else v)
        for m in _BOOL_STATED.finditer(text)
        if _bool_asserted(text, m.start("word"), m.end("word"))
        and not _PLEASANTRY.match(text, m.end())
        for v in [_BOOL_WORDS[m.group("word").lower()]]
    ]
    withdrawn = _last_retraction(text)
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


# -- numbers ------------------------------------------------------------------------------
# A minus sign counts only when attached: "-3", but "5 - 3" is a subtraction.
_NUMBER = r"(?:(?<![\w)\]])-)?(?:\$\s?)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_NUM = re.compile(_NUMBER)
_OP = r"(?:[-+*/×÷^]|x(?=\s*\$?\d))"
# A number, or an arithmetic chain "40 - 2 = 38", where a stated answer begins.
_CHAIN = re.compile(
    _WRAP
    + r"(?:[a-zA-Z]\s*=\s*)?(?P<chain>"
    + _NUMBER
    + r"%?(?:\s*(?:"
    + _OP
    + r"|=)\s*\(?"
    + _NUMBER
    + r"%?\)?)*)"
)
# Where a stated answer's value begins. "answer" is the noun only: it must be followed by
# "is", ":" or "=" ("the answer is", "Answer:", "final answer =", "the answer would be"),
# never the verb ("has to answer 30 questions", "I would answer 12").
_NUM_CUE = re.compile(
    r"(?:####"
    r"|\\boxed\{"
    r"|\banswer[\s*_]*(?:is|was|would be|will be|should be|must be|remains|:|=)"
    r"|\b(?:correct|final|right|actual)\s+(?:total|amount|result|number|value|count|sum|cost|"
    r"price|figure)[\s*_]*(?:is|was|would be|will be|should be|:|=))"
    r"[\s*_:]*(?:(?:approximately|about|roughly|exactly|therefore|thus|simply|just|then)\s+)*",
    re.IGNORECASE,
)
# ... or a calculation: "That's wrong" (which in a multiple-choice analysis discards an option).
_RETRACTION_NUM = re.compile(
    _RETRACTION.pattern + r"|\bthat(?:'s|’s| is| was) (?:wrong|incorrect|not right)\b", re.I
)
_UNKNOWN = "xyznXYZN"
_SEGMENT_END = re.compile(
    r"\n|;|,(?!\d{3})|:(?!\d)|[.!?](?!\d)"
    r"|\b(?:so|then|thus|therefore|hence|and|which means|giving)\b",
    re.IGNORECASE,
)


# A step's answer, not the answer: "Sub-answer: 9", "Subproblem 1: ... Answer: 9".
_SUB_ANSWER = re.compile(r"(?:\bsub-|\b(?:partial|intermediate)\s+)$", re.I)
_SUB_LINE = re.compile(r"\b(?:sub-?(?:problem|question|task|step)|step|part)\s*\d+\b", re.I)
_QUALIFIED = re.compile(r"\b(?:the|final|correct|my|our|right)\s+$", re.I)


def normalize_number(raw: str) -> str | None:
    """ "$1,200.00" -> "1200"; "-0.50" -> "-0.5"; None if it is not a number."""
    cleaned = raw.replace("$", "").replace(",", "").replace(" ", "").rstrip("%")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    if value == value.to_integral_value():
        return str(value.quantize(Decimal(1)))
    return format(value.normalize(), "f")


def _has_unknown(side: str) -> bool:
    """Whether an equation's side holds an unknown: x, y, z or n standing alone or after a
    coefficient ("5x"), never the multiplication sign between numbers ("3 x 4")."""
    return re.search(rf"(?<![A-Za-z])[{_UNKNOWN}](?![A-Za-z])", side) is not None


def _unsolved(segment: str) -> bool:
    """An equation with an unknown that is not solved for it ("5x + 8 = 4", but not "x = 4")."""
    s = re.sub(r"(?<=\d)\s*[x×]\s*(?=\$?\d)", " * ", segment)
    if "=" not in s:
        return False
    sides = s.split("=")
    with_unknown = [i for i, side in enumerate(sides) if _has_unknown(side)]
    if not with_unknown:
        return False
    only = with_unknown[0]
    solved = (
        len(with_unknown) == 1
        and only in (0, len(sides) - 1)
        and re.fullmatch(rf"\s*[{_UNKNOWN}]\s*", sides[only]) is not None
    )
    return not solved


def _stated_numbers(text: str) -> list[tuple[int, str | None]]:
    """Every stated answer as (where it ends, its value). A stated arithmetic chain is read
    at its last "=" ("40 - 2 = 38" is 38); an unevaluated one ("40 - 2") or one that ends in
    an unknown ("3x") has no value (None). Answers supposed ("would be 18 if ...") or asked
    ("is the answer 18?") are not stated, nor a step's ("Sub-answer: 9", or a bare "Answer: 9"
    on a line labelled "Subproblem 1", "Step 2" or "Part 3")."""
    found = []
    for cue in _NUM_CUE.finditer(text):
        m = _CHAIN.match(text, cue.end())
        if not m:
            continue
        if (
            _CONDITION_AFTER.match(text, m.end())
            or _conditional_before(text, cue.start())
            or _in_question(text, cue.start())
        ):
            continue  # "the answer would be 18 if ...", "if the answer is 18, ...": supposed
        line = text[text.rfind("\n", 0, cue.start()) + 1 : cue.start()]
        if _SUB_ANSWER.search(line) or (
            _SUB_LINE.search(line)
            and not _QUALIFIED.search(line)
            and cue.group().lower().startswith("answer")
        ):
            continue  # "Sub-answer: 9", "Subproblem 1 ... Answer: 9": a step, not the answer
        last = m.group("chain").split("=")[-1]
        numbers = _NUM.findall(last)
        glued = re.match(r"[A-Za-z](?![A-Za-z])|[:/]\d", text[m.end() :])
        value = normalize_number(numbers[0]) if len(numbers) == 1 and not glued else None
        found.append((m.end(), value))
    return found


# Numbers that are no result of the working: list numbering ("7. Therefore, ...") and step
# labels ("Step 3"); ratios and clock times ("10:5", "7:30"); the operands of "divided by" or
# "multiplied by" ("we divide the total by 4", "divides 24 by 4"); and asides, bracketed prose
# ("(which was still 4)") but not bracketed arithmetic ("(16 - 3 - 4)"), LaTeX's "\( 18 \)"
# or a restatement of what precedes it ("(which is $18)", "(= 18)", "(i.e. 18)").
_STRAY = re.compile(
    r"^[ \t>#*_-]*\d{1,3}[.)][*_]*[ \t]+(?=\S)"
    r"|\b(?:sub-?(?:problem|question|task|step)|step|part)\s*\d+\b"
    r"|\d+(?::\d+)+"
    r"|\b(?:divid|multipl)\w*\b[^\n.;!?]{0,40}?\bby\s+\$?\d[\d,]*(?:\.\d+)?"
    r"|(?<!\\)\((?!\s*(?:=|which\s+(?:is|equals)|that\s+is|i\.e\.,?)\s*\$?\d)"
    r"[^()\n]*[A-Za-z]{2}[^()\n]*\)",
    re.IGNORECASE | re.MULTILINE,
)
_OPERAND_BEFORE = re.compile(r"(?:[-+*/×÷^]|\bx)\s*\(?$")
_OPERAND_AFTER = re.compile(
    r"\s*\)?\s*(?:[-+*/×÷^]|x(?=\s*\$?\d)|(?:divided|multiplied)\s+by\b|times(?=\s*\$?\d))",
    re.IGNORECASE,
)
# "The total hours slept by Sadie is 30.8, which means ... she lost 6.5 hours": a total stated,
# in its unit at most ("hours", never a rate: "per", "each", "a day"; nor an operand: "plus"),
# then a clause that only comments on it. Read when the question asks for a total.
_TOTAL = re.compile(
    r"\btotal\b[^.!?\n=]{0,80}?\b(?:is|was|are|were|will be|would be|comes to|equals)\s+"
    r"(?:(?:approximately|about|roughly|exactly|then|now)\s+)?"
    + _WRAP
    + r"(?P<n>"
    + _NUMBER
    + r")(?:\s+(?!(?:per|each|every|a|an|plus|minus|times)\b)[A-Za-z]+){0,3}"
    + _CLOSE
    + r",\s*(?:(?:which|this|that)\s+(?:means|meant|implies|shows|indicates|suggests)|meaning)\b",
    re.IGNORECASE,
)
# What makes the clause after a total a result rather than a comment: "so", "gives", "=", ...
_CONCLUDES = re.compile(
    r"=|\b(?:so|therefore|thus|hence|gives?|gave|makes?|made|equals?|comes?\s+to|results?\s+in|"
    r"total|altogether|in\s+all)\b",
    re.IGNORECASE,
)
_ASKS_TOTAL = re.compile(r"\b(?:total|altogether|in all|combined)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[!?\n]|\.(?!\d)")
_ASKING = re.compile(r"[^.!?\n]*(?:\.\d[^.!?\n]*)*\?")


def asks_for_total(question: str) -> bool:
    """Whether the question asks for a total ("how many ... in total", "altogether"): in the
    sentence that asks (one ending "?", else the last), not in what it tells ("items with a
    total cost of $20 ... How much change?")."""
    asking = [m.group() for m in _ASKING.finditer(question)]
    if not asking:
        ends = [m.end() for m in _SENTENCE_END.finditer(question.rstrip(" .\n"))]
        asking = [question[max(ends, default=0) :]]
    return any(_ASKS_TOTAL.search(s) for s in asking)


def _last_number(text: str, totals: bool = False) -> str | None:
    """The fallback reading: the completion's last number that is a result (not a stray:
    see ``_STRAY``), unless it is an operand of an unevaluated expression ("the profit is
    200,000 - 130,000", "24 divided by 4") or sits in an unsolved equation ("5x = 4"). With
    ``totals`` (the question asks for one), a total stated earlier in the same sentence and
    followed by a clause that only comments on it ("the total ... is 30.8, which means she
    lost 6.5 hours") is read instead (``_stated_total``)."""
    strays = [m.span() for m in _STRAY.finditer(text)]
    numbers = [m for m in _NUM.finditer(text) if not any(a <= m.start() < b for a, b in strays)]
    if not numbers:
        return None
    last = numbers[-1]
    if totals:
        total = _stated_total(text, last, strays)
        if total is not None:
            return total
    if _OPERAND_BEFORE.search(text, 0, last.start()) or _OPERAND_AFTER.match(text, last.end()):
        return None
    starts = [m.end() for m in _SEGMENT_END.finditer(text, 0, last.start())]
    end = _SEGMENT_END.search(text, last.end())
    segment = text[(starts[-1] if starts else 0) : (end.start() if end else len(text))]
    return None if _unsolved(segment) else normalize_number(last.group())


def _stated_total(text: str, last: re.Match[str], strays: list[tuple[int, int]]) -> str | None:
    """The total stated in ``last``'s sentence before it ("... is 30.8, which means ..."),
    when the clause between them only comments (no "so", "gives", "makes", "=", ...)."""
    sentence = max((m.end() for m in _SENTENCE_END.finditer(text, 0, last.start())), default=0)
    totals = [
        m
        for m in _TOTAL.finditer(text, sentence, last.start())
        if not any(a <= m.start("n") < b for a, b in strays)
    ]
    if not totals or _CONCLUDES.search(text, totals[-1].end(), last.start()):
        return None
    return normalize_number(totals[-1].group("n"))


# GSM8K reads each completion twice in a row (its reading, then the strict one): one pass.
@lru_cache(maxsize=64)
def _number_readings(
    text: str, echo: tuple[str, ...], totals: bool
) -> tuple[str | None, str | None]:
    text = strip_echo(text, echo)
    stated = _stated_numbers(text)
    retractions = [m.end() for m in _RETRACTION_NUM.finditer(text)]
    if stated and not (retractions and retractions[-1] > stated[-1][0]):
        return stated[-1][1], stated[-1][1]
    if stated:  # the last stated answer was withdrawn: read what follows the withdrawal
        return _last_number(text[retractions[-1] :], totals), None
    alone = re.fullmatch(_WRAP + "(" + _NUMBER + ")" + _CLOSE + r"\.?\s*", text)
    strict = normalize_number(alone.group(1)) if alone else None
    return _last_number(text, totals), strict


def parse_number(text: str, echo: Sequence[str] = (), totals: bool = False) -> str | None:
    """The numeric answer, read flexibly (GSM8K's primary reading):

    1. the last stated answer in any form: "#### 42", "\\boxed{42}", "the answer is 42",
       "Answer: 42", "final answer = 42", "the correct total is 42"; "answer is 40 - 2 = 38"
       is 38, an unevaluated "answer is 40 - 2" is None;
    2. if the model withdrew its last stated answer afterwards ("Wait, ...", "I made a
       mistake"), the last result after the withdrawal (as in 3);
    3. with no stated answer, the fallback: the last number that is a result of the working
       ("So she has 18 apples left." is 18). List numbering and step labels ("7. Therefore",
       "Step 3"), ratios and clock times ("10:5"), the operands of "divided/multiplied by"
       ("by 4") and numbers in bracketed asides ("(which was still 4)") are not results and
       are passed over. The last result is None when it is an operand of an unevaluated
       expression ("200,000 - 130,000") or sits in an equation with an unsolved unknown
       ("5x = 4"). With ``totals`` (the question asks for a total: ``asks_for_total``), a
       total stated in that number's sentence and followed only by a comment on it ("The
       total hours slept is 30.8, which means she lost 6.5 hours") is read instead. Not a
       rate ("The total cost is $3 per apple, so ..."), nor one followed by a result ("...,
       which gives 8 hours", "..., so 20 girls", "= 48").

    Numbers in text echoed from ``echo`` (the question) are not read at all.
    """
    return _number_readings(text, tuple(echo), totals)[0]


def parse_number_strict(text: str, echo: Sequence[str] = (), totals: bool = False) -> str | None:
    """Only a stated answer (as in ``parse_number``'s rule 1, not withdrawn afterwards) or a
    completion that is nothing but a number; None otherwise. Like lm-evaluation-harness's
    strict-match, it shows how much of the flexible reading rests on the last-number guess.
    ``totals`` does not change it: pass ``parse_number``'s, and the two share one pass."""
    return _number_readings(text, tuple(echo), totals)[1]


# -- multiple choice ----------------------------------------------------------------------
# Words after which a bare capital letter names an option ("the answer is B", "discard A",
# "B and C", "go with D"); any other word before it makes it prose ("vitamin C", "Plan B").
_LEFT_WORDS = (
    "is|are|be|was|were|and|or|not|nor|either|neither|both|between|than|discard|discarded|"
    "discarding|eliminate|eliminated|eliminating|out|exclude|excluding|reject|rejecting|remove|"
    "choose|chose|select|pick|with|for|but|so|thus|therefore|hence|then|only|answer|option|"
    "options|choice|choices|letter|indeed|clearly|probably|likely|definitely|certainly|actually|"
    "still|the|of|leaving|leaves|keep|keeping"
)
_LEFT = re.compile(
    r"(?:^|[\n,:;(\[\-–—]|[.!?]|\b(?:" + _LEFT_WORDS + r"))[\s\*_`\"'“”‘’(\[]*$", re.I
)
_LEFT_REACH = 80  # how far back _LEFT looks
# What may follow a bare label: punctuation, the end, or a verb or conjunction. The article
# "A" is followed by a noun ("A revolving door"), so "A" gets the narrower list.
_RIGHT_WORDS = (
    "is|isn't|was|wasn't|are|aren't|and|or|nor|can|cannot|can't|could|couldn't|would|wouldn't|"
    "should|shouldn't|must|might|may|will|seems|appears|does|doesn't|do|don't|has|have|remains|"
    "remain|fits|fit|matches|match|also|as|because|since|but|over|vs|versus|then|so|which|"
    "seem|appear|were|too|"
    "instead|alone|only|though|although|while|given|due|here"
)
_RIGHT_WORDS_A = (
    "is|isn't|was|wasn't|are|and|or|nor|cannot|can't|could|couldn't|would|wouldn't|should|"
    "shouldn't|seems|appears|does|doesn't|has|remains|also|because|but|vs|versus|which"
)
_RIGHT_PUNCT = r"\s*(?:[.,;:!?)\]\"'”’*]|[-–—]\s|\(|$)"
_GLUE = re.compile(
    r"\s*(?:[,/&]\s*)?(?:(?:and|or|nor|as well as)\s+)?(?:(?:options?|choices?)\s*)?[(\[]?\s*",
    re.I,
)
# Cues before a label (or a list of labels) that choose it ...
_ADJ = (
    r"(?:correct|right|best|final|true|most\s+(?:plausible|likely|appropriate|suitable|logical|"
    r"reasonable|accurate|sensible|fitting|correct|probable)|only\s+(?:remaining|correct|"
    r"possible|valid|sensible)|likely|probable|appropriate|logical|obvious|clear)"
)
_CHOOSE_CUE = re.compile(
    r"(?:(?<!wrong\s)(?<!incorrect\s)(?<!discard\s)\banswer[\s*_]*(?:is|was|would be|will be|"
    r"should be|must be|remains|:|=|-)"
    r"|\b(?:I|we)(?:'d|’d|\s+would|\s+will|'ll|’ll|\s+should)?\s+(?:choose|select|pick|go\s+with|opt\s+for)"
    r"|\b(?:my|our|final)\s+(?:choice|selection|pick)\s*(?:is|would be|:)"
    r"|\b(?:only|one)\s+(?:option|choice|answer)\s+(?:left|remaining)\s*(?:is|would be|:)"
    r"|\b(?:" + _ADJ + r"|remaining)\s+(?:option|choice)\s*(?:is|would be|:|=|-))"
    r"[\s*_:\"'“”‘’(\[]*(?:(?:indeed|clearly|probably|likely|most likely|definitely|therefore|"
    r"thus|certainly|actually|still|either|then|hence|so|the)\s+)*(?:(?:option|choice|letter)\s*)?"
    r"[\s*_\"'“”‘’(\[]*",
    re.IGNORECASE,
)
# ... and cues that discard it.
_DISCARD_CUE = re.compile(
    r"\b(?:discard(?:ed|ing)?|eliminat(?:e|ed|ing)|rul(?:e|ed|ing)\s+out|exclud(?:e|ed|ing)|"
    r"reject(?:ed|ing)?|remov(?:e|ed|ing)|cross(?:ed)?\s+out|not|never|rather\s+than|"
    r"instead\s+of|neither|nor)\s+(?:the\s+)?(?:(?:options?|choices?|answers?)\s*)?"
    r"[\s*_\"'“”‘’(\[]*",
    re.IGNORECASE,
)
# What a label's own sentence says of it: "B is wrong", "C is correct", "D is the answer",
# optionally through "- this option ...". Singular verbs speak of the last label of a list,
# plural and modal ones of the whole list ("A and D are wrong").
_BRIDGE = re.compile(
    r"\s*(?:[,:]|[-–—])?\s*(?:(?:this|it|which|that)\s+(?:option\s+|choice\s+|answer\s+)?)?", re.I
)
_NOT_AFTER = r"(?!\s*,?\s*(?:if|unless|only if|when)\b)"
# Only judgements of the option as an answer count: "B is not complete" may answer a "which
# is NOT complete?" question, so a negation counts only before words like these.
_AS_ANSWER = (
    r"(?:correct|right|best|answer|option|choice|clear|good|valid|plausible|likely|suitable|"
    r"appropriate|relevant|fitting|reasonable|logical|sensible|possible|viable|ideal|the\s+case|"
    r"make\s+sense|makes\s+sense|fit|fits|match|apply|work)\b"
)
_REJECTED = re.compile(
    r"(?P<verb>is|was|are|were|seems?|appears?|does|do|did|has|have|can|could|would|should|must|"
    r"will|may|might)\s*(?:not\b|n't\b|n’t\b)\s*(?:be\s+|seem\s+to\s+be\s+)?"
    r"(?:(?:a|an|the|very|really|quite|as|so|necessarily|entirely|particularly|our|my)\s+)*"
    r"(?:\w+\s+)?"
    + _AS_ANSWER
    + r"|(?P<verb2>is|was|are|were|seems?|appears?)\s+(?:to\s+be\s+)?(?:also\s+|clearly\s+|"
    r"definitely\s+|likely\s+|probably\s+|obviously\s+)?(?:wrong|incorrect|unlikely|"
    r"implausible|irrelevant|inappropriate|unrelated|unsuitable|"
    r"less\s+(?:likely|plausible|appropriate|suitable|relevant)|eliminated|discarded|"
    r"ruled\s+out|excluded|out)\b"
    r"|(?P<verb3>can|could|should|must|will|may)\s+(?:safely\s+|also\s+|therefore\s+)?be\s+"
    r"(?:eliminated|discarded|ruled\s+out|excluded|rejected|removed|dismissed)\b",
    re.IGNORECASE,
)
_ADV = (
    r"(?:(?:indeed|clearly|definitely|therefore|thus|also|probably|likely|most\s+likely|"
    r"certainly)\s+)?"
)
_AFFIRMED_ANSWER = re.compile(
    r"(?P<verb>is|was|would\s+be|must\s+be|seems\s+to\s+be|appears\s+to\s+be|remains|are|were)\s+"
    + _ADV
    + r"(?:(?:the|my|our|both)\s+(?:"
    + _ADJ
    + r"\s+)?answers?|(?:(?:the|an?|my|our|both)\s+)?(?:all\s+)?"
    + _ADJ
    + r"\s+(?:answers?|options?|choices?))\b"
    + _NOT_AFTER,
    re.IGNORECASE,
)
_AFFIRMED = re.compile(
    r"(?P<verb>is|was|seems|appears|would\s+be|seems\s+to\s+be|appears\s+to\s+be|must\s+be|are|"
    r"were|seem|appear)\s+"
    + _ADV
    + r"(?:both\s+)?(?:the\s+)?(?:correct|right|best|most\s+(?:plausible|"
    r"likely|appropriate|suitable|logical|reasonable|accurate|sensible|fitting|correct|probable|"
    r"relevant)|best\s+fit|only\s+(?:remaining\s+)?(?:one|option|choice))\b"
    + _NOT_AFTER
    + r"|(?P<verb2>remains|remain|fits|fit|matches|match)\b"
    r"(?!\s+(?:unclear|uncertain|possible|a\s+possibility|only|neither|none)\b)"
    r"|(?P<verb3>is)\s+(?:the\s+)?(?:only\s+)?(?:one\s+)?(?:left|remaining)\b",
    re.IGNORECASE,
)
# A terse verdict after a dash, colon or in brackets: "C. Whitebox - correct", "A: wrong".
_VERDICT_WORD = (
    r"(?P<word>wrong|incorrect|correct|right|eliminated|discarded|ruled\s+out)\b\)?"
    r"(?=\s*(?:[.,;!)\n]|$))"
)
_TERSE = re.compile(r"\s*(?:[-–—:]\s*|\(\s*)" + _VERDICT_WORD, re.IGNORECASE)
_TERSE_BARE = re.compile(r"\s*" + _VERDICT_WORD, re.IGNORECASE)
_SINGULAR = {"is", "was", "seems", "appears", "does", "has", "remains", "fits", "matches"}
_REMAIN_CUE = re.compile(
    r"\b(?:leaving|leaves|left\s+with|keep|keeping)\s+(?:us\s+with\s+)?(?:only\s+|just\s+)?(?:the\s+)?"
    r"(?:(?:options?|choices?)\s+)?[\s*_\"'“”‘’(\[]*",
    re.IGNORECASE,
)
# A sentence that concludes or corrects with a label alone: "Therefore, B." / "... no, B."
_CONCLUDE = re.compile(
    r"(?:^|[.!?\n]\s*|,\s*)(?:(?:so|therefore|thus|hence|in conclusion|overall|actually|rather|"
    r"I mean)\s*,?|no\s*,)\s*"
    r"[\s*_\"'“”‘’(\[]*(?=[A-Z][)\]\"'”’*]*\s*(?:[.!]|$|\n))",
    re.IGNORECASE,
)


# Why a choice reader read nothing, where it can say: the detail begins with one of these
# kinds, which the trace viewer names ("(none: conflict)").
CONFLICT = "conflict"
LISTED = "options listed"


@dataclass
class _Mention:
    label: str
    start: int  # the letter
    end: int  # after the letter and its closing mark or label punctuation
    tail: int  # after any option text attached to it
    marked: bool  # "(B)", "[B]", "**B**"
    attached: str | None = None
    rejected_at: list[int] = field(default_factory=list)
    in_list: bool = False  # listed with other labels ("(B) or E", "A, B and D")


@dataclass
class _Event:
    pos: int
    tier: int  # 1: an answer statement; 2: a verdict on one option
    label: str | None  # None: several labels at once ("B or C")
    conflict: str | None = None  # a label written with another option's text: why


def _norm(text: str) -> str:
    text = re.sub(r"[\s\*_`\"'“”‘’]+", " ", text.lower()).strip(" .,;:!?{}[]()")
    return re.sub(r"^(?:the|a|an) ", "", text)


# Where a label's own option text may end: punctuation, a verb ("B. floor is correct"), or the
# next label of a list written on one line ("(A) Wrong, Wrong (B) Wrong, Not wrong").
_OWN_TEXT_END = (
    r"(?=\s*(?:[.,;:!?)\n]|$|[-–—]|\s(?:is|was|are|would|can|could|seems|appears|does|"
    r"isn't|doesn't)\b|[(\[][A-Z][)\]])|\s+[A-Z][.)]\s)"
)


def _attached(
    text: str, pos: int, label: str, options: Sequence[tuple[str, str]]
) -> tuple[int, str | None]:
    """The option text written right after a label ('D. "cucumber"', 'B) populated areas'):
    quoted or bracketed text, or one option's text verbatim. Another option's text counts only
    as a whole phrase, so a new sentence that merely starts with it is not read as one."""
    quoted = re.compile(
        r"\s*[-–—:,]?\s*(?:\"([^\"\n]{1,200})\"|“([^”\n]{1,200})”|\[([^\]\n]{1,200})\]"
        r"|\(([^)\n]{1,200})\)|'([^'\n]{1,200})'(?!\w))"
    ).match(text, pos)
    if quoted and not _TERSE.fullmatch(quoted.group()):  # "A (wrong)" is a verdict, not a text
        return quoted.end(), next(g for g in quoted.groups() if g)
    own = [t for lab, t in options if lab == label]
    others = sorted((t for lab, t in options if lab != label), key=len, reverse=True)
    lead = r"\s*[-–—:,]?\s*(?:(?:the|a|an)\s+)?"
    for texts, boundary in (
        (own, _OWN_TEXT_END),
        (others, r"(?=\s*(?:[.,;!?)\n]|$))"),
    ):
        for t in texts:
            m = re.compile(lead + re.escape(t.strip()) + boundary, re.I).match(text, pos)
            if m and t.strip():
                return m.end(), t
    return pos, None


def _mentions(text: str, labels: str, options: Sequence[tuple[str, str]]) -> list[_Mention]:
    found = []
    for m in re.finditer(rf"(?<![A-Za-z0-9'’&/+-])([{labels}])(?![A-Za-z0-9'’&/+-])", text):
        label, start = m.group(1), m.start()
        before = text[max(0, start - 2) : start]
        if before[-1:] in ("(", "[") and before[:1].isalnum():
            continue  # a function's argument, "P(A)", not a marked option
        if start > 0 and before[-1:] in ("(", "[") and re.match(r"[)\]]", text[m.end() :]):
            marked = True
            end = m.end() + 1
        else:
            marked = False
            punct = re.compile(r"[.):](?!\d)").match(text, m.end())
            end = punct.end() if punct else m.end()
        tail, attached = _attached(text, end, label, options)
        mention = _Mention(label, start, end, tail, marked, attached)
        labelled = re.compile(r"\s*[.):\-–—]").match(text, m.end()) and _own(mention, options)
        if not marked and not labelled:
            # Without its own option text beside it, a bare letter needs words around it
            # that make it a label.
            right = _RIGHT_WORDS_A if label == "A" else _RIGHT_WORDS
            # A bounded look back; "\0" keeps a cut-off window from reading as the start.
            window = max(0, start - _LEFT_REACH)
            if not _LEFT.search(("\0" if window else "") + text[window:start]):
                continue
            if not re.compile(_RIGHT_PUNCT + r"|\s+(?:" + right + r")\b", re.I).match(
                text, m.end()
            ):
                continue
        found.append(mention)
    return found


def _own(mention: _Mention, options: Sequence[tuple[str, str]]) -> bool:
    """A label written with its own option's text ("B - populated areas")."""
    return mention.attached is not None and any(
        lab == mention.label and _norm(t) == _norm(mention.attached) for lab, t in options
    )


def _conflict(mention: _Mention, options: Sequence[tuple[str, str]]) -> str | None:
    """Why a label written with another option's text ('D. "living room"' where that is E)
    is a conflict; None when it is not one."""
    if mention.attached is None:
        return None
    said = _norm(mention.attached)
    owners = [lab for lab, t in options if _norm(t) == said]
    if not owners or mention.label in owners:
        return None
    text = mention.attached.strip(" .,;:!?")
    return (
        f'{CONFLICT}: {mention.label} is written with option {" or ".join(owners)}\'s text "{text}"'
    )


def _alone_at_end(text: str, mention: _Mention) -> bool:
    """Whether ``mention`` stands alone, in its marks, on the reply's last line ("\n(D)")."""
    start = text.rfind("\n", 0, mention.start) + 1
    line = text[start:].strip()
    return re.fullmatch(r"[\s*_#>•(\[-]*" + mention.label + r"[)\]]?[.!]?", line) is not None


def _text_answer(text: str, pos: int, options: Sequence[tuple[str, str]]) -> list[str]:
    """Labels whose option text is the whole answer stated at ``pos`` ("The answer is living
    room." -> E): the text must end at punctuation, the end, or "because"/"since"/"as"."""
    boundary = r"(?=\s*(?:[.,;:!?\"”')\n](?!\d)|$|\s(?:because|since|as|which|for)\b))"
    return [
        lab
        for lab, t in options
        if t.strip()
        and re.compile(r"(?:(?:the|a|an)\s+)?" + re.escape(t.strip()) + boundary, re.I).match(
            text, pos
        )
    ]


class ChoiceReading(NamedTuple):
    label: str | None
    # Why no label was read, where the reader can say ("conflict: ...", "options listed: ...").
    why: str | None = None


def _option_text(text: str, labels: str, options: Sequence[tuple[str, str]]) -> str | None:
    """The one option whose whole text the reply is ("False, False", '"{NAND}".'), else
    None; a reply that is a bare label ("C") is read as the label, even where some option's
    text is "C"."""
    longest = max((len(t) for _, t in options), default=0)
    if not longest or len(text) > 2 * longest + 16:  # cheaply: it cannot be one
        return None
    said = _norm(text)
    if not said or (len(said) == 1 and said.upper() in labels):
        return None
    owners = [lab for lab, t in options if lab in labels and _norm(t) == said]
    return owners[0] if len(owners) == 1 else None


# What may stand between the options of an echoed list: marks, punctuation, an echo, and a
# heading ("Options:", "Answer choices:").
_LIST_GLUE = re.compile(
    r"(?:\(echo\)|[\s.,;:()\[\]*_\"'“”‘’-]|\b(?:answer\s+)?(?:options?|choices?)\b)*", re.I
)


def _only_lists_options(
    text: str, mentions: list[_Mention], options: Sequence[tuple[str, str]]
) -> bool:
    """Whether the reply is nothing but two or more options, each written with its own text
    ('A. "Wrong, Wrong" B. "Wrong, Not wrong" ...'): it echoes the list and chooses none."""
    own = [m for m in mentions if _own(m, options)]
    if len({m.label for m in own}) < 2:
        return False
    pos, rest = 0, []
    for m in own:
        rest.append(text[pos : max(pos, m.start)])
        pos = max(pos, m.tail)
    rest.append(text[pos:])
    return all(_LIST_GLUE.fullmatch(r) for r in rest)


def parse_choice(
    text: str,
    labels: str,
    options: Sequence[tuple[str, str]] | None = None,
    echo: Sequence[str] = (),
) -> str | None:
    """``read_choice``'s label."""
    return read_choice(text, labels, options, echo).label


def read_choice(
    text: str,
    labels: str,
    options: Sequence[tuple[str, str]] | None = None,
    echo: Sequence[str] = (),
) -> ChoiceReading:
    """The chosen option letter among ``labels`` (e.g. "ABCDE"), given ``options`` as
    (label, text) pairs where known, and ``echo`` (the question).

    A reply that is exactly one option's whole text ("False, False", quotes, emphasis and a
    final full stop aside) is that option, when no other option has the same text.

    A capital letter names an option when it is marked ("(B)", "**B**"), written as a label
    ("B. populated areas", "C) ...") or with its own option text ("B - populated areas"), or
    stands between words that make it one ("the answer is B", "discard A and D", "B is
    wrong"). The English article "A" is not option A: "A revolving door" is prose, and so are
    "vitamin C" and "P(A)". The completion is then read as a careful human would:

    1. answer statements ("The answer is B", "Answer: B", "I choose (B)", "B is the correct
       answer", "the best option is B", "Therefore, B.", "... no, B.", or, given ``options``,
       "The answer is living room." naming exactly one option by its whole text): the last
       one wins, so a retraction keeps the corrected answer;
    2. otherwise verdicts ("C is correct", "C: correct", "B is the most plausible", "only C
       remains", "leaving C") must all name the same option;
    3. otherwise the one marked letter or label standing alone ("... (C)", "...\nC"), or a
       label opening the completion ("B. populated areas", "E") unless the completion lists
       the options; an alternative offered ("(B) might be it, or E") makes it ambiguous.

    Options named while discarded or called wrong ("discard A", "B is wrong", "not C", "E is
    not a clear choice", "rule out D and E", "A: wrong") are never answers. Only judgements
    of an option *as an answer* discard it: "C is not complete" may answer a "which is NOT
    complete?" question. None when the chosen label is ambiguous ("B or C"), later called
    wrong or withdrawn ("Wait, ..."), written with another option's text ('D. "living
    room"' where that is E's text), or when nothing is chosen. Statements inside questions
    ("Is B correct?") or conditions ("if C is right") do not count. Lower-case letters are
    never labels. A reply that only lists the options, each with its own text ('A. "Wrong,
    Wrong" B. "Wrong, Not wrong" ...', "(A) Wrong, Wrong (B) Wrong, Not wrong"), chooses
    none of them; a label alone on the last line after such a list ("...\n\nD", "(D)") is
    no item of it but the answer.

    Where it can say why it read nothing, ``why`` says so ('conflict: D is written with
    option C's text "cucumber"', 'options listed: ...').
    """
    options = list(options or [])
    exact = _option_text(text, labels, options)
    if exact is not None:
        return ChoiceReading(exact)
    text = strip_echo(text, echo)
    # Bold single letters are marks; other emphasis is noise. "\boxed{C}" states an answer.
    text = re.sub(rf"\*\*\s*\(?([{labels}])\)?\s*[.):]?\s*\*\*", r"(\1)", text)
    text = re.sub(r"\*\*|__", "", text)
    text = re.sub(
        rf"\\boxed\{{\s*(?:\\text(?:bf)?\{{)?\s*\(?([{labels}])\)?\s*\}}?\s*\}}",
        r" Answer: \1. ",
        text,
    )
    mentions = _mentions(text, labels, options)
    if _only_lists_options(text, mentions, options):
        return ChoiceReading(None, f"{LISTED}: the reply lists the options and chooses none")
    events = _choice_events(text, mentions, options)
    retracted = _last_retraction(text)

    def withdrawn(label: str, after: int) -> bool:
        """Called wrong, or a withdrawal made, after it was chosen."""
        return retracted > after or any(
            p > after for m in mentions if m.label == label for p in m.rejected_at
        )

    answers = [e for e in events if e.tier == 1]
    if answers:
        last = answers[-1]
        if last.conflict:
            return ChoiceReading(None, last.conflict)
        if last.label is None or withdrawn(last.label, last.pos):
            return ChoiceReading(None)
        return ChoiceReading(last.label)
    verdicts = [e for e in events if e.tier == 2]
    if verdicts:
        label = _only(e.label for e in verdicts)
        conflict = next((e.conflict for e in verdicts if e.conflict), None)
        if label is None or conflict or withdrawn(label, verdicts[-1].pos):
            return ChoiceReading(None, conflict)
        return ChoiceReading(label)
    return _choice_fallback(text, mentions, options)


def read_sample_choice(text: str, fields: Mapping[str, object], labels: str) -> ChoiceReading:
    """``read_choice`` with what a sample's fields give it: its options (so it sees a label
    written with another option's text, and an answer given by an option's text alone) and
    its question (so the echoed question is not read)."""
    options = fields.get("options")
    question = fields.get("question")
    return read_choice(
        text,
        labels,
        options=[] if options is None or isinstance(options, str) else options,  # type: ignore[arg-type]
        echo=[question] if isinstance(question, str) else [],
    )


def _only(labels: Iterable[str | None]) -> str | None:
    """The one label all of ``labels`` name, else None."""
    found = set(labels)
    return found.pop() if len(found) == 1 else None


def _choice_events(
    text: str, mentions: list[_Mention], options: Sequence[tuple[str, str]]
) -> list[_Event]:
    """Answer statements and verdicts, in order; marks rejected mentions on the way."""
    at = {m.start: i for i, m in enumerate(mentions)}
    # Lists: labels joined only by commas, "and", "or", "nor", "option(s)".
    # A label alone on the last line after an echoed option list is the answer, not an item.
    groups: list[list[int]] = []
    for i, m in enumerate(mentions):
        gap = (mentions[i - 1].tail, m.start - m.marked) if i else (1, 0)
        answers_list = i and _own(mentions[i - 1], options) and _alone_at_end(text, m)
        if gap[0] <= gap[1] and _GLUE.fullmatch(text, *gap) and not answers_list:
            groups[-1].append(i)
        else:
            groups.append([i])
    group_of = {i: g for g in groups for i in g}
    for g in groups:
        if len({mentions[i].label for i in g}) > 1:
            for i in g:
                mentions[i].in_list = True
    events: list[_Event] = []

    def live(pos: int) -> bool:
        return not (_in_question(text, pos) or _conditional_before(text, pos))

    def record(tier: int, pos: int, members: list[int]) -> None:
        if tier == 0:
            for j in members:
                mentions[j].rejected_at.append(mentions[j].start)
        else:
            label = _only(mentions[j].label for j in members)
            conflict = next(filter(None, (_conflict(mentions[j], options) for j in members)), None)
            events.append(_Event(pos, tier, label, conflict))

    # What each list's own sentence says of it: singular verbs speak of its last label only.
    own_singular: set[int] = set()
    for g in groups:
        last = mentions[g[-1]]
        # "A: wrong": the label's own colon or dash may introduce the verdict.
        terse = _TERSE.match(text, last.tail) or (
            _TERSE_BARE.match(text, last.tail) if last.tail == last.end > last.start + 1 else None
        )
        if terse:
            own_singular.add(g[-1])
            if live(last.start):
                tier = 2 if terse.group("word").lower() in ("correct", "right") else 0
                record(tier, last.start, [g[-1]])
            continue
        bridge = _BRIDGE.match(text, last.tail)
        where = bridge.end() if bridge else last.tail
        for pattern, tier in ((_REJECTED, 0), (_AFFIRMED_ANSWER, 1), (_AFFIRMED, 2)):
            said = pattern.match(text, where)
            if not said:
                continue
            singular = next(v for v in said.groups() if v).lower() in _SINGULAR
            if singular:
                own_singular.add(g[-1])
            if live(last.start):
                record(tier, last.start, [g[-1]] if singular else g)
            break

    # Cues before a label apply to it and the rest of its list, except a last member whose
    # own sentence speaks of it ("the answer is B, and C is wrong").
    for cue, tier in ((_CHOOSE_CUE, 1), (_REMAIN_CUE, 2), (_DISCARD_CUE, 0)):
        for c in cue.finditer(text):
            hit = at.get(c.end())
            if hit is None:
                if tier == 1 and options and live(c.start()):
                    named = _text_answer(text, c.end(), options)
                    if named:
                        events.append(_Event(c.end(), 1, _only(named)))
                continue
            if live(mentions[hit].start):
                g = group_of[hit]
                members = [j for j in g[g.index(hit) :] if j == hit or j not in own_singular]
                record(tier, mentions[hit].start, members)
    for c in _CONCLUDE.finditer(text):
        hit = at.get(c.end())
        if hit is not None and live(c.end()):
            record(1, c.end(), [hit])
    # "B is correct, and so is D": a second option chosen alike makes the choice ambiguous.
    for m in mentions:
        if _ALSO.search(text[max(0, m.start - 30) : m.start]):
            sentence = max(text.rfind(c, 0, m.start) for c in ".!?\n")
            for tier in sorted({e.tier for e in events if sentence < e.pos < m.start}):
                events.append(_Event(m.start, tier, None))
    return sorted(events, key=lambda e: e.pos)


_ALTERNATIVE = re.compile(
    r"\b(?:or|either)\s+(?:maybe\s+|perhaps\s+|possibly\s+)?(?:(?:options?|choices?)\s+)?"
    r"[\s*_\"'“”‘’(\[]*$",
    re.IGNORECASE,
)


_ALSO = re.compile(
    r"\b(?:so|as)\s+(?:is|was|does)\s+(?:(?:option|choice)\s+)?[\s*_\"'“”‘’(\[]*$", re.I
)


def _line_start(text: str, pos: int, breaks: str) -> bool:
    """Whether only spaces, bullets and marks stand between ``pos`` and the start of the text
    or one of the ``breaks`` characters before it."""
    i = pos
    while i > 0 and text[i - 1] in " \t*-•>#":
        i -= 1
    return i == 0 or text[i - 1] in breaks


# What may precede a completion's first words: punctuation and an echoed question.
_OPENING = re.compile(r"(?:[\s.,;:!?-]|" + re.escape(ECHOED.strip()) + ")*")


def _choice_fallback(
    text: str, mentions: list[_Mention], options: Sequence[tuple[str, str]]
) -> ChoiceReading:
    """With no statement or verdict, the one option that is:

    - marked ("(C)") or standing alone as a sentence, a line or after a colon ("... code.\nC",
      "Both are false: B."), unless listed with other labels ("(A) or (B)");
    - or a label opening the completion ("B. populated areas", "E"), unless the completion
      is a list of the options.

    A label offered as an alternative ("(B) might be it, or E") counts as a second option.
    """
    candidates = {
        m.label
        for m in mentions
        if not m.rejected_at
        and not m.in_list
        and (
            m.marked
            or (
                _line_start(text, m.start, ".!?:\n")
                and re.compile(r"[.!]?\s*(?:\n|$)").match(text, m.start + 1) is not None
            )
            or _ALTERNATIVE.search(text[max(0, m.start - 40) : m.start]) is not None
        )
    }
    lead = _OPENING.match(text)
    opening = lead.end() if lead else 0
    first = next((m for m in mentions if m.start == opening), None)
    if first is not None and not first.rejected_at and not first.marked:
        listed = any(
            m.label != first.label and not m.rejected_at and _line_start(text, m.start, "\n")
            for m in mentions
        )
        as_label = re.compile(r"[.):]|\s*$|\s*\n").match(text, first.start + 1)
        if not listed and (as_label or _own(first, options)):
            candidates.add(first.label)
    label = _only(candidates)
    if label is None:
        return ChoiceReading(None)
    conflict = next(
        filter(None, (_conflict(m, options) for m in mentions if m.label == label)), None
    )
    return ChoiceReading(None, conflict) if conflict else ChoiceReading(label)
