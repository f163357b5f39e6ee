"""MEDEC: does a clinical note contain a medical error? From the hub only (see
hpt.tasks.structured_sources); the verdict is read by hpt.tasks.readers.medec."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hpt.results.penalties import borrowed
from hpt.tasks.base import DatasetError, Sample
from hpt.tasks.readers import read_medec_verdict
from hpt.tasks.structured_sources import HubOnly


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
