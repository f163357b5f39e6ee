"""Reading answers out of free-form completions. Each reader returns None when the
completion states no answer; the caller must treat that as unresolved, never as a default."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# Markdown emphasis, quotes and brackets that models wrap answers in.
_WRAP = r"[\s\*_`\"'“”‘’\(\[\{]*"

# -- True/False ---------------------------------------------------------------------------
_BOOL_WORDS = {"true": "True", "yes": "True", "false": "False", "no": "False"}
_BOOL_STATED = re.compile(
    r"(?:answer|verdict|conclusion|statement)\s*(?:is|would be|:|=|-)\s*(?:that\s+)?(?:it\s+is\s+)?"
    + _WRAP
    + r"(true|false|yes|no)\b",
    re.IGNORECASE,
)
_CLOSE = r"[\s\*_`\"'”’\)\]\}]*"
# A leading truth word counts only as a whole answer: "No, it is not" but not "No doubt".
_BOOL_LEAD = re.compile(
    r"^" + _WRAP + r"(true|false|yes|no)" + _CLOSE + r"(?:[.,!:;\n]|$)", re.IGNORECASE
)
_BOOL_TF = re.compile(r"\b(true|false)\b", re.IGNORECASE)


def parse_bool(text: str) -> str | None:
    """ "True"/"False" from statements such as "Answer: False", "The answer is yes", "True.",
    or a completion whose only truth words are all the same."""
    stated = _BOOL_STATED.findall(text)
    if stated:
        return _BOOL_WORDS[stated[-1].lower()]
    lead = _BOOL_LEAD.match(text)
    if lead:
        return _BOOL_WORDS[lead.group(1).lower()]
    # Prose uses "no" and "yes" loosely ("no doubt"); only true/false count when unstated.
    found = {_BOOL_WORDS[w.lower()] for w in _BOOL_TF.findall(text)}
    return found.pop() if len(found) == 1 else None


# -- numbers ------------------------------------------------------------------------------
_NUMBER = r"-?\$?\s?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_NUM = re.compile(_NUMBER)
_NUM_HASHES = re.compile(r"####\s*(" + _NUMBER + ")")
_NUM_BOXED = re.compile(r"\\boxed\{\s*(" + _NUMBER + r")")
_NUM_STATED = re.compile(
    r"answer\s*(?:is|:|=|would be|will be)?\s*(?:approximately\s*|about\s*)?"
    + _WRAP
    + "("
    + _NUMBER
    + ")",
    re.IGNORECASE,
)


def normalize_number(raw: str) -> str | None:
    """ "$1,200.00" -> "1200"; "-0.50" -> "-0.5"; None if it is not a number."""
    cleaned = raw.replace("$", "").replace(",", "").replace(" ", "")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    if value == value.to_integral_value():
        return str(value.quantize(Decimal(1)))
    return format(value.normalize(), "f")


def parse_number(text: str) -> str | None:
    """The final numeric answer: "#### 42", "\\boxed{42}" or "the answer is 42" win over
    numbers in the working; otherwise the last number in the completion."""
    for pattern in (_NUM_HASHES, _NUM_BOXED, _NUM_STATED):
        found = pattern.findall(text)
        if found:
            return normalize_number(found[-1])
    numbers = _NUM.findall(text)
    return normalize_number(numbers[-1]) if numbers else None


# -- multiple choice ----------------------------------------------------------------------
_CHOICE_KEY = (
    r"(?i:(?:answer|choice|option|choose|select|pick))\s*"
    r"(?i:is|:|=|would be|will be|-)?\s*(?i:option\s*)?"
)


def parse_choice(text: str, labels: str) -> str | None:
    """The chosen option letter among ``labels`` (e.g. "ABCDE").

    Reads "Answer: B", "the answer is B) text", "(B)", "**B**", "B. text" and "Option B".
    The English article "A" ("A revolving door ...") is not option A: an "A" followed by a
    lower-case word is prose, and a bare letter at the start counts only when punctuation,
    markup or the end of the completion marks it as a label.
    """
    letter = f"([{labels}])"
    stated: list[str] = [
        m.group(1)
        for m in re.finditer(_CHOICE_KEY + _WRAP + letter + r"(?![A-Za-z0-9])", text)
        if not (m.group(1) == "A" and re.match(r"\s+[a-z]", text[m.end() :]))
    ]
    if stated:
        return stated[-1]
    marked = re.findall(
        r"(?:^|[\s(\[*:])(?:\(" + letter + r"\)|\*\*" + letter + r"\*\*|\[" + letter + r"\])",
        text,
    )
    marked_letters: set[str] = {next(g for g in groups if g) for groups in marked}
    if len(marked_letters) == 1:
        return marked_letters.pop()
    lead = re.match(_WRAP + letter + r"(?:[.):\]]|\*\*|$)", text.strip())
    return str(lead.group(1)) if lead else None
