"""Echoes: runs of words a reply copies from its prompt.

Models repeat their prompt ('Based on the question: "..."'), and what they merely copy is not
their answer. The one finder here, ``copied_runs``, marks every run of at least N consecutive
words that also occurs, consecutively, in one of the sources, and joins overlapping and
adjacent runs. Two callers use it on words of their own kind:

- the answer readers (``strip_echo``): the sample's own texts (its question, and for BoolQ its
  passage) are the sources, N is ``ECHO_WORDS`` (6), and a copied run becomes the word
  "(echo)". Words are ASCII letters and digits, a decimal point, thousands comma or
  apostrophe kept inside ("3.5", "1,200", "don't"), compared lower-cased. Six words is longer
  than the phrases a model naturally shares with a question ("how many apples does she
  have") and shorter than any sentence it echoes;
- the free-text readers (``free_text.drop_runs``): words in any script ("été"), since a
  summary or a translation is not English only, and the run is cut out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence, Set
from functools import lru_cache

ECHO_WORDS = 6
# What a blanked echo becomes: a neutral word, so that a label whose text was an echo ("A.
# <copied scenario>") does not then stand alone as if it were chosen.
ECHOED = " (echo) "
_WORD = re.compile(r"[A-Za-z0-9]+(?:[.,'’][A-Za-z0-9]+)*")

Gram = tuple[str, ...]


def runs(words: Sequence[str], n: int) -> Iterable[Gram]:
    """Every run of ``n`` consecutive words, in order."""
    return zip(*(words[i:] for i in range(n)), strict=False)  # the shortest ends it


def copied_runs(
    words: Sequence[str], sources: Sequence[Set[Gram]], n: int
) -> list[tuple[int, int]]:
    """(first, last) word index of each stretch of ``words`` covered by runs of ``n`` words
    found in one of ``sources`` (each the set of a source's ``runs``), in order."""
    if n < 1 or len(words) < n or not sources:
        return []
    covered = [False] * len(words)
    for i, gram in enumerate(runs(words, n)):
        if any(gram in source for source in sources):
            covered[i : i + n] = [True] * n
    found, i = [], 0
    while i < len(words):
        if not covered[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(words) and covered[j + 1]:
            j += 1
        found.append((i, j))
        i = j + 1
    return found


# A climb's levels check one after another, and about as many samples as --concurrency are
# climbing at once: 256 sources keep every climb's passage without holding a whole run's
# (a long note's word runs take ~100 KB).
@lru_cache(maxsize=256)
def _grams(source: str) -> frozenset[Gram]:
    """A source's runs of ECHO_WORDS words, once per source: every level of a climb strips
    the same passage or note from its completion."""
    return frozenset(runs([w.lower() for w in _WORD.findall(source)], ECHO_WORDS))


def strip_echo(text: str, sources: Iterable[str]) -> str:
    """``text`` with every run of >= ECHO_WORDS words copied from ``sources`` replaced by
    ``ECHOED`` (see the module docstring)."""
    words = list(_WORD.finditer(text))
    if len(words) < ECHO_WORDS:
        return text
    grams = [g for g in map(_grams, sources) if g]
    out, pos = [], 0
    for i, j in copied_runs([m.group().lower() for m in words], grams, ECHO_WORDS):
        out += [text[pos : words[i].start()], ECHOED]
        pos = words[j].end()
    out.append(text[pos:])
    return "".join(out)
