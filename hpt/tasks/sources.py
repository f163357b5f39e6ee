"""Reading rows from the offline files (laid out as in shared/data) or the Hugging Face hub."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hpt.tasks.base import DatasetError

DATA_DIR_ENV = "HPT_DATA_DIR"


def resolve_data_dir(flag: str | os.PathLike[str] | None) -> Path | None:
    """``--data-dir`` wins over ``$HPT_DATA_DIR``; None means "load from the hub"."""
    raw = flag if flag is not None else os.environ.get(DATA_DIR_ENV) or None
    if raw is None:
        return None
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise DatasetError(
            f"data directory {path} does not exist; point --data-dir or {DATA_DIR_ENV} at a "
            "directory laid out like shared/data"
        )
    return path


def require_file(data_dir: Path, relative: str, dataset: str) -> Path:
    path = data_dir / relative
    if not path.is_file():
        raise DatasetError(
            f"{dataset}: expected {path} in the data directory; copy the {dataset} files there "
            f"or unset --data-dir/{DATA_DIR_ENV} to load from the Hugging Face hub"
        )
    return path


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) pairs; a line that is not a JSON object is a DatasetError."""
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise DatasetError(f"{path}:{lineno}: expected a JSON object")
            yield lineno, row


def read_csv_rows(path: Path, width: int) -> Iterator[tuple[int, list[str]]]:
    with path.open(encoding="utf-8", newline="") as fh:
        for lineno, row in enumerate(csv.reader(fh), 1):
            if len(row) != width:
                raise DatasetError(f"{path}:{lineno}: expected {width} columns, found {len(row)}")
            yield lineno, row


def field(row: dict[str, Any], key: str, where: str, kind: type = str) -> Any:
    """``row[key]`` checked for presence and type, with a message naming the row."""
    if key not in row:
        raise DatasetError(f"{where}: missing field {key!r}")
    value = row[key]
    if not isinstance(value, kind):
        raise DatasetError(f"{where}: field {key!r} should be {kind.__name__}, got {value!r:.60}")
    return value


def load_hub(hub_id: str, config: str | None, split: str) -> list[dict[str, Any]]:
    """Rows of a hub dataset split. Blocking: call from a worker thread."""
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - datasets is a dependency
        raise DatasetError("the 'datasets' package is needed to load from the hub") from exc
    try:
        ds = datasets.load_dataset(hub_id, config, split=split)
    except Exception as exc:  # datasets raises many unrelated types for "not reachable"
        raise DatasetError(
            f"could not load {hub_id} ({config or 'default'}, {split}) from the Hugging Face hub: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; "
            f"for offline files use --data-dir or {DATA_DIR_ENV}"
        ) from None
    return [dict(r) for r in ds]
