"""The medical benchmarks of the structured-prompting paper with no offline copy: HeadQA,
MedBullets (multiple choice) and MEDEC (does a clinical note contain a medical error?).

They load from the Hugging Face hub through ``load_hub``. Given a data directory, they read
the folder NAME/ in it (``headqa/``, ``medbullets/``, ``medec/``) the same way: ``datasets``
loads a local folder of the hub's files (JSON lines, CSV or Parquet in the hub's column
format) with its splits named by the files, ``test.*`` and ``train.*``. A data directory
without that folder is a DatasetError saying so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from hpt.results.penalties import borrowed
from hpt.tasks.base import CarvedSplit, DatasetError, Parts, Sample, Task, seeded_slice
from hpt.tasks.mmlu_pro import LETTERS, TRAIN_SEED, ChoiceTask, choice_sample
from hpt.tasks.sources import DATA_DIR_ENV, load_hub


class HubOnly(Task):
    """Rows from the hub, or from the data directory's NAME/ folder of hub files."""

    offline_data = False

    # Split names on the hub for evaluation and training data; None: no training split.
    hub_train_split: ClassVar[str | None] = "train"

    def hub_rows(self, role: str) -> list[tuple[str, dict[str, Any]]]:
        """(place, row) for the "test" or "train" rows."""
        if self.data_dir is None:
            split = self.hub_split if role == "test" else self.hub_train_split
            assert split is not None
            source, config = self.hub_id, self.hub_config
        else:
            folder = self.data_dir / self.name
            if not folder.is_dir() or not any(folder.iterdir()):
                raise DatasetError(
                    f"{self.name}: no offline copy in {self.data_dir}: hpt loads {self.title} "
                    f"from the Hugging Face hub ({self.hub_id}); unset --data-dir/"
                    f"{DATA_DIR_ENV}, or put the hub's files (test.jsonl/.csv/.parquet, train.*) "
                    f"in {folder}"
                )
            source, config, split = str(folder), None, role
        rows = load_hub(source, config, split)
        return [(f"{source} {split} row {i}", r) for i, r in enumerate(rows)]


class HeadQA(HubOnly, ChoiceTask):
    """HEAD-QA (Vilares and Gómez-Rodríguez, 2019), English: Spanish healthcare
    specialisation exams, four or five options. Questions that need an image are left out
    (the model is shown text only)."""

    name = "headqa"
    title = "HeadQA"
    hub_id = "dvilares/head_qa"
    hub_config = "en"
    hub_split = "test"
    report_rank = 14
    exemplar_group = "category"

    def _sample(self, row: dict[str, Any], where: str) -> Sample | None:
        try:
            answers = sorted(row["answers"], key=lambda a: int(a["aid"]))
            texts = [str(a["atext"]) for a in answers]
            right = [i for i, a in enumerate(answers) if int(a["aid"]) == int(row["ra"])]
            question, qid = row["qtext"], int(row["qid"])
        except (KeyError, TypeError, ValueError):
            raise DatasetError(
                f"{where}: expected qid, qtext, ra and answers as a list of {{aid, atext}}"
            ) from None
        if row.get("image"):
            return None
        if len(right) != 1:
            raise DatasetError(f"{where}: ra {row['ra']!r} is not one answer's aid")
        exam = str(row.get("name") or row.get("year") or "exam")
        return choice_sample(
            self.name, f"{exam}-{qid}", str(question), texts, right[0], where,
            {"category": str(row.get("category", ""))},
        )  # fmt: skip

    def _load(self, role: str) -> list[Sample]:
        samples = [self._sample(r, w) for w, r in self.hub_rows(role)]
        return [s for s in samples if s is not None]

    def load_samples(self) -> list[Sample]:
        return self._load("test")

    def load_exemplar_pool(self) -> list[Sample]:
        return self._load("train")


