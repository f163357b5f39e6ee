"""Tasks whose answers are free text, resolved by a reference-based score and a threshold.

What is scored is the answer the model gives, not its whole completion: reasoning written
before a translation cuts its sentence BLEU by half or more, and a "summary" that repeats the
dialogue shares enough words with the reference to pass a ROUGE-L threshold. The attempt
keeps the raw completion; ``Check.parsed`` holds the extracted text, which is what is scored
and what the corpus metrics use. How the answer is found: hpt.tasks.readers.free_text.

Copies are not answers. IWSLT removes every verbatim copy of the whole English source;
SAMSum removes lines that repeat a dialogue line and every run of 16 or more consecutive words
found in the dialogue (see ``hpt.tasks.samsum``). No reference summary in SAMSum's test and
validation splits (1,637) repeats 16 consecutive words of its dialogue (the longest such run
is 15) and no tst2017 reference contains its whole English source, so honest answers keep
their words. When nothing is left the output is unresolved ("only repeats the dialogue",
"only repeats the English source").

``Check.detail`` gives the metric, its value and the threshold, and in parentheses what the
reading did: "sentence BLEU 0.612 >= 0.15 (answer after 'Translation:')".
"""

from __future__ import annotations

import re
from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from hpt.results.info import TaskInfo
from hpt.tasks import tables
from hpt.tasks.base import Check, Sample, Task
from hpt.tasks.readers.free_text import Extracted, extract_answer


@dataclass
class Answer:
    """What a generation task reads in a completion: the text to score (None when there is
    none) and what the reading did, for ``Check.detail``."""

    text: str | None
    notes: list[str]
    empty: str = "empty output"


class GenerationTask(Task):
    """Resolved when ``score(output, reference) >= threshold`` (both on a 0-1 scale)."""

    default_threshold: ClassVar[float]
    # Both thresholds the paper reports for IWSLT and SAMSum (tables 3 and 6); the run layer
    # uses them as default cells.
    paper_thresholds: ClassVar[tuple[float, ...]] = (0.15, 0.20)
    metric_name: ClassVar[str]
    metric_description: ClassVar[str]
    corpus_metric: ClassVar[str]
    # How the corpus score is computed (hpt.results.scoring.CORPUS_RULES); "mean": the mean
    # of the sentence scores.
    corpus_rule: ClassVar[str] = "mean"
    kind = "text"
    report_table = tables.TEXT
    # Regex alternations for the extraction rules (hpt.tasks.readers.free_text).
    answer_nouns: ClassVar[str]
    quote_cues: ClassVar[str]
    # Take the final paragraph only when an earlier one is reasoning (False: whenever the
    # completion has several paragraphs).
    reasoning_only: ClassVar[bool] = True
    threshold: float

    def __init__(self, data_dir: object = None, threshold: float | None = None) -> None:
        super().__init__(data_dir)  # type: ignore[arg-type]
        self.threshold = self.default_threshold if threshold is None else threshold

    @abstractmethod
    def score(self, output: str, reference: str) -> float: ...

    @classmethod
    def info(cls) -> TaskInfo:
        return (
            super()
            .info()
            .model_copy(
                update={
                    "metric": cls.corpus_metric,
                    "score_metric": cls.metric_name,
                    "corpus_metric": cls.corpus_metric,
                    "corpus_rule": cls.corpus_rule,
                }
            )
        )

    def passed_over(self, candidate: str) -> bool:
        """Whether an extraction candidate is plainly not the answer (none by default)."""
        return False

    def drop_copies(self, text: str, sample: Sample) -> tuple[str, str | None, str]:
        """``text`` without what it copies from the prompt's input, a note on what went (None
        when nothing did), and the detail for an output that was nothing but a copy."""
        return text, None, "empty output"

    def extract(self, completion: str) -> Extracted:
        return extract_answer(
            completion,
            nouns=self.answer_nouns,
            cues=self.quote_cues,
            reasoning_only=self.reasoning_only,
            passed_over=self.passed_over,
        )

    def read(self, completion: str, sample: Sample) -> Answer:
        found = self.extract(completion)
        notes = ([found.rule] if found.rule else []) + found.notes
        if not found.text:
            return Answer(None, notes)
        text, dropped, empty = self.drop_copies(found.text, sample)
        if dropped is None:
            return Answer(text, notes)
        if not re.search(r"\w", text):
            return Answer(None, notes, empty)
        return Answer(text, [*notes, dropped])

    def parse(self, completion: str, sample: Sample) -> str | None:
        return self.read(completion, sample).text

    def check(self, sample: Sample, completion: str) -> Check:
        answer = self.read(completion, sample)
        how = f" ({'; '.join(answer.notes)})" if answer.notes else ""
        if answer.text is None:
            return Check(parsed=None, resolved=False, score=0.0, detail=answer.empty + how)
        value = self.score(answer.text, sample.target)
        verdict = ">=" if value >= self.threshold else "<"
        return Check(
            parsed=answer.text,
            resolved=value >= self.threshold,
            score=value,
            detail=f"{self.metric_name} {value:.3f} {verdict} {self.threshold:g}{how}",
        )
