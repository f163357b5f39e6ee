"""Reading a numeric answer: ``parse_number`` (GSM8K's primary reading) and
``parse_number_strict``; tests/test_readers.py holds the table of completions that specifies
them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from hpt.tasks.readers.cues import (
    BOXED,
    CLOSE,
    CONDITION_AFTER,
    HASHES,
    RETRACTION,
    SENTENCE_END,
    WRAP,
    answer_is,
    conditional_before,
    in_question,
    that_is,
)
from hpt.tasks.readers.echo import strip_echo

# A minus sign counts only when attached: "-3", but "5 - 3" is a subtraction.
_NUMBER = r"(?:(?<![\w)\]])-)?(?:\$\s?)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_NUM = re.compile(_NUMBER)
_OP = r"(?:[-+*/×÷^]|x(?=\s*\$?\d))"
# A number, or an arithmetic chain "40 - 2 = 38", where a stated answer begins.
_CHAIN = re.compile(
    WRAP
    + r"(?:[a-zA-Z]\s*=\s*)?(?P<chain>"
    + _NUMBER
    + r"%?(?:\s*(?:"
    + _OP
    + r"|=)\s*\(?"
    + _NUMBER
    + r"%?\)?)*)"
)
# Where a stated answer's value begins: "the answer is", "Answer:", "final answer =", "the
# answer would be" (never the verb: "has to answer 30 questions", "I would answer 12"), or
# "the correct total is".
_NUM_CUE = re.compile(
    rf"(?:{HASHES}|{BOXED}|{answer_is('was', 'remains')}"
    r"|\b(?:correct|final|right|actual)\s+(?:total|amount|result|number|value|count|sum|cost|"
    r"price|figure)[\s*_]*(?:is|was|would be|will be|should be|:|=))"
    r"[\s*_:]*(?:(?:approximately|about|roughly|exactly|therefore|thus|simply|just|then)\s+)*",
    re.IGNORECASE,
)
# A withdrawal, or a calculation called wrong: "That's wrong" (which in a multiple-choice
# analysis discards an option, so only numbers read it).
_RETRACTION_NUM = re.compile(
    RETRACTION.pattern + "|" + that_is("wrong|incorrect|not right"), re.IGNORECASE
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
            CONDITION_AFTER.match(text, m.end())
            or conditional_before(text, cue.start())
            or in_question(text, cue.start())
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
# A "*" is a multiplication between operands ("3 * 4", "(2 + 1)*4"); around a number alone it
# is markdown emphasis ("**42**", "*42*"), a reasoning model's usual bare answer.
_OPERAND_BEFORE = re.compile(r"(?:[-+/×÷^]|[\d)\]]\s*\*|\bx)\s*\(?$")
_OPERAND_AFTER = re.compile(
    r"\s*\)?\s*(?:[-+/×÷^]|\*\s*[\d($]|x(?=\s*\$?\d)|(?:divided|multiplied)\s+by\b"
    r"|times(?=\s*\$?\d))|\s+\*(?!\*)",
    re.IGNORECASE,
)
# "The total hours slept by Sadie is 30.8, which means ... she lost 6.5 hours": a total stated,
# in its unit at most ("hours", never a rate: "per", "each", "a day"; nor an operand: "plus"),
# then a clause that only comments on it. Read when the question asks for a total.
_TOTAL = re.compile(
    r"\btotal\b[^.!?\n=]{0,80}?\b(?:is|was|are|were|will be|would be|comes to|equals)\s+"
    r"(?:(?:approximately|about|roughly|exactly|then|now)\s+)?"
    + WRAP
    + r"(?P<n>"
    + _NUMBER
    + r")(?:\s+(?!(?:per|each|every|a|an|plus|minus|times)\b)[A-Za-z]+){0,3}"
    + CLOSE
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
_ASKING = re.compile(r"[^.!?\n]*(?:\.\d[^.!?\n]*)*\?")


def asks_for_total(question: str) -> bool:
    """Whether the question asks for a total ("how many ... in total", "altogether"): in the
    sentence that asks (one ending "?", else the last), not in what it tells ("items with a
    total cost of $20 ... How much change?")."""
    asking = [m.group() for m in _ASKING.finditer(question)]
    if not asking:
        ends = [m.end() for m in SENTENCE_END.finditer(question.rstrip(" .\n"))]
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
    sentence = max((m.end() for m in SENTENCE_END.finditer(text, 0, last.start())), default=0)
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
    alone = re.fullmatch(WRAP + "(" + _NUMBER + ")" + CLOSE + r"\.?\s*", text)
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
