"""Where a reply names a multiple-choice option: the capital letters that are labels (not the
article "A", not "vitamin C"), the option text written beside them, and the conflicts and
echoed option lists that make a reply choose nothing."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from hpt.tasks.readers.choice_verdicts import TERSE

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

# Why a choice reader read nothing, where it can say: the detail begins with one of these
# kinds, which the trace viewer names ("(none: conflict)").
CONFLICT = "conflict"
LISTED = "options listed"


@dataclass
class Mention:
    """A capital letter that names an option: where it stands, what is written beside it, and
    what the reply said of it so far."""

    label: str
    start: int  # the letter
    end: int  # after the letter and its closing mark or label punctuation
    tail: int  # after any option text attached to it
    marked: bool  # "(B)", "[B]", "**B**"
    attached: str | None = None
    rejected_at: list[int] = field(default_factory=list)
    in_list: bool = False  # listed with other labels ("(B) or E", "A, B and D")


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
    if quoted and not TERSE.fullmatch(quoted.group()):  # "A (wrong)" is a verdict, not a text
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


def find_mentions(text: str, labels: str, options: Sequence[tuple[str, str]]) -> list[Mention]:
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
        mention = Mention(label, start, end, tail, marked, attached)
        labelled = re.compile(r"\s*[.):\-–—]").match(text, m.end()) and is_own(mention, options)
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


def is_own(mention: Mention, options: Sequence[tuple[str, str]]) -> bool:
    """A label written with its own option's text ("B - populated areas")."""
    return mention.attached is not None and any(
        lab == mention.label and _norm(t) == _norm(mention.attached) for lab, t in options
    )


def conflict_of(mention: Mention, options: Sequence[tuple[str, str]]) -> str | None:
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


def alone_at_end(text: str, mention: Mention) -> bool:
    """Whether ``mention`` stands alone, in its marks, on the reply's last line ("\n(D)")."""
    start = text.rfind("\n", 0, mention.start) + 1
    line = text[start:].strip()
    return re.fullmatch(r"[\s*_#>•(\[-]*" + mention.label + r"[)\]]?[.!]?", line) is not None


def option_text(text: str, labels: str, options: Sequence[tuple[str, str]]) -> str | None:
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


def only_lists_options(
    text: str, mentions: list[Mention], options: Sequence[tuple[str, str]]
) -> bool:
    """Whether the reply is nothing but two or more options, each written with its own text
    ('A. "Wrong, Wrong" B. "Wrong, Not wrong" ...'): it echoes the list and chooses none."""
    own = [m for m in mentions if is_own(m, options)]
    if len({m.label for m in own}) < 2:
        return False
    pos, rest = 0, []
    for m in own:
        rest.append(text[pos : max(pos, m.start)])
        pos = max(pos, m.tail)
    rest.append(text[pos:])
    return all(_LIST_GLUE.fullmatch(r) for r in rest)
