"""SAMSum: summarise a chat dialogue; resolved when ROUGE-L F of the summary the completion
gives (see hpt.tasks.readers.free_text for how it is read) reaches the threshold (0.20).

A summary that repeats the dialogue is not a summary: lines equal to a dialogue line
("Name: utterance"; case, spacing, punctuation, markdown and media placeholders such as
<file_gif> ignored) are dropped, then every run of ``COPY_RUN`` (16) or more consecutive
words that occurs in the dialogue, read with and without the speakers' names (so copies in
prose, or spread over lines, go too). No reference summary in the test and validation
splits repeats 16 consecutive words of its dialogue (the longest run is 15), so none loses a
word to these rules.
"""

from __future__ import annotations

import re

from hpt.results.penalties import TABLE_4
from hpt.results.textmetrics import ROUGE_L, rouge_l
from hpt.tasks.base import Sample
from hpt.tasks.generation import GenerationTask
from hpt.tasks.readers import drop_runs, words
from hpt.tasks.sources import field, load_hub, read_csv_rows, require_file

COPY_RUN = 16
_SPEAKER = re.compile(r"^\s*([^:\n]{1,40}):\s*(.*)$")
# What the corpus puts for media: <file_gif>, <file_photo>, <link>, ...
_PLACEHOLDER = re.compile(r"<[a-z_]+>")


def _dialogue_lines(dialogue: str) -> tuple[set[tuple[str, ...]], list[list[str]]]:
    """The dialogue's lines as word tuples, and its words as read with and without the
    speakers' names (lines holding only a media placeholder left out)."""
    lines: set[tuple[str, ...]] = set()
    named: list[str] = []
    bare: list[str] = []
    for line in _PLACEHOLDER.sub(" ", dialogue).splitlines():
        m = _SPEAKER.match(line)
        utterance = words(m.group(2) if m else line)
        whole = words(line)
        if whole:
            lines.add(tuple(whole))
        if not utterance:
            continue
        named += whole
        bare += utterance
    return lines, [named, bare]


def drop_dialogue(text: str, dialogue: str) -> tuple[str, int]:
    """``text`` without what it copies from ``dialogue`` (see the module docstring), and how
    many words went."""
    lines, runs = _dialogue_lines(dialogue)
    kept, gone = [], 0
    for line in text.split("\n"):
        said = tuple(words(_PLACEHOLDER.sub(" ", line)))
        if said and said in lines:
            gone += len(said)
        else:
            kept.append(line)
    out, dropped = drop_runs("\n".join(kept).strip(), runs, COPY_RUN)
    return out, gone + dropped


class SAMSum(GenerationTask):
    name = "samsum"
    title = "SAMSum"
    hub_id = "knkarthick/samsum"
    hub_split = "test"
    penalty = 2.23
    penalty_source = TABLE_4
    default_threshold = 0.20
    metric_name = "ROUGE-L F"
    metric_description = ROUGE_L
    corpus_metric = "mean ROUGE-L F"
    report_rank = 2
    answer_nouns = r"summary|résumé|tl;dr"
    quote_cues = r"summary(?:[ \t]+(?:is|would be|will be|could be|reads))?|in summary|in short"

    def _load(self, split: str, filename: str) -> list[Sample]:
        if self.data_dir is None:
            rows = [
                (f"{self.hub_id} {split} row {i}", r)
                for i, r in enumerate(load_hub(self.hub_id, None, split))
            ]
        else:
            path = require_file(self.data_dir, f"samsum/{filename}", self.name)
            lines = read_csv_rows(path, 3)
            next(lines, None)  # the header: id,summary,dialogue
            rows = [
                (f"{path}:{n}", {"id": r[0], "summary": r[1], "dialogue": r[2]}) for n, r in lines
            ]
        return [
            Sample(
                id=f"samsum-{split}-{field(row, 'id', where)}",
                # The files keep the original CRLF line ends; prompts get plain newlines.
                fields={"dialogue": field(row, "dialogue", where).replace("\r\n", "\n")},
                target=field(row, "summary", where),
            )
            for where, row in rows
        ]

    def load_samples(self) -> list[Sample]:
        return self._load("test", "test.csv")

    def load_exemplar_pool(self) -> list[Sample]:
        return self._load("validation", "val.csv")[:3]

    def exemplar_ids(self) -> list[str]:
        return [s.id for s in self.load_exemplar_pool()]

    def score(self, output: str, reference: str) -> float:
        return rouge_l(output, reference)

    def drop_copies(self, text: str, sample: Sample) -> tuple[str, str | None, str]:
        kept, gone = drop_dialogue(text, str(sample.fields.get("dialogue", "")))
        if not gone:
            return text, None, "empty output"
        return kept, f"dropped {gone} words copied from the dialogue", "only repeats the dialogue"
