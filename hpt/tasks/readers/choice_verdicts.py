"""What a reply says of a multiple-choice option: the cues that choose it ("the answer is B",
"I'd go with D"), affirm it ("C is correct"), keep it ("leaving C") or discard it ("rule out
A", "B is wrong"), and the glue of a list of labels ("A, B and D")."""

from __future__ import annotations

import re

from hpt.tasks.readers.cues import NOT, answer_is

GLUE = re.compile(
    r"\s*(?:[,/&]\s*)?(?:(?:and|or|nor|as well as)\s+)?(?:(?:options?|choices?)\s*)?[(\[]?\s*",
    re.I,
)
# Cues before a label (or a list of labels) that choose it ...
_ADJ = (
    r"(?:correct|right|best|final|true|most\s+(?:plausible|likely|appropriate|suitable|logical|"
    r"reasonable|accurate|sensible|fitting|correct|probable)|only\s+(?:remaining|correct|"
    r"possible|valid|sensible)|likely|probable|appropriate|logical|obvious|clear)"
)
CHOOSE_CUE = re.compile(
    r"(?:(?<!wrong\s)(?<!incorrect\s)(?<!discard\s)"
    + answer_is("was", "remains", "-")
    + r"|\b(?:I|we)(?:'d|’d|\s+would|\s+will|'ll|’ll|\s+should)?\s+"
    r"(?:choose|select|pick|go\s+with|opt\s+for)"
    r"|\b(?:my|our|final)\s+(?:choice|selection|pick)\s*(?:is|would be|:)"
    r"|\b(?:only|one)\s+(?:option|choice|answer)\s+(?:left|remaining)\s*(?:is|would be|:)"
    r"|\b(?:" + _ADJ + r"|remaining)\s+(?:option|choice)\s*(?:is|would be|:|=|-))"
    r"[\s*_:\"'“”‘’(\[]*(?:(?:indeed|clearly|probably|likely|most likely|definitely|therefore|"
    r"thus|certainly|actually|still|either|then|hence|so|the)\s+)*(?:(?:option|choice|letter)\s*)?"
    r"[\s*_\"'“”‘’(\[]*",
    re.IGNORECASE,
)
# ... and cues that discard it.
DISCARD_CUE = re.compile(
    r"\b(?:discard(?:ed|ing)?|eliminat(?:e|ed|ing)|rul(?:e|ed|ing)\s+out|exclud(?:e|ed|ing)|"
    r"reject(?:ed|ing)?|remov(?:e|ed|ing)|cross(?:ed)?\s+out|not|never|rather\s+than|"
    r"instead\s+of|neither|nor)\s+(?:the\s+)?(?:(?:options?|choices?|answers?)\s*)?"
    r"[\s*_\"'“”‘’(\[]*",
    re.IGNORECASE,
)
# What a label's own sentence says of it: "B is wrong", "C is correct", "D is the answer",
# optionally through "- this option ...". Singular verbs speak of the last label of a list,
# plural and modal ones of the whole list ("A and D are wrong").
BRIDGE = re.compile(
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
REJECTED = re.compile(
    r"(?P<verb>is|was|are|were|seems?|appears?|does|do|did|has|have|can|could|would|should|must|"
    r"will|may|might)\s*" + NOT + r"\b\s*(?:be\s+|seem\s+to\s+be\s+)?"
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
AFFIRMED_ANSWER = re.compile(
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
AFFIRMED = re.compile(
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
TERSE = re.compile(r"\s*(?:[-–—:]\s*|\(\s*)" + _VERDICT_WORD, re.IGNORECASE)
TERSE_BARE = re.compile(r"\s*" + _VERDICT_WORD, re.IGNORECASE)
SINGULAR = {"is", "was", "seems", "appears", "does", "has", "remains", "fits", "matches"}
REMAIN_CUE = re.compile(
    r"\b(?:leaving|leaves|left\s+with|keep|keeping)\s+(?:us\s+with\s+)?(?:only\s+|just\s+)?(?:the\s+)?"
    r"(?:(?:options?|choices?)\s+)?[\s*_\"'“”‘’(\[]*",
    re.IGNORECASE,
)
# A sentence that concludes or corrects with a label alone: "Therefore, B." / "... no, B."
CONCLUDE = re.compile(
    r"(?:^|[.!?\n]\s*|,\s*)(?:(?:so|therefore|thus|hence|in conclusion|overall|actually|rather|"
    r"I mean)\s*,?|no\s*,)\s*"
    r"[\s*_\"'“”‘’(\[]*(?=[A-Z][)\]\"'”’*]*\s*(?:[.!]|$|\n))",
    re.IGNORECASE,
)
# An option offered as an alternative: "(B) might be it, or E".
ALTERNATIVE = re.compile(
    r"\b(?:or|either)\s+(?:maybe\s+|perhaps\s+|possibly\s+)?(?:(?:options?|choices?)\s+)?"
    r"[\s*_\"'“”‘’(\[]*$",
    re.IGNORECASE,
)
# A second option chosen alike: "B is correct, and so is D".
ALSO = re.compile(
    r"\b(?:so|as)\s+(?:is|was|does)\s+(?:(?:option|choice)\s+)?[\s*_\"'“”‘’(\[]*$", re.I
)
