"""MedCalc-Bench scoring: reading a completion's answer, and MedCalc-Bench's own rules.

The rules are those of MedCalc-Bench's evaluation (ncbi-nlp/MedCalc-Bench,
``evaluation/evaluate.py``, ``check_correctness``), chosen per calculator from the row's
columns, never HELM's per-category rule (which scores v1.0's ``lab`` and ``dosage`` rows as
0 because their truth is a decimal checked by range):

- ``integer`` (Output Type "integer": scores such as CHA2DS2-VASc, HAS-BLED, Wells'): the
  model's number is rounded as Python's ``round`` rounds (half to even, as upstream) and must
  equal the truth;
- ``decimal`` (Output Type "decimal": lab values, physical measures, doses, some risks):
  correct when Lower Limit <= value <= Upper Limit, the row's own limits (upstream's band);
- ``date`` (Output Type "date": calculators 13 "Estimated Due Date" and 68 "Estimated of
  Conception"): the same calendar date; the truth is written M/D/Y ("09/23/2014");
- ``weeks_days`` (calculator 69 "Estimated Gestational Age", whose Output Type says
  "integer" but whose truth is a tuple "('4 weeks', '3 days')"): the same (weeks, days).

Reading (``read_answer``), as a careful human reads the completion. Text copied from the
patient note or the question (six or more consecutive words, ``strip_echo``) is dropped
first, so a quoted note does not supply the answer. Then, latest statement wins:

1. an explicit answer statement: "Answer: 12.5", "the answer is 3", "final answer = 7",
   "\\boxed{3}", "#### 3", a JSON ``"answer": "3"`` or DSPy's ``[[ ## answer ## ]]`` marker;
2. else a result statement outside parentheses: a result noun followed by a verb, a sign
   or the value, or a bare "is"/"="/"equals" ("The score is 3 (age 65-74: 1 point).",
   "the patient's creatinine clearance is 25.238 mL/min", "CrCl = (140 - 87) * 48 / 72 =
   25.2", "a total of 4 points", "the estimated due date is 04-02-2012");
3. else a completion that is nothing but the value ("12.5 mL/min", "3");
4. else the completion's last value of the right kind (for weeks/days only a full
   "(W, D)" or "W weeks and D days" form).

Within a statement: a chain is read after its last "=" ("1 + 1 + 2 = 4" is 4); an
unevaluated sum ("1 + 1 + 2"), a range ("12-14", "12 to 14") or a statement with no value of
the kind is no reading. A statement withdrawn afterwards ("Wait, ...", "I made a mistake")
does not count: only text after the withdrawal is read. Anything unreadable is None
(unresolved), never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date
from decimal import Decimal, InvalidOperation

from hpt.tasks.parsing import normalize_number, strip_echo

KINDS = ("integer", "decimal", "date", "weeks_days")

# -- the kind of answer a row asks for -----------------------------------------------------
_TUPLE_TRUTH = re.compile(
    r"""^\s*\(\s*['"]?\s*(\d+)\s*weeks?\s*['"]?\s*,\s*['"]?\s*(\d+)\s*days?\s*['"]?\s*\)\s*$""",
    re.IGNORECASE,
)


def answer_kind(output_type: str, truth: str) -> str:
    """The scoring rule for a row, from its Output Type (and, for the gestational-age
    calculator, the tuple form of its truth). ValueError for an unknown Output Type."""
    if _TUPLE_TRUTH.match(truth):
        return "weeks_days"
    kind = output_type.strip().lower()
    if kind in ("integer", "decimal", "date"):
        return kind
    raise ValueError(f"unknown Output Type {output_type!r} (expected integer, decimal or date)")


def canonical_truth(kind: str, truth: str) -> str:
    """The ground truth in the form ``read_answer`` returns; ValueError when malformed."""
    if kind == "weeks_days":
        m = _TUPLE_TRUTH.match(truth)
        if not m:
            raise ValueError(f"expected a (weeks, days) tuple, got {truth!r}")
        return _weeks_days(int(m.group(1)), int(m.group(2)))
    if kind == "date":
        found = _dates(truth)
        if len(found) != 1 or found[0][2].strip() != truth.strip():
            raise ValueError(f"expected a date M/D/Y, got {truth!r}")
        return found[0][0]
    value = normalize_number(truth.strip())
    if value is None:
        raise ValueError(f"expected a number, got {truth!r}")
    if kind == "integer" and Decimal(value) != Decimal(value).to_integral_value():
        raise ValueError(f"expected an integer, got {truth!r}")
    return value


def limit(raw: str) -> str:
    """A decimal row's Lower/Upper Limit as a number string; ValueError when malformed."""
    value = normalize_number(raw.strip())
    if value is None:
        raise ValueError(f"expected a number, got {raw!r}")
    return value


# -- scoring -------------------------------------------------------------------------------
def is_correct(kind: str, parsed: str | None, truth: str, lower: str = "", upper: str = "") -> bool:
    """MedCalc-Bench's verdict on a reading (``parsed`` from ``read_answer``) against the
    canonical truth; ``lower``/``upper`` are the row's limits (decimal rows)."""
    if parsed is None:
        return False
    try:
        if kind == "integer":
            return round(Decimal(parsed)) == int(Decimal(truth))
        if kind == "decimal":
            value = Decimal(parsed)
            return Decimal(lower) <= value <= Decimal(upper)
    except (InvalidOperation, ValueError):
        return False
    return parsed == truth  # dates and (weeks, days) in canonical form


# -- reading -------------------------------------------------------------------------------
_NUMBER = re.compile(
    r"(?<![\w.,/^])([-−]?)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?![\d/])"
)
_MONTHS = {
    m: i + 1
    for i, name in enumerate(
        "january february march april may june july august september october november "
        "december".split()
    )
    for m in (name, name[:3], "sept" if name == "september" else name[:3])
}
_MONTH = r"(?P<mon>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DATE = re.compile(
    r"(?<![\d/-])(?P<m1>\d{1,2})[/-](?P<d1>\d{1,2})[/-](?P<y1>\d{4})(?![\d/-])"
    r"|(?<![\d/-])(?P<y2>\d{4})-(?P<m2>\d{1,2})-(?P<d2>\d{1,2})(?![\d/-])"
    r"|\b" + _MONTH + r"\s+(?P<d3>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y3>\d{4})\b"
    r"|\b(?P<d4>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?"
    + _MONTH.replace("mon", "mon4")
    + r",?\s+(?P<y4>\d{4})\b",
    re.IGNORECASE,
)
_WD_FULL = re.compile(
    r"""\(\s*['"]?\s*(?P<w1>\d+)\s*(?:weeks?|wks?)?\s*['"]?\s*,\s*['"]?\s*(?P<d1>\d+)\s*(?:days?)?\s*['"]?\s*\)"""
    r"|\b(?P<w2>\d+)\s*(?:weeks?|wks?)\b[\s,]*(?:and\s+|plus\s+|\+\s*)?(?P<d2>\d+)\s*(?:days?)\b",
    re.IGNORECASE,
)
_WD_PART = re.compile(r"\b(?P<n>\d+)\s*(?P<unit>weeks?|wks?|days?)\b", re.IGNORECASE)

