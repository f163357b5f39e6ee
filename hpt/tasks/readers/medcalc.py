"""Reading a MedCalc-Bench answer (``read_answer``), as a careful human reads the completion.

Text copied from the patient note or the question (six or more consecutive words,
``echo.strip_echo``) is dropped first, so a quoted note does not supply the answer. A
*statement* is a cue followed right away by its value: "the score is 4", "CrCl = (140 - 87) *
48 / 72 = 25.2", "a total of 4 points", "the due date is 09/23/2014"; "is recommended since
the score is at least 2" states nothing (the value does not follow the cue; a comparison is
no value), and neither does a cue inside parentheses ("(age 65-74: 1 point)"). Which
statement is the answer:

1. the latest explicit answer statement: "Answer: 12.5", "the answer is 3", "final answer
   = 7", "\\boxed{3}", "#### 3", a JSON ``"answer": "3"`` or DSPy's ``[[ ## answer ## ]]``;
2. else the latest statement that names the asked quantity, or no quantity at all. A
   statement names it fully by every word of a phrase that asks for it (the question's
   "what is the patient's X", the calculator's name) or an abbreviation of them ("CrCl" for
   creatinine clearance; for a score, "the total"), in part by one of those words. One
   naming it only in part is passed over when another names it fully ("CrCl = 25.2. The
   creatinine is 1.4."), and one naming another quantity is passed over ("Score = 4.
   Annual stroke risk is 4.8%.", "Weight = 48 kg", "the normal range is 0 to 5").

With none, a completion that is nothing but the value ("12.5 mL/min", "3") is read; then, if
it makes no statement at all, one holding exactly one value of the kind that the note and
question do not give; anything else is None (unresolved), never a guess. A date or (weeks,
days) given in the patient note is an input, never the answer; "2 or more" and "65+" are
thresholds, not values. After an admitted mistake ("I made a mistake", "Correction:") what
follows states the answer; after a second look ("Wait, ...", "let me double-check") only an
explicit answer or one naming the quantity fully replaces the earlier one: a check that
confirms, or restates an input, leaves it standing. Within a statement a chain is read after
its last "=" ("1 + 1 + 2 = 4" is 4); an unevaluated sum or a range ("12-14") is no single
value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hpt.tasks.readers.cues import (
    AGAIN,
    BOXED,
    CORRECTION,
    HASHES,
    MISTAKE,
    answer_is,
    let_me,
    opening,
    that_is,
)
from hpt.tasks.readers.echo import strip_echo
from hpt.tasks.readers.medcalc_values import (
    KINDS,
    all_values,
    dates,
    only_value,
    value_at,
)

_EXPLICIT = re.compile(
    r"\[\[\s*##\s*answer\s*##\s*\]\]|\"answer\"\s*:"  # DSPy's field, a JSON key
    rf"|{BOXED}|{HASHES}|{answer_is('was')}",
    re.IGNORECASE,
)
_RESULT_NOUNS = (
    r"score|total|sum|result|value|estimate|clearance|crcl|gfr|egfr|bmi|bsa|level|gap|ratio|"
    r"deficit|dose|dosage|rate|index|interval|qtc|map|pressure|osmolality|concentration|"
    r"weight|age|date|points?|grade|class|stage|risk|count|output|volume|equivalents?|"
    r"calculation|mme|meld|apache|sofa|child-pugh|curb-65|news|gcs"
)
# A cue that states a value: a result noun with a verb, a sign or the value right after it,
# or a bare verb or sign ("is", "=", "≈", "gives").
_RESULT = re.compile(
    r"\b(?:" + _RESULT_NOUNS + r")\b(?:[^\n.;:=≈]{0,40}?"
    r"(?:\b(?:is|was|are|equals|of|at|to|comes to|would be|will be|becomes|totals?|gives)\b"
    r"|[=≈:])"
    r"|(?=\s+-?\d))"
    r"|\b(?:is|was|are|equals|comes to|totals?|gives|yields|falls on|results in)\b|[=≈]",
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
    r"therefore|thus|then|now|calculated as|calculated to be|equal to|on|at|to|~|≈)"
    r"[\s*_:\"'`(\[]*)*",
    re.IGNORECASE,
)
# A withdrawal: an admitted mistake (what follows is the new answer, however stated), or a
# second look (only a clear statement after it replaces the answer: a check may confirm).
# Narrower or wider than the other readers' (cues.RETRACTION), kept as they were: "oops"
# needs no punctuation after it, "that’s wrong" (curly) and "not right" are not read, and a
# second look includes "let me double-check", "verify" and a bare "let me correct".
_MISTAKE = (
    opening("oops", marked=False),
    MISTAKE,
    CORRECTION,
    that_is("wrong|incorrect", curly=False),
)
_SECOND_LOOK = (opening("wait"), let_me(AGAIN + "|correct|double-check|verify"))
_RETRACTION = re.compile(
    "(?P<mistake>" + "|".join(_MISTAKE) + ")|" + "|".join(_SECOND_LOOK), re.IGNORECASE
)
# "2 or more", "65+": a threshold, not a stated value.
_THRESHOLD = re.compile(
    r"[\s*_\"'`]*[-−]?[\d.,]+\s*(?:\+|(?:or|and)\s+(?:more|less|higher|lower|above|below|"
    r"greater|fewer|over|under)\b)",
    re.IGNORECASE,
)
_SENTENCE_START = re.compile(r"[.!?](?!\d)|\n")
_WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")
_STOPWORDS = frozenset(
    "what which how the a an of in on at for to and or is are was be by with from using use "
    "based according patient patients patient's his her their this that these those given "
    "calculate calculated compute computed find value values answer please provide number "
    "your you following formula equation rule".split()
)
_STATEMENT_END = re.compile(r"\n|;|[.!?](?!\d)")


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


# "What is the patient's <quantity> in terms of ...?": the quantity the question asks for.
_ASKED = re.compile(
    r"\bwhat\s+(?:is|are)\s+(?:the\s+)*(?:patient['’]?s?['’]?\s+)?(?P<q>[^?]*?)"
    r"(?=\s+(?:in terms of|in\s|using|based on|according to|if\s)|\?|$)",
    re.IGNORECASE,
)


_TALLIES = frozenset({"score", "total", "sum", "points", "criteria"})
# Words that make a statement about another quantity when it names none of the asked one:
# "Annual stroke risk is 4.8%", "Weight = 48 kg", "the normal range is 0 to 5".
_OTHER = frozenset(
    "clearance crcl gfr egfr bmi bsa level gap ratio deficit dose dosage rate index interval "
    "qtc map pressure osmolality concentration weight height age date grade class stage risk "
    "count volume creatinine sodium potassium glucose albumin calcium bilirubin heart "
    "range normal threshold cutoff reference lmp".split()
)


def asked(question: str, calculator: str = "") -> list[str]:
    """The phrases naming the asked quantity: the question's "what is the patient's X", and
    the calculator's name up to "for"/":" ("CHA2DS2-VASc Score for Atrial Fibrillation
    Stroke Risk" names the score, not the stroke risk)."""
    phrases = [m["q"] for m in _ASKED.finditer(question)]
    if calculator:
        phrases.append(re.split(r"\s+for\s+|:", calculator, maxsplit=1)[0])
    return phrases


