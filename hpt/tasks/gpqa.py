"""GPQA Diamond: 198 graduate-level four-way questions in physics, chemistry and biology.

Data. Offline: ``gpqa/gpqa_diamond.zip``, encrypted with the dataset authors' password
(standard ZipCrypto, which ``zipfile`` reads; an AES archive would need pyzipper and is a
DatasetError here). The CSV is read in memory and never written to disk. Hub:
``Idavidrein/gpqa`` config ``gpqa_diamond`` (its only split is ``train``), same columns.

Options. The release gives the correct answer first ("Correct Answer", then "Incorrect
Answer 1-3"), so the four are shuffled, with an order fixed per question by a hash of its
Record ID: the answer is not always A, and every run and machine shows the same letters.

Training data. GPQA has no train split anywhere: 10% of each high-level domain (at least
three) is taken by a hash of (seed 42, id), 21 questions, as training data and excluded from
evaluation (``split_notes``).
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections import Counter
from typing import Any, ClassVar

from hpt.tasks.base import CarvedSplit, DatasetError, Parts, Sample, seeded_slice
from hpt.tasks.choice import ChoiceTask, choice_sample
from hpt.tasks.sources import DATA_DIR_ENV, load_hub, require_file
from hpt.tasks.structured_sources import TRAIN_SEED, csv_dict_rows

# The dataset authors' convention, so the questions stay out of plain-text crawls.
PASSWORD = b"deserted-untie-orchid"
COLUMNS = (
    "Record ID", "Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
    "Incorrect Answer 3", "High-level domain",
)  # fmt: skip


def option_order(record_id: str) -> list[int]:
    """A fixed permutation of the four answers (0 = the correct one) for this question."""
    return sorted(range(4), key=lambda i: hashlib.sha256(f"gpqa:{record_id}:{i}".encode()).digest())


class GPQA(CarvedSplit, ChoiceTask):
    name = "gpqa"
    title = "GPQA Diamond"
    hub_id = "Idavidrein/gpqa"
    hub_config = "gpqa_diamond"
    hub_split = "train"
    report_rank = 11
    exemplar_group = "domain"
    TRAIN_FRACTION: ClassVar[float] = 0.1

    def _sample(self, row: dict[str, Any], where: str) -> Sample:
        missing = [c for c in COLUMNS if not isinstance(row.get(c), str)]
        if missing:
            raise DatasetError(f"{where}: expected text in the columns {missing}")
        record = row["Record ID"].strip()
        answers = [row["Correct Answer"]] + [row[f"Incorrect Answer {i}"] for i in (1, 2, 3)]
        order = option_order(record)
        sample = choice_sample(
            self.name, record, row["Question"].strip(), [answers[i].strip() for i in order],
            order.index(0), where,
            {"domain": row["High-level domain"].strip(), "subdomain": str(row.get("Subdomain"))},
        )  # fmt: skip
        explanation = row.get("Explanation")
        if isinstance(explanation, str) and explanation.strip():
            self._explanations[sample.id] = explanation.strip()
        return sample

    def _rows(self) -> list[tuple[str, dict[str, Any]]]:
        if self.data_dir is None:
            rows = load_hub(self.hub_id, self.hub_config, self.hub_split)
            return [(f"{self.hub_id} {self.hub_split} row {i}", r) for i, r in enumerate(rows)]
        path = require_file(self.data_dir, "gpqa/gpqa_diamond.zip", self.name)
        try:
            with zipfile.ZipFile(path) as archive:
                members = [i for i in archive.infolist() if i.filename.endswith(".csv")]
                if len(members) != 1:
                    raise DatasetError(f"{path}: expected one CSV file in the archive")
                info = members[0]
                if info.compress_type == 99:
                    raise DatasetError(
                        f"{path}: the archive is AES-encrypted; hpt reads ZipCrypto archives "
                        "(as released) only"
                    )
                text = archive.read(info, pwd=PASSWORD).decode("utf-8")
        except (zipfile.BadZipFile, RuntimeError, UnicodeDecodeError) as exc:
            raise DatasetError(
                f"{path}: could not read the password-protected GPQA archive ({exc}); copy "
                f"the released gpqa_diamond.zip there or unset --data-dir/{DATA_DIR_ENV}"
            ) from None
        where = f"{path}!{info.filename}"
        return list(csv_dict_rows(io.StringIO(text, newline=""), where, COLUMNS))

    def _carve(self) -> Parts:
        samples = [self._sample(r, w) for w, r in self._rows()]
        sizes = Counter(s.meta["domain"] for s in samples)
        per = {d: max(3, round(n * self.TRAIN_FRACTION)) for d, n in sizes.items()}
        return seeded_slice(samples, per, lambda s: s.meta["domain"], TRAIN_SEED,
                            lambda s: str(s.fields["question"]))  # fmt: skip

    def _carve_note(self, training: list[Sample]) -> str | None:
        return (
            f"GPQA Diamond has no train split: a seeded slice of {len(training)} questions "
            f"({int(self.TRAIN_FRACTION * 100)}% of each domain, at least 3; seed {TRAIN_SEED})"
        )
