"""Reading the answer of a free-text task (a translation, a summary) out of a completion.

What is scored is the answer the model gives, not its whole completion: reasoning written
before a translation cuts its sentence BLEU by half or more. ``extract_answer`` applies these
rules in order; the first that finds a non-empty answer decides:

1. A labelled answer. A label is a task noun ("Translation", "French", "Traduction";
   "Summary", "Résumé") with up to two words before it ("Final summary", "French
   translation", "Voici la traduction"), perhaps "of the dialogue" or "(in French)" after
   it, and a colon, at the start of a line or sentence, markdown allowed
   (``**Translation:**``, ``**Summary**:``, ``- Summary:``; ``## Summary`` or
   ``**Summary**`` on a line of its own); also "Here is / Here's / Below is / This is ...
   <noun> ...:" and "<noun> is / would be / reads:" anywhere in a line. The LAST label wins.
   Its answer starts after the label, or at the next paragraph when nothing follows on the
   label's line; it is the quoted span when it opens with a quote (« », " ", “ ”, ' '),
   else the text to the end of the paragraph, stopping at a line that opens a new "Word:"
   (a "Note:" after the answer).
2. Text quoted right after a cue phrase, a colon or comma between them allowed: "the
   translation is « … »", "in French: "…"", "In French, this would be “…”" (IWSLT); "the
   summary is "…"", "In short, "…"" (SAMSum). The last one wins.
3. The final paragraph, when the completion has several and an earlier one is reasoning (it
   opens "Let's", "Step", "First", "Okay", "Sure", "Key points", "I'll", ...) or the
   completion says "step by step"; for IWSLT, whose answer (one TED segment) is one
   paragraph, whenever there are several. Paragraphs are separated by blank lines, or by
   line breaks in a completion without a blank line. Closing remarks ("Note...", "I
   hope...", "Let me know...", "This translation/summary/version...") are never the answer.
4. Otherwise the completion is the answer as it is.

Each answer then loses markdown bold, a leading label and one pair of wrapping quotes
(``clean_output``). A task may pass over candidates that are plainly not an answer: IWSLT
passes over text that reads as English (see ``hpt.tasks.iwslt``) while any rule has a
candidate that does not, so French wins over English reasoning; when every candidate reads
as English, the rules decide alone.

Copies are not answers: ``drop_runs`` cuts out every run of N or more consecutive words found
in the prompt's input (``echo.copied_runs``, on ``words``), with the punctuation glued to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache

from hpt.tasks.readers.echo import copied_runs, runs

_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:summary|french|translation|traduction)(?:\*\*)?\s*:\s*(?:\*\*)?\s*",
    re.IGNORECASE,
)
_PAIRS = {'"': '"', "'": "'", "«": "»", "“": "”"}


def clean_output(completion: str) -> str:
    """The answer text: a leading "Summary:"/"French:" label and one pair of wrapping quotes
    removed; nothing else is touched."""
    text = _LABEL.sub("", completion.strip(), count=1).strip()
    if len(text) >= 2 and _PAIRS.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    return text


# -- extraction ----------------------------------------------------------------------------

_BOLD = r"(?:\*{1,2}|_{1,2})"
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# A line inside an answer that opens a new "Word:" (a note, an explanation) ends the answer.
_NEW_FIELD = re.compile(
    rf"\n[ \t]*{_BOLD}?[ \t]*(?:[A-Z][\w'’-]*(?:[ \t]+[\w'’-]+){{0,2}}[ \t]*{_BOLD}?[ \t]*:"
    r"|\((?:note|literally)\b)",
    re.IGNORECASE,
)
_OPENERS = {"«": "»", '"': '"', "“": "”", "'": "'"}
_REASONING = re.compile(
    r"^\W*(?:let(?:'|’)?s\b|let me\b|step\b|first(?:ly)?\b|okay\b|ok\b|sure\b|alright\b"
    r"|i(?:'|’)ll\b|i (?:will|need|am going|would)\b|(?:the )?(?:key|main) "
    r"(?:points?|ideas?|events?|phrases?|terms?)\b|participants\b|break(?:ing)? (?:it )?down"
    r"|analy[sz]|identify\b|understand)",
    re.IGNORECASE,
)
_CLOSING = re.compile(
    r"^\W*(?:notes?\b|i hope\b|hope this\b|let me know\b|feel free\b"
    r"|if you (?:need|want|have|would)\b|this (?:translation|summary|version)\b)",
    re.IGNORECASE,
)


@cache
def _label_patterns(nouns: str) -> tuple[re.Pattern[str], ...]:
    noun = rf"(?:{nouns})"
    start = r"(?:^|(?<=[.!?»\"”)\]])[ \t]+)[ \t]*(?:#{1,6}[ \t]*|>[ \t]*|[-+•][ \t]+|\*[ \t]+)?"
    words = r"(?:(?:the|my|a|your)[ \t]+)?(?:[\w'’-]+[ \t]+){0,2}?"
    # "Summary of the dialogue:", "Translation (in French):", "Translation into French:"
    tail = (
        r"(?:[ \t]+(?:of|for)[ \t]+(?:the|this)[ \t]+(?:dialogue|conversation|chat|text|sentence)"
        r"|[ \t]+\(?(?:in|into)[ \t]+french\)?|[ \t]+\(french\))?"
    )
    flags = re.IGNORECASE | re.MULTILINE
    return (
        # "Translation:", "**Final summary:**", "**Summary**:", "- French translation:"
        re.compile(
            rf"{start}{_BOLD}?[ \t]*(?P<label>{words}{noun}{tail})[ \t]*{_BOLD}?[ \t]*:"
            rf"(?:[ \t]*{_BOLD}(?!\w))?",
            flags,
        ),
        # "## Final Summary" or "**Translation**" on a line of its own
        re.compile(
            rf"^[ \t]*(?:#{{1,6}}[ \t]*{_BOLD}?|{_BOLD})[ \t]*(?P<label>{words}{noun}{tail})"
            rf"[ \t]*{_BOLD}?[ \t]*:?[ \t]*{_BOLD}?[ \t]*$",
            flags,
        ),
        # "Here's the French translation:", "Below is a concise summary of the dialogue:"
        re.compile(
            r"\b(?P<label>(?:here(?:'s|’s| is| are)|below is|this is)\b[^\n:]{0,60}?"
            rf"\b{noun}\b[^\n:]{{0,40}}?)[ \t]*{_BOLD}?:(?:[ \t]*{_BOLD}(?!\w))?",
            flags,
        ),
        # "the final translation is:", "The summary would be:"
        re.compile(
            rf"\b(?P<label>{noun}[ \t]+(?:is|would be|will be|could be|reads)"
            rf"(?:[ \t]+as follows)?)[ \t]*{_BOLD}?:(?:[ \t]*{_BOLD}(?!\w))?",
            flags,
        ),
    )


@cache
def _cue_pattern(cues: str) -> re.Pattern[str]:
    return re.compile(
        r"(?P<cue>(?:\b(?:the|a|my)[ \t]+)?(?:\b(?:final|full|complete|french|refined|concise)"
        rf"[ \t]+)?\b(?:{cues}))[ \t]*[:,]?[ \t]*{_BOLD}?[ \t]*(?P<open>[«\"“]|(?<!\w)')",
        re.IGNORECASE,
    )


def _quoted(text: str, at: int) -> tuple[str, int] | None:
    """The text inside the quote that opens at ``text[at]``, and where the span ends; None
    when the quote is not closed within the text."""
    opener = text[at]
    closer = _OPENERS.get(opener)
    if closer is None:
        return None
    if opener == "'":
        close = re.compile(r"'(?!\w)").search(text, at + 1)
        end = close.start() if close else -1
    else:
        end = text.find(closer, at + 1)
        if end < 0 and opener == "“":
            end = text.find('"', at + 1)
    if end < 0:
        return None
    return text[at + 1 : end], end + 1


def _strip_bold(text: str) -> str:
    text = text.strip()
    for mark in ("**", "__", "*", "_"):
        if len(text) > 2 * len(mark) and text.startswith(mark) and text.endswith(mark):
            text = text[len(mark) : -len(mark)].strip()
    return text


def _answer_after(text: str, pos: int) -> str:
    """The answer a label ending at ``pos`` introduces."""
    line_end = text.find("\n", pos)
    line_end = len(text) if line_end < 0 else line_end
    start = pos
    if not text[pos:line_end].strip(" \t*_"):
        # The label stands alone: its answer is the next paragraph.
        rest = re.compile(r"\S").search(text, line_end)
        if rest is None:
            return ""
        start = rest.start()
    brk = _PARAGRAPH_BREAK.search(text, start)
    body = text[start : brk.start() if brk else len(text)]
    lead = len(body) - len(body.lstrip(" \t*_"))
    if lead < len(body) and body[lead] in _OPENERS:
        inside = _quoted(body, lead)
        if inside is not None:
            return inside[0].strip()
    stop = _NEW_FIELD.search(body)
    return _strip_bold(body[: stop.start()] if stop else body)


@dataclass
class Extracted:
    """The answer read from a completion and how it was found (``rule`` is None when the
    completion was the answer as it is)."""

    text: str
    rule: str | None = None
    notes: list[str] = field(default_factory=list)


def _clean(text: str) -> str:
    return clean_output(_strip_bold(text))


def extract_answer(
    completion: str,
    *,
    nouns: str,
    cues: str,
    reasoning_only: bool = True,
    passed_over: Callable[[str], bool] | None = None,
) -> Extracted:
    """The answer in ``completion`` by the module's rules. ``nouns`` and ``cues`` are regex
    alternations (the label nouns; the words quoted answers follow); ``reasoning_only``
    takes the final paragraph only when an earlier one is reasoning; ``passed_over`` names
    candidates to skip while another one is left."""
    text = completion.replace("\r\n", "\n").strip()
    # Per rule, in order: its (answer, how it was found) candidates, in completion order.
    rules: list[list[tuple[str, str]]] = []

    labels: list[tuple[int, int, str]] = []
    for pattern in _label_patterns(nouns):
        for m in pattern.finditer(text):
            label = " ".join(m.group("label").split())
            labels.append((m.start("label"), m.end(), f"answer after '{label}:'"))
    labels.sort()
    rules.append([(_clean(_answer_after(text, end)), rule) for _, end, rule in labels])

    quoted: list[tuple[str, str]] = []
    for m in _cue_pattern(cues).finditer(text):
        inside = _quoted(text, m.start("open"))
        if inside is not None and "\n\n" not in inside[0]:
            cue = " ".join(m.group("cue").split()).rstrip(" :,*")
            quoted.append((_clean(inside[0]), f"text quoted after '{cue}'"))
    rules.append(quoted)

    paragraphs = [p.strip() for p in _PARAGRAPH_BREAK.split(text) if p.strip()]
    if len(paragraphs) == 1:
        paragraphs = [line.strip() for line in text.split("\n") if line.strip()]
    if len(paragraphs) > 1:
        body = [p for p in paragraphs if not _CLOSING.match(p)] or paragraphs
        reasoning = "step by step" in text.lower() or any(
            _REASONING.match(p) for p in paragraphs[:-1]
        )
        if reasoning or not reasoning_only:
            rules.append([(_clean(p), "final paragraph") for p in body])

    found = [cands for cands in ([c for c in rule if c[0]] for rule in rules) if cands]
    if passed_over is not None:
        for cands in found:
            keep = [i for i, (answer, _) in enumerate(cands) if not passed_over(answer)]
            if keep:
                answer, rule = cands[keep[-1]]
                skipped = len(cands) - 1 - keep[-1]
                notes = [f"passed over {skipped} later candidate(s) in English"] if skipped else []
                return Extracted(answer, rule, notes)
    if found:
        answer, rule = found[0][-1]
        return Extracted(answer, rule)
    return Extracted(clean_output(text))


# -- copies --------------------------------------------------------------------------------

# Words in any script ("été"), apostrophes kept inside them and compared straight.
_WORD = re.compile(r"\w+(?:['’]\w+)*")
_EMPTY_QUOTES = re.compile(r"«[^\w»]*»|\"[^\w\"]*\"|“[^\w”]*”")
_LINE_JUNK = re.compile(r"^[\s\-–—>→=:;,.]+")


def _fold(word: str) -> str:
    return word.lower().replace("’", "'")


def words(text: str) -> list[str]:
    """Lower-cased words, apostrophes kept inside them; what copies are compared on."""
    return [_fold(m.group()) for m in _WORD.finditer(text)]


def _tidy(text: str) -> str:
    text = _EMPTY_QUOTES.sub("", text)
    lines = [" ".join(_LINE_JUNK.sub("", line).split()) for line in text.split("\n")]
    return clean_output("\n".join(line for line in lines if re.search(r"\w", line)))


def drop_runs(text: str, sources: Sequence[Sequence[str]], min_words: int) -> tuple[str, int]:
    """``text`` without every run of ``min_words`` or more consecutive words that also occurs,
    consecutively, in one of ``sources`` (word lists), and how many words went."""
    found = list(_WORD.finditer(text))
    grams = [frozenset(runs(source, min_words)) for source in sources]
    copied = copied_runs([_fold(m.group()) for m in found], grams, min_words)
    if not copied:
        return text, 0
    out, at = [], 0
    for i, j in copied:
        # Punctuation and quotes glued to the copied words go with them.
        start, end = found[i].start(), found[j].end()
        while start > at and not text[start - 1].isspace() and not text[start - 1].isalnum():
            start -= 1
        while end < len(text) and not text[end].isspace() and not text[end].isalnum():
            end += 1
        out.append(text[at:start])
        at = end
    out.append(text[at:])
    return _tidy("".join(out)), sum(j - i + 1 for i, j in copied)