@dataclass(frozen=True)
class Names:
    """How a completion may name the asked quantity: fully (every word of a phrase, or an
    abbreviation of its words) or in part (one of its words)."""

    abbreviations: frozenset[str] = frozenset()
    phrases: tuple[frozenset[str], ...] = ()
    words: frozenset[str] = frozenset()

    def named(self, subject: set[str]) -> int:
        """2 named fully, 1 in part, 0 not at all."""
        if subject & self.abbreviations or any(p <= subject for p in self.phrases):
            return 2
        return 1 if subject & self.words else 0


def keywords(phrases: Sequence[str]) -> Names:
    """The names of the quantity the phrases ask for: their words and the abbreviations
    their neighbours make ("creatinine clearance": crcl; "body mass index": bmi)."""
    abbreviations: set[str] = set()
    words_of: list[frozenset[str]] = []
    for phrase in phrases:
        words = [w for w in _WORD.findall(phrase.lower()) if w not in _STOPWORDS and len(w) > 2]
        if not words:
            continue
        words_of.append(frozenset(words))
        for n in (2, 3):
            for i in range(len(words) - n + 1):
                group = words[i : i + n]
                abbreviations.add("".join(w[0] for w in group))
                if n == 2:
                    abbreviations.add("".join(w[:2] for w in group))
    named: set[str] = {w for ws in words_of for w in ws}
    named |= {p for w in named for p in w.split("-") if len(p) > 2 and p not in _STOPWORDS}
    full = {a for a in abbreviations if len(a) > 2}
    if named & _TALLIES:  # a score is a tally: "the total is now 6" names it
        full |= _TALLIES
    return Names(frozenset(full), tuple(words_of), frozenset(named))