class MedBullets(CarvedSplit, HubOnly, ChoiceTask):
    """MedBullets (Chen et al., 2024): 308 USMLE Step 2/3 style questions, four options
    (the ``op4`` release HELM uses; an empty fifth option is dropped). There is no train
    split: 10% of the questions (31, seed 42) are training data, excluded from evaluation."""

    name = "medbullets"
    title = "MedBullets"
    hub_id = "mkieffer/Medbullets"
    hub_split = "op4_test"
    hub_train_split = None
    report_rank = 15
    TRAIN_FRACTION: ClassVar[float] = 0.1

    def _sample(self, row: dict[str, Any], where: str, index: int) -> Sample:
        options = row.get("options")
        if isinstance(options, dict):  # the hub's {A: .., E: ..}
            texts = [options.get(k) for k in LETTERS[:5]]
        else:  # the release CSV's opa .. ope
            texts = [row.get(f"op{c}") for c in "abcde"]
        texts = [t for t in texts if isinstance(t, str) and t.strip()]
        kept = [t.strip() for t in texts if isinstance(t, str)]
        answer = row.get("answer_idx", row.get("answer"))
        question = row.get("question")
        if not isinstance(question, str) or not isinstance(answer, str) or len(texts) < 2:
            raise DatasetError(
                f"{where}: expected question, options A-E (or opa-ope) and an answer letter"
            )
        letter = answer.strip().upper()
        if len(letter) != 1 or letter not in LETTERS[: len(texts)]:
            raise DatasetError(f"{where}: answer {answer!r} is not one of the option letters")
        ident = str(row.get("idx") or row.get("id") or index)
        explanation = row.get("explanation")
        sample = choice_sample(
            self.name, ident, question.strip(), kept,
            LETTERS.index(letter), where,
        )  # fmt: skip
        if isinstance(explanation, str) and explanation.strip():
            self._explanations[sample.id] = explanation.strip()
        return sample

    def _carve(self) -> Parts:
        rows = self.hub_rows("test")
        samples = [self._sample(r, w, i) for i, (w, r) in enumerate(rows)]
        size = max(3, round(len(samples) * self.TRAIN_FRACTION))
        return seeded_slice(samples, {"": size}, lambda s: "", TRAIN_SEED,
                            lambda s: str(s.fields["question"]))  # fmt: skip

    def _carve_note(self, training: list[Sample]) -> str | None:
        return (
            f"MedBullets has no train split: a seeded slice of {len(training)} questions "
            f"({int(self.TRAIN_FRACTION * 100)}%, seed {TRAIN_SEED})"
        )


# -- MEDEC ---------------------------------------------------------------------------------
# Verdicts a completion states, as (pattern, verdict); the last one stated wins. HELM's own
# reading takes a reply starting with "CORRECT" as no error and one starting with a sentence
# ID as an error; this reads the same replies, and also says-so-in-words ones.
_MEDEC_VERDICTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?<![A-Za-z])CORRECT(?![A-Za-z])"), "CORRECT"),
    (re.compile(r"error[_ ]flag\W{0,4}0\b", re.I), "CORRECT"),
    (re.compile(r"error[_ ]flag\W{0,4}1\b", re.I), "ERROR"),
    (
        re.compile(
            r"\b(?:no|not any|without|free of)\s+(?:medical\s+|clinical\s+|factual\s+)?errors?\b"
            r"|\b(?:does not|doesn't|did not|didn't)\s+(?:contain|have|include)\s+(?:an?|any)\s+"
            r"(?:medical\s+|clinical\s+)?error"
            r"|\b(?:text|note|narrative)\s+is\s+(?:medically\s+)?(?:correct|accurate|error-free)\b"
            r"|\b(?:don't|do not)\s+(?:think|believe|see)\s+(?:that\s+)?there(?:\s+is|'s)\s+"
            r"(?:an?|any)\s+(?:medical\s+|clinical\s+)?error",
            re.I,
        ),
        "CORRECT",
    ),
    (
        re.compile(
            r"\b(?:contains?|has|have|there\s+is|there's|includes?)\s+(?:an?|one)\s+"
            r"(?:\w+\s+)?(?:medical\s+|clinical\s+)?error\b"
            r"|\berror\s+(?:is\s+)?in\s+sentence\s+(?:id\s*)?\d+"
            r"|\bsentence\s+(?:id\s*)?\d+\s+(?:contains|has|is\s+(?:wrong|incorrect|erroneous))\b"
            # HELM's reply format: the sentence ID, a space, the corrected sentence.
            r"|^\s*\d+\s+[A-Za-z\"']",
            re.I | re.M,
        ),
        "ERROR",
    ),
]


