"""What the loaders of the structured-prompting (DSPy+HELM) paper's benchmarks share: the seed
of the training slices carved from a test split (``TRAIN_SEED``), CSV files with a header
(``csv_dict_rows``), and loading from the hub only (``HubOnly``: HeadQA, MedBullets, MEDEC).

The hub-only benchmarks load from the Hugging Face hub through ``load_hub``. Given a data
directory, they read the folder NAME/ in it (``headqa/``, ``medbullets/``, ``medec/``) the
same way: ``datasets`` loads a local folder of the hub's files (JSON lines, CSV or Parquet in
the hub's column format) with its splits named by the files, ``test.*`` and ``train.*``. A
data directory without that folder is a DatasetError saying so.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

from hpt.tasks.base import DatasetError, Task
from hpt.tasks.sources import DATA_DIR_ENV, load_hub

TRAIN_SEED = 42


def csv_dict_rows(
    lines: Iterable[str], where: str, required: Iterable[str]
) -> Iterator[tuple[str, dict[str, str]]]:
    """(place, row) for each record of a CSV file with a header; a missing column is a
    DatasetError naming the file. The place is "FILE:LINE" (the record's last line)."""
    reader = csv.DictReader(lines)
    try:
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise DatasetError(f"{where}:1: expected the columns {missing} in the header")
        for row in reader:
            if None in row or any(v is None for v in row.values()):
                raise DatasetError(
                    f"{where}:{reader.line_num}: expected {len(reader.fieldnames or [])} columns"
                )
            yield f"{where}:{reader.line_num}", row
    except csv.Error as exc:
        raise DatasetError(f"{where}:{reader.line_num}: not valid CSV ({exc})") from None


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