# What a statement is: an explicit answer; one naming the asked quantity fully, or in part;
# one naming no quantity; one naming another quantity.
EXPLICIT, NAMED, PART, OTHER, FOREIGN = range(5)


def _statements(
    kind: str, text: str, names: Names, inputs: frozenset[str]
) -> list[tuple[int, int, str | None]]:
    """(tier, position, value) for every statement in ``text``: a cue with, right after it,
    a value of the kind (or, for a number, a range or sum that is no single value: None).
    A value given in the question or note (a date the answer is computed from) is no
    statement of the answer."""
    out: list[tuple[int, int, str | None]] = []
    for tier_cue in ((0, _EXPLICIT), (None, _RESULT)):
        fixed, cue = tier_cue
        for m in cue.finditer(text):
            if fixed is None and _aside(text, m.start()):
                continue
            filler = _FILLER.match(text, m.end())
            start = filler.end() if filler else m.end()
            seg = _segment(text, start)
            if _COMPARISON.match(seg):
                continue
            if kind == "weeks_days":  # its tuple form opens with the bracket _FILLER skips
                seg = _segment(text, m.end())
                lead = seg.lstrip(" \t*_:\"'`[")
            else:
                lead = seg
            if not _starts_with_value(kind, lead) or _THRESHOLD.match(lead):
                continue
            # None: it states something, but no single value ("12-14", "1 + 2").
            value = value_at(kind, lead)
            if value is None and kind in ("date", "weeks_days"):
                continue  # "60 years" is no gestational age
            if value is not None and value in inputs:
                continue
            tier = fixed if fixed is not None else _tier(text, m.start(), m.end(), names)
            out.append((tier, m.start(), value))
    return out


def _starts_with_value(kind: str, lead: str) -> bool:
    """The statement's value comes first: "is 4 (...)", not "is recommended since ... 2"."""
    head = lead.lstrip(" \t*_\"'`")
    if kind == "date":
        found = dates(head[:40])
        return bool(found) and found[0][1] == 0
    if kind == "weeks_days":
        return bool(re.match(r"\(?\s*['\"]?\s*\d", head))
    if "=" in head.split("\n", 1)[0]:  # a chain: its value is after the last "="
        head = head.split("\n", 1)[0].rsplit("=", 1)[1].lstrip(" \t*_\"'`(")
    return bool(re.match(r"[-−]?(?:\d|\.\d)", head))


def _tier(text: str, cue: int, cue_end: int, names: Names) -> int:
    starts = [m.end() for m in _SENTENCE_START.finditer(text, 0, cue)]
    sentence = starts[-1] if starts else 0
    # The sentence up to the cue's verb or sign: "Hence, the GFR value is".
    subject = set(_WORD.findall(text[max(sentence, cue - 80) : cue_end].lower()))
    named = names.named(subject)
    if named:
        return 3 - named  # 1 fully, 2 in part
    # Another quantity only where the asked one is known.
    return FOREIGN if names.words and subject & _OTHER else OTHER


