"""Reading answers out of free-form completions, one module per kind of answer: ``yesno``,
``number``, ``choice``, ``free_text``, ``medcalc`` and ``medec``, over one shared set of cues
(``cues``: statements, retractions, negations) and one finder of text copied from the prompt
(``echo``).

Each reader returns None when the completion states no answer it can read, or states answers
that contradict each other; the caller must treat that as unresolved, never as a default.
The readers are deliberately small and explicit: tests/test_readers.py holds the table of
completions that specifies them. Every reader takes the sample's own texts as ``echo`` and
first blanks what the completion copies from them (``echo.strip_echo``).

Why nothing was read, where a reader can say (``read_choice``: a label written with another
option's text, a reply that only lists the options), is a detail beginning with its kind
("conflict: ...", "options listed: ..."); the trace viewer names those kinds. A reply cut off
at the length limit is cut to its whole part before any reader sees it (hpt.tasks.cutoff).
"""

from hpt.tasks.readers.choice import ChoiceReading, parse_choice, read_choice, read_sample_choice
from hpt.tasks.readers.choice_labels import CONFLICT, LISTED
from hpt.tasks.readers.echo import ECHO_WORDS, strip_echo
from hpt.tasks.readers.free_text import Extracted, clean_output, drop_runs, extract_answer, words
from hpt.tasks.readers.medcalc import asked, read_answer, read_answer_strict
from hpt.tasks.readers.medec import read_medec_verdict
from hpt.tasks.readers.number import (
    asks_for_total,
    normalize_number,
    parse_number,
    parse_number_strict,
)
from hpt.tasks.readers.yesno import parse_bool

__all__ = [
    "CONFLICT",
    "ECHO_WORDS",
    "LISTED",
    "ChoiceReading",
    "Extracted",
    "asked",
    "asks_for_total",
    "clean_output",
    "drop_runs",
    "extract_answer",
    "normalize_number",
    "parse_bool",
    "parse_choice",
    "parse_number",
    "parse_number_strict",
    "read_answer",
    "read_answer_strict",
    "read_choice",
    "read_medec_verdict",
    "read_sample_choice",
    "strip_echo",
    "words",
]