_EXPLICIT = re.compile(
    r"\[\[\s*##\s*answer\s*##\s*\]\]"
    r"|\"answer\"\s*:"
    r"|\\boxed\{"
    r"|####"
    r"|\banswer[\s*_]*(?:is|was|would be|will be|should be|must be|:|=)",
    re.IGNORECASE,
)
_RESULT_NOUNS = (
    r"score|total|sum|result|value|estimate|clearance|crcl|gfr|egfr|bmi|bsa|level|gap|ratio|"
    r"deficit|dose|dosage|rate|index|interval|qtc|map|pressure|osmolality|concentration|"
    r"weight|age|date|points?|grade|class|stage|risk|count|output|volume|equivalents?|"
    r"calculation|mme|meld|apache|sofa|child-pugh|curb-65|news|gcs"
)
_RESULT = re.compile(
    r"\b(?:" + _RESULT_NOUNS + r")\b(?:[^\n.;:=]{0,40}?"
    r"(?:\b(?:is|was|are|equals|of|comes to|would be|will be|becomes|totals?|gives)\b|=|:)"
    r"|(?=\s+-?\d))"
    r"|\b(?:is|was|are|equals|comes to|totals?)\b|=",
    re.IGNORECASE,
)
# "is less than 11", "greater than or equal to 32": a comparison, not a stated value.
_COMPARISON = re.compile(
    r"\s*(?:(?:less|greater|more|fewer|higher|lower|smaller|larger)\s+than|at least|at most|"
    r"above|below|under|over|within|between|not|no|[<>≤≥])",
    re.IGNORECASE,
)
_FILLER = re.compile(
    r"[\s*_:\"'`(\[]*(?:(?:approximately|approx\.?|about|around|roughly|exactly|estimated|"
    r"therefore|thus|then|now|calculated as|calculated to be|equal to|~|≈)[\s*_:\"'`(\[]*)*",
    re.IGNORECASE,
)
_RETRACTION = re.compile(
    r"(?:^|[.!?\n]\s*)(?:wait|oops)\b\s*[,.!:—-]|\bI made (?:a|an) (?:mistake|error)\b"
    r"|\blet me (?:re-?calculate|re-?check|redo|correct)\b|\bcorrection\s*:",
    re.IGNORECASE,
)
_STATEMENT_END = re.compile(r"\n|;|[.!?](?!\d)")