def _best(statements: list[tuple[int, int, str | None]]) -> tuple[bool, str | None]:
    """The answer the statements give: the latest explicit one; else the latest statement
    that names the asked quantity or no quantity, passing over one that names only part of
    it when another names it fully ("CrCl = 25.2. The creatinine is 1.4.") and one about
    another quantity ("Score = 4. Annual stroke risk is 4.8%.")."""
    explicit = [(pos, v) for t, pos, v in statements if t == EXPLICIT]
    if explicit:
        return True, max(explicit)[1]
    tiers = {t for t, _, _ in statements}
    wanted = {NAMED, OTHER} if NAMED in tiers else {NAMED, PART, OTHER}
    found = [(pos, v) for t, pos, v in statements if t in wanted]
    return (True, max(found)[1]) if found else (False, None)


def read_answer(
    text: str,
    kind: str,
    echo: Sequence[str] = (),
    quantity: Sequence[str] = (),
    given: Sequence[str] = (),
) -> str | None:
    """The answer the completion states, in canonical form (a number string, MM/DD/YYYY, or
    "(W weeks, D days)"), or None; see the module docstring for the rule. ``echo``: the
    note and question (text copied from them is not read; dates in them are inputs);
    ``quantity``: the phrases naming the asked quantity (``asked``); ``given``: the patient
    note, whose dates are inputs (the question's examples are not)."""
    return _readings(text, kind, echo, quantity, given)[0]


def read_answer_strict(
    text: str,
    kind: str,
    echo: Sequence[str] = (),
    quantity: Sequence[str] = (),
    given: Sequence[str] = (),
) -> str | None:
    """Only an explicit answer statement (rule 1) or a completion that is just the value."""
    return _readings(text, kind, echo, quantity, given)[1]


def _readings(
    text: str, kind: str, echo: Sequence[str], quantity: Sequence[str], given: Sequence[str]
) -> tuple[str | None, str | None]:
    if kind not in KINDS:
        return None, None
    text = strip_echo(text.replace("−", "-"), [e for e in echo if e])
    inputs = frozenset(v for g in given for v in all_values(kind, g)) if kind in (
        "date", "weeks_days") else frozenset()  # fmt: skip
    statements = _statements(kind, text, keywords(quantity), inputs)
    # A withdrawal ("Wait, ...", "I made a mistake") counts only when what follows states a
    # new answer: an explicit one, or one about the asked quantity, or a conclusion.
    withdrawals = list(_RETRACTION.finditer(text))
    if withdrawals:
        # After an admitted mistake, what follows states the answer; after a second look,
        # only an explicit answer or one naming the asked quantity fully (a check may
        # confirm, or restate inputs).
        last = withdrawals[-1]
        later = [st for st in statements if st[1] >= last.end()
                 and (last["mistake"] or st[0] in (EXPLICIT, NAMED))]  # fmt: skip
        found, value = _best(later)
        if found:
            explicit = any(t == EXPLICIT for t, _, _ in later)
            return value, (value if explicit else only_value(kind, text[last.end() :]))
    alone = only_value(kind, text)
    found, value = _best(statements)
    if found:
        explicit = any(t == EXPLICIT for t, _, _ in statements)
        return value, (value if explicit else alone)
    if alone is not None:
        return alone, alone
    if statements:  # it states only other quantities ("albumin concentration to 4 g/dL")
        return None, None
    # No statement at all: only a completion with one value of the kind is read, and not
    # a value the note or question gives ("take the normal albumin to be 4 g/dL").
    given_values = {v for e in echo for v in all_values(kind, e)}
    values = {v for v in all_values(kind, text) if v not in given_values}
    return (values.pop() if len(values) == 1 else None), None
