"""Reading a prompt-selector's reply as a careful human reads it: which level it chooses.

The selector is asked for "only the index" of a strategy; small models answer in prose, name
the strategy in words, echo the list, argue about levels already tried, or offer things that
are no strategy at all. ``parse_level`` documents the rules; ``Names`` how a strategy is
recognised by its name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                 "ten")  # fmt: skip
_SEP = r"[\s\-_‐‑–]*"  # between a name's words: "zero-shot", "zero shot", "zeroshot"
_COT = rf"(?:chain{_SEP}of{_SEP}thoughts?|cot)"
_GENERIC = rf"(?:{_SEP}(?:prompting|prompts?))"
_QUOTE = "\"'“”‘’«»"
_STOP_FIRST = r"(?:The|This|That|These|Those|A|An|My|Our|Your|Its|Their|Each|Every|Any|Some|Such)"
# A strategy-like name: capitalised words ending in "Prompting" ("Sensory Implicit Prompting").
_TITLED = re.compile(
    rf"\b(?!{_STOP_FIRST}\b)[A-Z][\w'’-]*(?:\s+(?:[A-Z][\w'’-]*|of|to|and|for|in|on|with)){{0,5}}"
    r"\s+Prompt(?:ing|s)?\b"
)
# ... or, for a numbered line or beside a number, capitalised words up to a colon or the line's
# end ("3. Socratic Questioning: ...").
_TITLED_ITEM = re.compile(
    rf"(?!{_STOP_FIRST}\b)[A-Z][\w'’-]*(?:[ \t]+(?:[A-Z][\w'’-]*|of|to|and|for|in|on|with)){{1,5}}"
    r"[ \t]*(?::|$)",
    re.MULTILINE,
)


def _word(word: str) -> str:
    """One word of a name: number words and digits alike; long words in any inflection
    ("Generate Knowledge", "Generating Knowledge")."""
    if word in _NUMBER_WORDS:
        return f"(?:{word}|{_NUMBER_WORDS.index(word)})"
    if word.isdigit() and int(word) < len(_NUMBER_WORDS):
        return f"(?:{word}|{_NUMBER_WORDS[int(word)]})"
    if len(word) >= 6 and word.isalpha():
        return re.escape(re.sub(r"(?:ed|ing|es|s|e|y)$", "", word)) + r"\w{0,4}"
    return re.escape(word)


def _initial(word: str) -> str:
    if word in _NUMBER_WORDS:
        return f"[{word[0]}{_NUMBER_WORDS.index(word)}]"
    return re.escape(word[0])


def _patterns(label: str) -> tuple[str, str | None]:
    """The full name's pattern and, where it has three letters or more, its acronym's."""
    words = [w for w in re.split(r"[\s\-_]+", label.lower()) if w]
    if words and words[-1] in ("prompting", "prompt"):
        words.pop()
    parts: list[str] = []
    initials: list[str] = []
    letters = 0
    i = 0
    while i < len(words):
        if words[i : i + 3] == ["chain", "of", "thought"] or words[i] == "cot":
            parts.append(_COT)
            initials.append("cot")
            letters += 3
            i += 3 if words[i] == "chain" else 1
            continue
        parts.append(_word(words[i]))
        initials.append(_initial(words[i]))
        letters += 1
        i += 1
    # One word alone ("Role") is too common to be a name without its "prompting".
    full = _SEP.join(parts) + (_GENERIC if len(words) == 1 else _GENERIC + "?")
    if letters + 1 < 3:
        return full, None
    p = "p" if letters < 3 else "p?"  # "GKP", "LTM"; never two letters ("RP", "SC")
    return full, r"[\-_]?".join(initials) + p + _GENERIC + "?"


class Names:
    """The ladder's strategies as a reply may name them.

    A label ("Zero-shot Chain of Thought prompting", the selector's description up to its
    colon) is matched by all its words, in order, as a whole: any case; words joined by space,
    hyphen, underscore or nothing; a trailing "prompting"/"prompt" optional (required when only
    one word is left: "Role Prompting", never a bare "role"); number words and digits alike
    ("3-shot" is "Three-shot"); "Chain of Thought" also as "CoT"; words of six letters or more
    in any inflection ("Generate Knowledge"). An acronym of the words' initials ("CoT" kept
    whole, an optional trailing "P") names it too when it has three letters or more and is
    written with a capital: "ZS-CoT", "3S-CoT", "LtM", "GKP". "Chain of Thought" alone is no
    strategy's whole name: it names neither Zero-shot nor Three-shot CoT. Where two labels
    match overlapping text, the longer match wins."""

    def __init__(self, labels: Sequence[str]) -> None:
        self._patterns: list[tuple[int, re.Pattern[str], bool]] = []
        for level, label in enumerate(labels, 1):
            if not label.strip():
                continue
            full, acronym = _patterns(label)
            self._patterns.append((level, re.compile(rf"(?<!\w){full}(?!\w)", re.I), False))
            if acronym:
                pattern = re.compile(rf"(?<!\w){acronym}(?!\w)", re.I)
                self._patterns.append((level, pattern, True))

    def find(self, text: str) -> list[tuple[int, int, int]]:
        """(start, end, level) of every name in ``text``, left to right, none overlapping."""
        found = [
            (m.start(), m.end(), level)
            for level, pattern, acronym in self._patterns
            for m in pattern.finditer(text)
            if not acronym or any(c.isupper() for c in m.group(0))
        ]
        found.sort(key=lambda f: (f[0], f[0] - f[1]))
        kept: list[tuple[int, int, int]] = []
        for f in found:
            if not kept or f[0] >= kept[-1][1]:
                kept.append(f)
        return kept


@dataclass(frozen=True)
class _Ref:
    """A reference to a level (or, with no levels, to something offered as a strategy that is
    none of the ladder's). ``start`` is where it begins to be said: a choice's verb."""

    start: int
    end: int
    levels: frozenset[int]
    choice: bool
    conflict: bool = False


# A numbered line: "1. Role Prompting: ...", "**2)** Zero-shot".
_LIST_ITEM = re.compile(r"^[ \t]*[(\[]?(\d+)[ \t]*[.):\]][ \t]*(\S.*)$", re.MULTILINE)
# The whole reply is a number: "3", "**3**", "3.", "(3)" (emphasis is dropped first).
_LONE = re.compile(r"^[\s_\"'(\[]*(-?\d+)[\s_\"').\]]*$")
# A number alone on its line ("4\n\nExplanation: ...", "... so my pick is:\n\n4").
_LONE_LINE = re.compile(r"^[ \t]*[_\"'(\[]*(\d+)[ \t_\"').\]]*$", re.MULTILINE)
_NUMBER = re.compile(r"(\d+)(?!\w|[.,]\d|-\w)")
_WORD_NUMBER = re.compile(r"(" + "|".join(_NUMBER_WORDS[1:]) + r")(?![\w-])", re.I)
_NOUN = r"(?:index(?:es)?|indices|strateg(?:y|ies)|levels?|options?|approach(?:es)?|methods?"
_NOUN += r"|techniques?|number)"
_NOUN_BEFORE_WORD = re.compile(rf"\b{_NOUN}\s+$", re.I)  # "option two", not "is one that"
# A stated choice: "I choose 3", "my answer: 1", "I would suggest using ...".
_VERB_CUE = re.compile(
    r"\b(?:choos(?:e|ing)|chose|chosen|select(?:ed|ing|ion)?|pick(?:ed|ing)?|recommend(?:ed"
    r"|ing|ation)?|suggest(?:ed|ing|ion)?|go(?:ing)? with|opt(?:ing)? for|prefer(?:red)?"
    r"|(?P<answer>answer|choice|decision))\b",
    re.I,
)
# ... or "the best index is 5", "the most effective prompting strategy would be: ...".
_BEST_CUE = re.compile(
    r"\b(?:best|most\s+(?:effective|suitable|appropriate|promising)|optimal|ideal)\b"
    r"(?P<what>[^.!?\n]{0,40}?)(?:\bis\b|\bwould be\b|\bwill be\b|:)",
    re.I,
)
_STRATEGY_WORD = re.compile(r"strateg|prompt|approach|method|technique|index|level", re.I)
# The range of levels asked for, echoed ("(1-5)", "[1 to 5]"): no level.
_RANGE = r"[(\[]\s*\d+\s*(?:[-–—]|to)\s*\d+\s*[)\]]"
# What may stand between a choice's verb and what it chooses.
_FILLER = re.compile(
    rf"(?:[\s:=#>\-–—]+|{_RANGE}|no\.|(?:is|are|would|will|be|indeed|clearly|definitely"
    r"|probably|likely|then|the|a|an|to|use|using|apply|applying|employ|go|with|for|number|index|strategy|level"
    r"|option|approach|method|technique|prompting|prompt)\b)*",
    re.I,
)
# A level's noun and then its number: "Strategy: 3", "option 1", "levels 1 and 2", "#4"; the
# range asked for may stand between ("Index (1-5): 3").
_NAMED = re.compile(
    rf"(?:\b{_NOUN}\b(?:\s*{_RANGE})?|#|\bno\.)(?:[\s:=#\-–—]|\bis\b|\bwould be\b)*", re.I
)
_OPENERS = re.compile(rf"[\s{_QUOTE}(\[]*")
_OPENERS_INLINE = re.compile(rf"[ \t{_QUOTE}(\[]*")
_LETTER = re.compile(rf"[A-Z](?:[.):]|\s*[{_QUOTE}]|\s*$)")
_JOIN = re.compile(
    rf"\s*(?:,|/|&|\bor\b|\band\b)\s*(?:(?:maybe|perhaps|possibly)\s+)?(?:{_NOUN}\s*)?", re.I
)
# What stands beside a number: "3: Least-to-most", "3 (Role Prompting)", "3 - 'Sensory ...'".
# A full stop counts too: "the strategy is 1. Zero-shot Chain of Thought" pairs 1 with a name.
_BESIDE = re.compile(rf"[ \t{_QUOTE})\]]*(?:[:(,\-–—]|\.(?=[ \t]))")
# ... and beside a name: "Least-to-most (3)", "Zero-shot CoT (index 2)", "the least-to-most
# prompt, which is 3".
_PAIRED = re.compile(
    rf"[ \t{_QUOTE}]*(?:[(\[]\s*(?:(?:{_NOUN}|#|no\.)\s*)?(\d+)\s*[)\]]"
    rf"|,?\s*(?:which|that)\s+(?:is|would be)\s+(?:{_NOUN}\s*|#|no\.\s*)?(\d+)(?![\w.]\w))",
    re.I,
)
# Said as tried, failed or rejected: "option 1 did not work", "strategy 2 was already tried".
_FAILED = re.compile(
    rf"[ \t){_QUOTE}]*(?:\([^()\n]{{0,80}}\))?[ \t]*(?:prompting\s+|prompt\s+)?"
    r"(?:(?:has|have|had|was|were|is|are|did|does|do|will|would|could|can|already|also|been"
    r"|clearly|previously|before)\s+)*"
    r"(?:not\b|never\b|\w+n['’]t\b|failed\b|fails\b|tried\b|attempted\b|ineffective\b"
    r"|unsuccessful\b|insufficient\b|ruled out\b|rejected\b|excluded\b|no longer\b)",
    re.I,
)
# ... or, in the three words before it: "not 2", "instead of 3", "rather than option 4",
# "I would not choose 2", "better than 2", "after trying Role Prompting".
_REJECTING = re.compile(
    r"\b(?:not|never|instead\s+of|rather\s+than|other\s+than|than|except|excluding|besides"
    r"|apart\s+from|unlike|avoid(?:ing)?|skip(?:ping)?|tried|trying|attempted)\b|n['’]t\b",
    re.I,
)
_CLAUSE = re.compile(r"[.!?;,\n]|\b(?:but|so|thus|therefore|hence|because|since|while)\b", re.I)
# Before a choice, in its sentence: an alternative or a fallback to an earlier one, not a
# revision of it.
_HEDGE = re.compile(r"\b(?:or|maybe|perhaps|alternatively|possibly|otherwise|unless|if)\b", re.I)


def parse_level(answer: str, m: int, labels: Sequence[str] = ()) -> int | None:
    """The level a selector reply chooses, read as a careful human reads it; None (a
    hallucination) when it chooses no level of 1..m, or several.

    - A reply that is only a number ("3", "**3**", "(3)") is that number, and a number alone
      on its line is the choice whatever reasons follow ("4\\n\\nExplanation: ...") or lead
      to it; several different such numbers are a column of numbers, no choice.
    - A strategy named by its name (see ``Names``; ``labels`` are the ladder's names in level
      order) is that level: "I would suggest using the Zero-shot Chain of Thought prompt" is 2.
    - Elsewhere a number is a level only where it is said to be one: after a choice ("I choose
      3", "my answer: 1", "the best index is 5"), after a level's noun ("Strategy: 3",
      "option 1", "levels 1 and 2", and past the range asked for: "Index (1-5): 3"), or as a
      reply's only numbered line ("2. Zero-shot").
      Numbers in prose ("12 apples") are not levels, nor is the numbering of a list; the lines
      of an echoed strategy list ("1. Role Prompting ... 5. Generated Knowledge", each number
      beside its own strategy) are dropped.
    - What a choice names may be no strategy: a quoted thing, an answer option ("A."), a
      capitalised "... Prompting" that is none of the ladder's ("3. \\"Sensory Implicit
      Prompting\\"", 'the strategy is "Choose the answer: D"'). A number beside such a name,
      or beside another strategy's name ("1. Zero-shot Chain of Thought", "I choose 3:
      Least-to-most", "Least-to-most (3)"), is a conflict: a hallucination, whatever else the
      reply says; a name and a different number that are not beside each other are read by
      the next two rules.
    - A level said to be tried, failed or rejected ("option 1 did not work", "not 2", "instead
      of 3", "rather than option 4", "I would not choose 2", "better than 2") is not chosen.
    - The last stated choice wins over levels merely mentioned ("Option 1 did not work
      before, so the best index is 5" is 5) and over earlier choices ("I choose 2. On second
      thought, I choose 3" is 3) - unless it is offered as an alternative or fallback to
      them ("I choose 2, or maybe 3"; "I choose 2. If that fails, I choose 4"): undecided.
      Alternatives in one breath ("I choose 2 or 3") are undecided too.
    - With no stated choice, the levels mentioned must be one ("Strategy: 3"); several, or a
      level beside something that is no strategy, are a hallucination."""
    text = re.sub(r"[*`]", "", answer)  # markdown emphasis and code marks
    lone = _LONE.match(text)
    if lone:
        return _valid(int(lone.group(1)), m)
    reading = _Reading(text, Names(labels))
    refs = sorted(reading.references(), key=lambda r: r.start)
    choices = [r for r in refs if r.choice]
    if choices:
        last = choices[-1]
        for earlier in choices[:-1]:
            sentence = re.split(r"[.!?\n]", reading.text[earlier.end : last.start])[-1]
            if earlier.levels != last.levels and _HEDGE.search(sentence):
                return None
        return _level(last, m)
    if any(r.conflict or not r.levels for r in refs):
        return None
    levels = {level for r in refs for level in r.levels}
    return _valid(levels.pop(), m) if len(levels) == 1 else None


def _level(ref: _Ref, m: int) -> int | None:
    if ref.conflict or len(ref.levels) != 1:
        return None
    return _valid(next(iter(ref.levels)), m)


def _valid(level: int, m: int) -> int | None:
    return level if 1 <= level <= m else None


class _Reading:
    """One reply's references to levels, found in order of precedence: each number or name
    belongs to the first reference that claims it."""

    def __init__(self, text: str, names: Names) -> None:
        self.names = names
        self.text = self._drop_echo(text)
        self.found = {start: (end, level) for start, end, level in names.find(self.text)}
        self.titled = [
            t for t in _TITLED.finditer(self.text)
            if not any(s < t.end() and t.start() < e for s, (e, _) in self.found.items())
        ]  # fmt: skip
        self.claimed: set[int] = set()  # starts of the numbers and names already read

    def _drop_echo(self, text: str) -> str:
        items = list(_LIST_ITEM.finditer(text))
        if len(items) < 2:
            return text
        for item in items:  # blanked, so that positions stay where they were
            if self._leading_name(item.group(2)) == int(item.group(1)):
                text = text[: item.start()] + " " * len(item.group(0)) + text[item.end() :]
        return text

    def _leading_name(self, text: str) -> int | None:
        """The level of the strategy ``text`` begins by naming, if it does."""
        found = self.names.find(text.lstrip(_QUOTE + " "))
        return found[0][2] if found and found[0][0] == 0 else None

    def references(self) -> list[_Ref]:
        return [r for r in self._candidates() if r is not None and not self._rejected(r)]

    def _candidates(self) -> Iterator[_Ref | None]:
        yield from self._numbered()
        for cue in self._cues():
            yield self._chosen(cue)
        for named in _NAMED.finditer(self.text):
            words = bool(_NOUN_BEFORE_WORD.search(named.group(0)))
            yield self._number_ref(named.start(), named.end(), choice=False, words=words)
        for start, (end, level) in self.found.items():
            if start not in self.claimed:
                yield self._name_ref(start, end, level, choice=False)
        for titled in self.titled:
            if titled.start() not in self.claimed:
                yield _Ref(titled.start(), titled.end(), frozenset(), choice=False)

    def _numbered(self) -> Iterator[_Ref]:
        """Numbers alone on their lines, and numbered lines: one of either is a choice;
        several different ones are a list, whose numbers are no levels."""
        lone = list(_LONE_LINE.finditer(self.text))
        self.claimed.update(line.start(1) for line in lone)
        if len({int(line.group(1)) for line in lone}) == 1:  # several: a list of numbers
            line = lone[-1]
            yield _Ref(line.start(), line.end(1), frozenset({int(line.group(1))}), choice=True)
        items = list(_LIST_ITEM.finditer(self.text))
        for item in items:
            self.claimed.add(item.start(1))
        if len(items) != 1:
            return
        item = items[0]
        level = int(item.group(1))
        beside = self._beside(item.start(2), level)
        if beside is not None:
            yield _Ref(item.start(), beside[0], frozenset({level}), True, conflict=beside[1])
        elif not self.text.replace(item.group(0), "").strip():
            yield _Ref(item.start(), item.end(1), frozenset({level}), choice=True)

    def _cues(self) -> Iterator[tuple[int, int, bool]]:
        """(where a choice is said, where what it chooses may begin, whether that may be
        something that is no strategy)."""
        for verb in _VERB_CUE.finditer(self.text):
            yield verb.start(), verb.end(), verb.group("answer") is None
        for best in _BEST_CUE.finditer(self.text):
            yield best.start(), best.end(), bool(_STRATEGY_WORD.search(best.group("what")))

    def _chosen(self, cue: tuple[int, int, bool]) -> _Ref | None:
        start, after, alien_ok = cue
        filler = _FILLER.match(self.text, after)
        at = filler.end() if filler else after
        words = bool(_NOUN_BEFORE_WORD.search(self.text[after:at]))
        opened = _OPENERS.match(self.text, at)
        quoted = opened is not None and any(c in _QUOTE for c in opened.group(0))
        at = opened.end() if opened else at
        if at in self.found:
            if at in self.claimed:
                return None
            end, level = self.found[at]
            return self._name_ref(start, end, level, choice=True, name_at=at)
        ref = self._number_ref(start, at, choice=True, words=words)
        if ref is not None or not alien_ok or at in self.claimed:
            return ref
        titled = next((t for t in self.titled if t.start() == at), None)
        if titled is not None:
            self.claimed.add(at)
            return _Ref(start, titled.end(), frozenset(), choice=True)
        letter = _LETTER.match(self.text, at)
        if letter or (quoted and at < len(self.text)):
            return _Ref(start, letter.end() if letter else at, frozenset(), choice=True)
        return None

    def _number_ref(self, start: int, at: int, *, choice: bool, words: bool) -> _Ref | None:
        """The number, or the numbers joined by "or"/"and"/",", at ``at``, and what stands
        beside the last of them."""
        levels: list[int] = []
        end = at
        while True:
            number = _NUMBER.match(self.text, at)
            word = None if number or not words else _WORD_NUMBER.match(self.text, at)
            if (number is None and word is None) or at in self.claimed:
                break
            self.claimed.add(at)
            if number:
                levels.append(int(number.group(1)))
                end = number.end()
            elif word:
                levels.append(_NUMBER_WORDS.index(word.group(1).lower()))
                end = word.end()
            join = _JOIN.match(self.text, end)
            if join is None:
                break
            at = join.end()
        if not levels:
            return None
        beside = _BESIDE.match(self.text, end)
        named = self._beside(beside.end(), levels[-1]) if beside else None
        if named is not None:
            end, conflict = named
            return _Ref(start, end, frozenset(levels), choice, conflict=conflict)
        return _Ref(start, end, frozenset(levels), choice)

    def _beside(self, at: int, level: int) -> tuple[int, bool] | None:
        """(end, conflict) of a name at ``at`` standing beside the number ``level``: a
        different strategy's name, or a strategy-like name, quoted or titled, that is none of
        the ladder's, conflicts with it."""
        opened = _OPENERS_INLINE.match(self.text, at)
        quoted = opened is not None and any(c in _QUOTE for c in opened.group(0))
        at = opened.end() if opened else at
        if at in self.claimed:
            return None
        if at in self.found:
            self.claimed.add(at)
            name_end, named = self.found[at]
            paired = self._paired(name_end)  # "1. Role Prompting (2)": two numbers, one name
            if paired is not None:
                return paired[0], named != level or paired[1] != level
            return name_end, named != level
        end = next((t.end() for t in self.titled if t.start() == at), None)
        if end is None:
            item = _TITLED_ITEM.match(self.text, at)
            end = item.end() if item else None
        if end is None and quoted:
            line_end = self.text.find("\n", at)
            line_end = len(self.text) if line_end < 0 else line_end
            end = line_end if self.text[at:line_end].strip() else None
        if end is None:
            return None
        self.claimed.add(at)
        return end, True

    def _name_ref(
        self, start: int, end: int, level: int, *, choice: bool, name_at: int | None = None
    ) -> _Ref:
        self.claimed.add(start if name_at is None else name_at)
        paired = self._paired(end)
        if paired is not None:
            return _Ref(start, paired[0], frozenset({level}), choice, conflict=paired[1] != level)
        return _Ref(start, end, frozenset({level}), choice)

    def _paired(self, at: int) -> tuple[int, int] | None:
        """(end, number) of a number standing beside the name ending at ``at``, if any."""
        paired = _PAIRED.match(self.text, at)
        if paired is None:
            return None
        group = paired.lastindex or 1
        if paired.start(group) in self.claimed:
            return None
        self.claimed.add(paired.start(group))
        return paired.end(), int(paired.group(group))

    def _rejected(self, ref: _Ref) -> bool:
        if _FAILED.match(self.text, ref.end):
            return True
        before = self.text[max(0, ref.start - 120) : ref.start]
        clause = _CLAUSE.split(before)[-1]
        return bool(_REJECTING.search(" ".join(clause.split()[-3:]) + " "))
