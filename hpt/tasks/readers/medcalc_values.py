"""The values a MedCalc-Bench answer may be, by kind: a number (``integer``, ``decimal``), a
calendar date (``date``, canonical MM/DD/YYYY) or a gestational age (``weeks_days``, canonical
"(W weeks, D days)"); where they stand in a text, and their canonical form."""

from __future__ import annotations

import re
from datetime import date

from hpt.tasks.readers.number import normalize_number

KINDS = ("integer", "decimal", "date", "weeks_days")

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


def weeks_days(weeks: int, days: int) -> str:
    # "31 days" is 4 weeks and 3 days: every truth has fewer than 7 days.
    weeks, days = weeks + days // 7, days % 7
    return f"({weeks} weeks, {days} days)"


def _make_date(y: str, m: str, d: str) -> str | None:
    try:
        return date(int(y), int(m), int(d)).strftime("%m/%d/%Y")
    except ValueError:
        return None


def dates(text: str) -> list[tuple[str, int, str]]:
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


def number_at(segment: str) -> str | None:
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


def weeks_days_at(segment: str, partial: bool) -> str | None:
    m = _WD_FULL.search(segment)
    if m:
        w, d = (m.group("w1"), m.group("d1")) if m.group("w1") else (m.group("w2"), m.group("d2"))
        return weeks_days(int(w), int(d))
    if not partial:
        return None
    p = _WD_PART.search(segment)
    if not p or re.search(r"[+/]\s*$|\d\s+$", segment[: p.start()]):
        return None  # "4+3 weeks", "4 3/7 weeks": a form this reader does not take apart
    n = int(p.group("n"))
    return weeks_days(n, 0) if p.group("unit").lower().startswith("w") else weeks_days(0, n)


def value_at(kind: str, segment: str) -> str | None:
    if kind == "date":
        found = dates(segment)
        return found[0][0] if found else None
    if kind == "weeks_days":
        return weeks_days_at(segment, partial=True)
    return number_at(segment)


def all_values(kind: str, text: str) -> list[str]:
    if kind == "date":
        return [d for d, _, _ in dates(text)]
    if kind == "weeks_days":
        out = []
        for m in _WD_FULL.finditer(text):
            w, d = (
                (m.group("w1"), m.group("d1")) if m.group("w1") else (m.group("w2"), m.group("d2"))
            )
            out.append(weeks_days(int(w), int(d)))
        return out
    values = []
    for m in _NUMBER.finditer(text):
        v = normalize_number(("-" if m.group(1) else "") + m.group(2))
        if v is not None:
            values.append(v)
    return values


def only_value(kind: str, text: str) -> str | None:
    """A completion that is nothing but the value (with units)."""
    t = text.strip().strip("*`\"' ").rstrip(".").strip()
    if kind == "date":
        found = dates(t)
        return found[0][0] if len(found) == 1 and found[0][2] == t else None
    if kind == "weeks_days":
        value = weeks_days_at(t, partial=True)
        return value if value and len(_WD_PART.findall(t)) <= 2 and len(t) < 40 else None
    m = re.fullmatch(r"([-−]?)(\d[\d,]*(?:\.\d+)?|\.\d+)\s*([a-zA-Z%µμ/²³.^·*\s-]*)", t)
    if m and len(m.group(3)) <= 20:
        return normalize_number(("-" if m.group(1) else "") + m.group(2))
    return None