def _weeks_days(weeks: int, days: int) -> str:
    return f"({weeks} weeks, {days} days)"


def _make_date(y: str, m: str, d: str) -> str | None:
    try:
        return date(int(y), int(m), int(d)).strftime("%m/%d/%Y")
    except ValueError:
        return None


def _dates(text: str) -> list[tuple[str, int, str]]:
    """(canonical MM/DD/YYYY, start, matched text) for every valid date in ``text``."""
    out = []
    for m in _DATE.finditer(text):
        g = m.groupdict()
        if g["y1"]:
            value = _make_date(g["y1"], g["m1"], g["d1"])
        elif g["y2"]:
            value = _make_date(g["y2"], g["m2"], g["d2"])
        elif g["y3"]:
            value = _make_date(g["y3"], str(_MONTHS[g["mon"].lower()]), g["d3"])
        else:
            value = _make_date(g["y4"], str(_MONTHS[g["mon4"].lower()]), g["d4"])
        if value:
            out.append((value, m.start(), m.group()))
    return out


def _number_at(segment: str) -> str | None:
    """The value a statement's segment states: after its last "=", the first number, unless
    an operator or a range follows it."""
    if "=" in segment:
        segment = segment.rsplit("=", 1)[1]
    m = _NUMBER.search(segment)
    if not m:
        return None
    after = segment[m.end() :]
    if re.match(r"\s*(?:[-−–+*/×÷^]|to\b|or\b)\s*\d", after):
        return None  # an unevaluated sum, or a range: no single value
    return normalize_number(("-" if m.group(1) else "") + m.group(2))


def _weeks_days_at(segment: str, partial: bool) -> str | None:
    m = _WD_FULL.search(segment)
    if m:
        w, d = (m.group("w1"), m.group("d1")) if m.group("w1") else (m.group("w2"), m.group("d2"))
        return _weeks_days(int(w), int(d))
    if not partial:
        return None
    p = _WD_PART.search(segment)
    if not p:
        return None
    n = int(p.group("n"))
    return _weeks_days(n, 0) if p.group("unit").lower().startswith("w") else _weeks_days(0, n)


def _value_at(kind: str, segment: str) -> str | None:
    if kind == "date":
        found = _dates(segment)
        return found[0][0] if found else None
    if kind == "weeks_days":
        return _weeks_days_at(segment, partial=True)
    return _number_at(segment)