def read_medec_verdict(text: str) -> str | None:
    """ "CORRECT" (the note has no error) or "ERROR" (it has one), as the completion's last
    verdict states it; None when it states none."""
    events: list[tuple[int, bool, str]] = []
    for pattern, verdict in _MEDEC_VERDICTS:
        for m in pattern.finditer(text):
            if verdict == "ERROR" and _NEGATED.search(text, max(0, m.start() - 30), m.start()):
                continue  # "does not contain an error", "I don't think there is an error"
            # At the same place, "no error" outranks the "error" inside it.
            events.append((m.end(), verdict == "CORRECT", verdict))
    return max(events)[2] if events else None


# A negation shortly before an error statement, in its own sentence.
_NEGATED = re.compile(r"(?:\b(?:not|no|never|without|cannot)\b|n't\b)(?:(?![.!?\n]).)*$", re.I)


class MEDEC(HubOnly):
    """MEDEC (Ben Abacha et al., 2024), the MS collection: a clinical note, one sentence per
    line after its sentence ID, is either correct or has one medical error. As in the paper
    (HELM's medec_error_flag_accuracy), a completion is scored on the error flag only: the
    target is "ERROR" or "CORRECT"; HELM's full reference reply (the erroneous sentence's ID
    and its correction, or CORRECT) is the shown answer and kept in meta."""

    name = "medec"
    title = "MEDEC"
    hub_id = "sauravlmx/MEDEC-MS"
    hub_split = "test_ms"
    hub_train_split = "train_ms"
    # HPT's table 4 gives no penalty for MEDEC: BoolQ's (1.71), the other binary verdict,
    # stands in until `hpt annotate medec` measures one.
    penalty = 1.71
    penalty_source = borrowed("BoolQ")
    report_rank = 13
    guess_options = 2  # the flag: ERROR or CORRECT

    def _sample(self, role: str, row: dict[str, Any], where: str, index: int) -> Sample:
        note = row.get("Sentences") or row.get("Text")
        try:
            flag = int(str(row["Error Flag"]).strip())
        except (KeyError, ValueError):
            raise DatasetError(f"{where}: expected an Error Flag of 0 or 1") from None
        if not isinstance(note, str) or not note.strip() or flag not in (0, 1):
            raise DatasetError(f"{where}: expected the note's Sentences and an Error Flag 0 or 1")
        sentence = str(row.get("Error Sentence ID", "-1")).strip()
        corrected = str(row.get("Corrected Sentence") or "").strip()
        if flag and not re.fullmatch(r"\d+", sentence):
            raise DatasetError(f"{where}: a flagged note needs its Error Sentence ID")
        shown = f"{sentence} {corrected}" if flag else "CORRECT"
        ident = str(row.get("Text ID") or f"{role}-{index}")
        return Sample(
            id=f"{self.name}-{ident}",
            fields={"text": note.strip()},
            target="ERROR" if flag else "CORRECT",
            shown_answer=shown,
            meta={
                "error_sentence_id": sentence if flag else "-1",
                "error_type": str(row.get("Error Type") or ""),
            },
        )

    def _load(self, role: str) -> list[Sample]:
        return [self._sample(role, r, w, i) for i, (w, r) in enumerate(self.hub_rows(role))]

    def load_samples(self) -> list[Sample]:
        return self._load("test")

    def load_exemplar_pool(self) -> list[Sample]:
        return self._load("train")

    def exemplars_for(self, sample: Sample, pool: Sequence[Sample]) -> list[Sample]:
        """The pool's first two notes with an error and its first correct one."""
        errors = [s for s in pool[:200] if s.target == "ERROR"][:2]
        correct = [s for s in pool[:200] if s.target == "CORRECT"][:1]
        if len(errors) < 2 or not correct:
            raise DatasetError("medec: the training data lacks two flagged and one correct note")
        return [errors[0], correct[0], errors[1]]

    def parse(self, completion: str, sample: Sample) -> str | None:
        return read_medec_verdict(completion)
