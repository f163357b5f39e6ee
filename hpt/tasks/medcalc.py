"""MedCalc-Bench v1.0: compute a clinical value (a score, a lab value, a dose, a date) from
a patient note (Khandekar et al., 2024).

Fields ``patient_note`` and ``question``; the target is the ground truth in the form
``read_answer`` returns (a number, MM/DD/YYYY, or "(W weeks, D days)"); meta carries the
calculator's id and name, its category, the Output Type, the scoring kind and the row's
Lower/Upper Limit. Reading: hpt.tasks.readers.medcalc.

Scoring follows MedCalc-Bench's own evaluation (ncbi-nlp/MedCalc-Bench,
``evaluation/evaluate.py``, ``check_correctness``), its rule chosen per calculator from the
row's columns, never HELM's per-category rule (which scores v1.0's ``lab`` and ``dosage`` rows
as 0 because their truth is a decimal checked by range):

- ``integer`` (Output Type "integer": scores such as CHA2DS2-VASc, HAS-BLED, Wells'): the
  model's number is rounded as Python's ``round`` rounds (half to even, as upstream) and must
  equal the truth;
- ``decimal`` (Output Type "decimal": lab values, physical measures, doses, some risks):
  correct when Lower Limit <= value <= Upper Limit, the row's own limits (upstream's band);
- ``date`` (Output Type "date": calculators 13 "Estimated Due Date" and 68 "Estimated of
  Conception"): the same calendar date; the truth is written M/D/Y ("09/23/2014");
- ``weeks_days`` (calculator 69 "Estimated Gestational Age", whose Output Type says
  "integer" but whose truth is a tuple "('4 weeks', '3 days')"): the same (weeks, days).

Data. Offline: ``medcalc/test_data.csv`` (1047 rows). Hub: ``ncbi/MedCalc-Bench-v1.0``,
split ``test``, and its ``train`` split as training data. Offline there is no train split,
so 3 rows per calculator (55 calculators, one with only 2: 164 rows, about 16%) are taken
from test by a hash of (seed 42, id): that slice is training data (and the three-shot
exemplars: three of the sample's own calculator, as MedCalc-Bench's one-shot prompts use the
same calculator) and is excluded from evaluation (``split_notes``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, ClassVar

from hpt.results.penalties import borrowed
from hpt.results.records import Reading
from hpt.tasks.base import CarvedSplit, DatasetError, Parts, Sample, Task, seeded_slice
from hpt.tasks.readers import asked, normalize_number, read_answer, read_answer_strict
from hpt.tasks.readers.medcalc_values import dates, weeks_days
from hpt.tasks.sources import csv_lines, load_hub, require_file
from hpt.tasks.structured_sources import TRAIN_SEED, csv_dict_rows

COLUMNS = (
    "Row Number", "Calculator ID", "Calculator Name", "Category", "Output Type", "Note ID",
    "Patient Note", "Question", "Ground Truth Answer", "Lower Limit", "Upper Limit",
)  # fmt: skip


# -- the scoring rule of a row (see the module docstring) ----------------------------------
_TUPLE_TRUTH = re.compile(
    r"""^\s*\(\s*['"]?\s*(\d+)\s*weeks?\s*['"]?\s*,\s*['"]?\s*(\d+)\s*days?\s*['"]?\s*\)\s*$""",
    re.IGNORECASE,
)


def answer_kind(output_type: str, truth: str) -> str:
    """The scoring rule for a row, from its Output Type (and, for the gestational-age
    calculator, the tuple form of its truth). ValueError for an unknown Output Type."""
    if _TUPLE_TRUTH.match(truth):
        return "weeks_days"
    kind = output_type.strip().lower()
    if kind in ("integer", "decimal", "date"):
        return kind
    raise ValueError(f"unknown Output Type {output_type!r} (expected integer, decimal or date)")


def canonical_truth(kind: str, truth: str) -> str:
    """The ground truth in the form ``read_answer`` returns; ValueError when malformed."""
    if kind == "weeks_days":
        m = _TUPLE_TRUTH.match(truth)
        if not m:
            raise ValueError(f"expected a (weeks, days) tuple, got {truth!r}")
        return weeks_days(int(m.group(1)), int(m.group(2)))
    if kind == "date":
        found = dates(truth)
        if len(found) != 1 or found[0][2].strip() != truth.strip():
            raise ValueError(f"expected a date M/D/Y, got {truth!r}")
        return found[0][0]
    value = normalize_number(truth.strip())
    if value is None:
        raise ValueError(f"expected a number, got {truth!r}")
    if kind == "integer" and Decimal(value) != Decimal(value).to_integral_value():
        raise ValueError(f"expected an integer, got {truth!r}")
    return value


def limit(raw: str) -> str:
    """A decimal row's Lower/Upper Limit as a number string; ValueError when malformed."""
    value = normalize_number(raw.strip())
    if value is None:
        raise ValueError(f"expected a number, got {raw!r}")
    return value


def is_correct(kind: str, parsed: str | None, truth: str, lower: str = "", upper: str = "") -> bool:
    """MedCalc-Bench's verdict on a reading (``parsed`` from ``read_answer``) against the
    canonical truth; ``lower``/``upper`` are the row's limits (decimal rows)."""
    if parsed is None:
        return False
    try:
        if kind == "integer":
            return round(Decimal(parsed)) == int(Decimal(truth))
        if kind == "decimal":
            value = Decimal(parsed)
            return Decimal(lower) <= value <= Decimal(upper)
    except (InvalidOperation, ValueError):
        return False
    return parsed == truth  # dates and (weeks, days) in canonical form


def _same_question(sample: Sample) -> str:
    return f"{sample.fields.get('patient_note')}\x00{sample.fields.get('question')}"


class MedCalc(CarvedSplit, Task):
    name = "medcalc"
    title = "MedCalc-Bench"
    hub_id = "ncbi/MedCalc-Bench-v1.0"
    hub_split = "test"
    # HPT's table 4 gives no penalty for MedCalc-Bench: GSM8K's (2.14), the other dataset
    # whose answer is a computed value, stands in until `hpt annotate medcalc` measures one.
    penalty = 2.14
    penalty_source = borrowed("GSM8K")
    report_rank = 12
    TRAIN_PER_CALCULATOR: ClassVar[int] = 3

    def __init__(self, data_dir: Path | None = None) -> None:
        super().__init__(data_dir)
        self._explanations: dict[str, str] = {}

    def _sample(self, split: str, row: dict[str, Any], where: str) -> Sample:
        missing = [c for c in COLUMNS if row.get(c) is None]
        if missing:
            raise DatasetError(f"{where}: missing the columns {missing}")
        value = {c: str(row[c]).strip() for c in COLUMNS}
        try:
            kind = answer_kind(value["Output Type"], value["Ground Truth Answer"])
            target = canonical_truth(kind, value["Ground Truth Answer"])
            lower = upper = ""
            if kind == "decimal":
                lower, upper = limit(value["Lower Limit"]), limit(value["Upper Limit"])
            int(value["Calculator ID"])
        except ValueError as exc:
            raise DatasetError(f"{where}: {exc}") from None
        ident = f"{self.name}-{split}-{value['Row Number']}"
        explanation = row.get("Ground Truth Explanation")
        if isinstance(explanation, str) and explanation.strip():
            self._explanations[ident] = explanation.strip()
        return Sample(
            id=ident,
            fields={"patient_note": str(row["Patient Note"]), "question": value["Question"]},
            target=target,
            meta={
                "calculator_id": value["Calculator ID"],
                "calculator_name": value["Calculator Name"],
                "category": value["Category"],
                "output_type": value["Output Type"],
                "kind": kind,
                "lower_limit": lower,
                "upper_limit": upper,
                "note_id": value["Note ID"],
            },
        )

    def _load(self, split: str) -> list[Sample]:
        if self.data_dir is None:
            rows = load_hub(self.hub_id, self.hub_config, split)
            places = [(f"{self.hub_id} {split} row {i}", r) for i, r in enumerate(rows)]
        else:
            path = require_file(self.data_dir, "medcalc/test_data.csv", self.name)
            places = list(csv_dict_rows(csv_lines(path), str(path), COLUMNS))
        samples = [self._sample(split, r, w) for w, r in places]
        seen: set[str] = set()
        for (where, _), s in zip(places, samples, strict=True):
            if s.id in seen:
                raise DatasetError(f"{where}: Row Number repeats ({s.id})")
            seen.add(s.id)
        return samples

    def _carve(self) -> Parts:
        test = self._load("test")
        if self.data_dir is None:
            return self._load("train"), test
        # At most 3 per calculator, always leaving one to evaluate (calculator 31 has two
        # rows); a note asked twice with the same question stays on one side.
        rows = Counter(s.meta["calculator_id"] for s in test)
        per = {c: min(self.TRAIN_PER_CALCULATOR, n - 1) for c, n in rows.items()}
        return seeded_slice(test, per, lambda s: s.meta["calculator_id"], TRAIN_SEED,
                            _same_question)  # fmt: skip

    def _carve_note(self, training: list[Sample]) -> str | None:
        if self.data_dir is None:
            return None
        return (
            f"MedCalc-Bench has no train split offline: a seeded slice of {len(training)} test "
            f"rows (up to {self.TRAIN_PER_CALCULATOR} per calculator, leaving each at least one "
            f"to evaluate; repeated rows kept together; seed {TRAIN_SEED})"
        )

    def exemplars_for(self, sample: Sample, pool: Sequence[Sample]) -> list[Sample]:
        """Up to three training rows of the sample's own calculator (pool order; offline,
        calculator 31 has one)."""
        calculator = sample.meta.get("calculator_id")
        same = [s for s in pool if s.meta.get("calculator_id") == calculator][:3]
        if not same:
            raise DatasetError(f"medcalc: no training row for calculator {calculator}")
        return same

    def explanation(self, exemplar: Sample) -> str | None:
        return self._explanations.get(exemplar.id) or super().explanation(exemplar)

    # -- checking -----------------------------------------------------------------------
    def _echo(self, sample: Sample) -> list[str]:
        return [v for v in (sample.fields.get(k) for k in ("patient_note", "question"))
                if isinstance(v, str)]  # fmt: skip

    def _given(self, sample: Sample) -> list[str]:
        note = sample.fields.get("patient_note")
        return [note] if isinstance(note, str) else []

    def _asked(self, sample: Sample) -> list[str]:
        """The phrases naming the asked quantity (from the question and calculator name)."""
        question = sample.fields.get("question")
        return asked(question if isinstance(question, str) else "",
                     sample.meta.get("calculator_name", ""))  # fmt: skip

    def parse(self, completion: str, sample: Sample) -> str | None:
        return read_answer(completion, sample.meta.get("kind", ""), self._echo(sample),
                           self._asked(sample), self._given(sample))  # fmt: skip

    def alternative_readings(self, completion: str, sample: Sample) -> dict[str, str | None]:
        kind = sample.meta.get("kind", "")
        strict = read_answer_strict(completion, kind, self._echo(sample),
                                    self._asked(sample), self._given(sample))  # fmt: skip
        return {"strict": strict}

    def reading(self, parsed: str | None, sample: Sample) -> Reading:
        resolved = is_correct(
            sample.meta.get("kind", ""), parsed, sample.target,
            sample.meta.get("lower_limit", ""), sample.meta.get("upper_limit", ""),
        )  # fmt: skip
        return Reading(parsed=parsed, resolved=resolved)
