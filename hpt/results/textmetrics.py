"""Reference-based scores for translation and summarisation, on a 0-1 scale.

BLEU is sacreBLEU's (13a tokenizer; sentence BLEU with its default "exp" smoothing, so a
short but partly right output does not score 0; corpus BLEU unsmoothed, as reported in
papers). ROUGE-L is rouge-score's F-measure with the Porter stemmer.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

# Imported on first use: rouge-score pulls in nltk and scipy (seconds), and most runs
# score no text.
if TYPE_CHECKING:
    from rouge_score import rouge_scorer

SENTENCE_BLEU = "sacreBLEU sentence BLEU, tokenize=13a, smooth=exp, 0-1 scale"
CORPUS_BLEU = "sacreBLEU corpus BLEU, tokenize=13a, smooth=none, 0-1 scale"
ROUGE_L = "ROUGE-L F (rouge-score, Porter stemmer), 0-1 scale"


def sentence_bleu(hypothesis: str, reference: str) -> float:
    import sacrebleu

    return float(sacrebleu.sentence_bleu(hypothesis, [reference]).score) / 100.0


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    if not hypotheses:
        return 0.0
    import sacrebleu

    return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score) / 100.0


@cache
def _rouge() -> rouge_scorer.RougeScorer:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(hypothesis: str, reference: str) -> float:
    return float(_rouge().score(reference, hypothesis)["rougeL"].fmeasure)
