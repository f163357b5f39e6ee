"""Reading a multiple-choice answer: ``read_choice`` (and ``parse_choice``, its label);
tests/test_readers.py holds the table of completions that specifies it. Where the labels are
and what is said of them: ``choice_labels`` and ``choice_verdicts``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from hpt.tasks.readers.choice_labels import (
    LISTED,
    Mention,
    alone_at_end,
    conflict_of,
    find_mentions,
    is_own,
    only_lists_options,
    option_text,
)
from hpt.tasks.readers.choice_verdicts import (
    AFFIRMED,
    AFFIRMED_ANSWER,
    ALSO,
    ALTERNATIVE,
    BRIDGE,
    CHOOSE_CUE,
    CONCLUDE,
    DISCARD_CUE,
    GLUE,
    REJECTED,
    REMAIN_CUE,
    SINGULAR,
    TERSE,
    TERSE_BARE,
)
from hpt.tasks.readers.cues import conditional_before, in_question, last_retraction
from hpt.tasks.readers.echo import ECHOED, strip_echo


@dataclass
class _Event:
    pos: int
    tier: int  # 1: an answer statement; 2: a verdict on one option
    label: str | None  # None: several labels at once ("B or C")
    conflict: str | None = None  # a label written with another option's text: why


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
    exact = option_text(text, labels, options)
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
    mentions = find_mentions(text, labels, options)
    if only_lists_options(text, mentions, options):
        return ChoiceReading(None, f"{LISTED}: the reply lists the options and chooses none")
    events = _choice_events(text, mentions, options)
    retracted = last_retraction(text)

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
    text: str, mentions: list[Mention], options: Sequence[tuple[str, str]]
) -> list[_Event]:
    """Answer statements and verdicts, in order; marks rejected mentions on the way."""
    at = {m.start: i for i, m in enumerate(mentions)}
    # Lists: labels joined only by commas, "and", "or", "nor", "option(s)".
    # A label alone on the last line after an echoed option list is the answer, not an item.
    groups: list[list[int]] = []
    for i, m in enumerate(mentions):
        gap = (mentions[i - 1].tail, m.start - m.marked) if i else (1, 0)
        answers_list = i and is_own(mentions[i - 1], options) and alone_at_end(text, m)
        if gap[0] <= gap[1] and GLUE.fullmatch(text, *gap) and not answers_list:
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
        return not (in_question(text, pos) or conditional_before(text, pos))

    def record(tier: int, pos: int, members: list[int]) -> None:
        if tier == 0:
            for j in members:
                mentions[j].rejected_at.append(mentions[j].start)
        else:
            label = _only(mentions[j].label for j in members)
            conflict = next(
                filter(None, (conflict_of(mentions[j], options) for j in members)), None
            )
            events.append(_Event(pos, tier, label, conflict))

    # What each list's own sentence says of it: singular verbs speak of its last label only.
    own_singular: set[int] = set()
    for g in groups:
        last = mentions[g[-1]]
        # "A: wrong": the label's own colon or dash may introduce the verdict.
        terse = TERSE.match(text, last.tail) or (
            TERSE_BARE.match(text, last.tail) if last.tail == last.end > last.start + 1 else None
        )
        if terse:
            own_singular.add(g[-1])
            if live(last.start):
                tier = 2 if terse.group("word").lower() in ("correct", "right") else 0
                record(tier, last.start, [g[-1]])
            continue
        bridge = BRIDGE.match(text, last.tail)
        where = bridge.end() if bridge else last.tail
        for pattern, tier in ((REJECTED, 0), (AFFIRMED_ANSWER, 1), (AFFIRMED, 2)):
            said = pattern.match(text, where)
            if not said:
                continue
            singular = next(v for v in said.groups() if v).lower() in SINGULAR
            if singular:
                own_singular.add(g[-1])
            if live(last.start):
                record(tier, last.start, [g[-1]] if singular else g)
            break

    # Cues before a label apply to it and the rest of its list, except a last member whose
    # own sentence speaks of it ("the answer is B, and C is wrong").
    for cue, tier in ((CHOOSE_CUE, 1), (REMAIN_CUE, 2), (DISCARD_CUE, 0)):
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
    for c in CONCLUDE.finditer(text):
        hit = at.get(c.end())
        if hit is not None and live(c.end()):
            record(1, c.end(), [hit])
    # "B is correct, and so is D": a second option chosen alike makes the choice ambiguous.
    for m in mentions:
        if ALSO.search(text[max(0, m.start - 30) : m.start]):
            sentence = max(text.rfind(c, 0, m.start) for c in ".!?\n")
            for tier in sorted({e.tier for e in events if sentence < e.pos < m.start}):
                events.append(_Event(m.start, tier, None))
    return sorted(events, key=lambda e: e.pos)


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
    text: str, mentions: list[Mention], options: Sequence[tuple[str, str]]
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
            or ALTERNATIVE.search(text[max(0, m.start - 40) : m.start]) is not None
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
        if not listed and (as_label or is_own(first, options)):
            candidates.add(first.label)
    label = _only(candidates)
    if label is None:
        return ChoiceReading(None)
    conflict = next(
        filter(None, (conflict_of(m, options) for m in mentions if m.label == label)), None
    )
    return ChoiceReading(None, conflict) if conflict else ChoiceReading(label)