def _segment(text: str, start: int) -> str:
    """The statement from ``start`` to its end (line, ";" or a sentence's full stop)."""
    end = _STATEMENT_END.search(text, start)
    stop = end.start() if end else len(text)
    # A full stop can end the statement before its value in "Answer:\n3": read the next line.
    if not text[start:stop].strip():
        end = _STATEMENT_END.search(text, stop + 1)
        stop = end.start() if end else len(text)
    return text[start:stop]


def _aside(text: str, pos: int) -> bool:
    """Whether ``pos`` lies inside a parenthesis opened earlier on its line: "(age 65-74:
    1 point)" explains a statement, it does not make one."""
    line = text[text.rfind("\n", 0, pos) + 1 : pos]
    return line.count("(") > line.count(")")


def _last_statement(
    kind: str, text: str, cue: re.Pattern[str], asides: bool = True
) -> tuple[bool, str | None]:
    """(found, value) for the last cue in ``text`` followed by a statement of the kind;
    ``asides=False`` skips cues inside parentheses."""
    hits = list(cue.finditer(text))
    for m in reversed(hits):
        if not asides and _aside(text, m.start()):
            continue
        filler = _FILLER.match(text, m.end())
        start = filler.end() if filler else m.end()
        seg = _segment(text, start)
        if _COMPARISON.match(seg):
            continue
        if kind == "weeks_days":  # its tuple form opens with the bracket _FILLER skips
            seg = _segment(text, m.end())
        value = _value_at(kind, seg)
        if value is not None:
            return True, value
        if kind != "date" and _NUMBER.search(seg):
            return True, None  # it states something, but no single value ("12-14")
    return False, None


def _all_values(kind: str, text: str) -> list[str]:
    if kind == "date":
        return [d for d, _, _ in _dates(text)]
    if kind == "weeks_days":
        out = []
        for m in _WD_FULL.finditer(text):
            w, d = (
                (m.group("w1"), m.group("d1")) if m.group("w1") else (m.group("w2"), m.group("d2"))
            )
            out.append(_weeks_days(int(w), int(d)))
        return out
    values = []
    for m in _NUMBER.finditer(text):
        v = normalize_number(("-" if m.group(1) else "") + m.group(2))
        if v is not None:
            values.append(v)
    return values


def _alone(kind: str, text: str) -> str | None:
    """A completion that is nothing but the value (with units)."""
    t = text.strip().strip("*`\"' ").rstrip(".").strip()
    if kind == "date":
        found = _dates(t)
        return found[0][0] if len(found) == 1 and found[0][2] == t else None
    if kind == "weeks_days":
        value = _weeks_days_at(t, partial=True)
        return value if value and len(_WD_PART.findall(t)) <= 2 and len(t) < 40 else None
    m = re.fullmatch(r"([-−]?)(\d[\d,]*(?:\.\d+)?|\.\d+)\s*([a-zA-Z%µμ/²³.^·*\s-]*)", t)
    if m and len(m.group(3)) <= 20:
        return normalize_number(("-" if m.group(1) else "") + m.group(2))
    return None


def read_answer(text: str, kind: str, echo: Sequence[str] = ()) -> str | None:
    """The answer the completion states, in canonical form (a number string, MM/DD/YYYY, or
    "(W weeks, D days)"), or None; see the module docstring for the rule."""
    return _readings(text, kind, echo)[0]


def read_answer_strict(text: str, kind: str, echo: Sequence[str] = ()) -> str | None:
    """Only an explicit answer statement (rule 1) or a completion that is just the value."""
    return _readings(text, kind, echo)[1]


def _readings(text: str, kind: str, echo: Sequence[str]) -> tuple[str | None, str | None]:
    if kind not in KINDS:
        return None, None
    text = strip_echo(text.replace("−", "-"), [e for e in echo if e])
    withdrawn = [m.end() for m in _RETRACTION.finditer(text)]
    if withdrawn:
        text = text[withdrawn[-1] :]
    found, value = _last_statement(kind, text, _EXPLICIT)
    if found:
        return value, value
    alone = _alone(kind, text)
    found, value = _last_statement(kind, text, _RESULT, asides=False)
    if found:
        return value, alone
    if alone is not None:
        return alone, alone
    values = _all_values(kind, text)
    return (values[-1] if values else None), None
