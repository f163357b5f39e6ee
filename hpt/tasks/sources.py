"""Reading rows from the offline files (laid out as in shared/data) or the Hugging Face hub."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import zlib
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


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line with its end) of a UTF-8 text file, gzip-compressed when its name
    ends in .gz; bytes that are not UTF-8 are a DatasetError naming the line. Decoded line by
    line (a newline byte is never part of another character in UTF-8), so the error can say
    where; a byte-order mark is dropped."""
    try:
        with _open_bytes(path) as fh:
            for lineno, raw in enumerate(fh, 1):
                try:
                    yield lineno, raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise DatasetError(
                        f"{path}:{lineno}: not UTF-8 text (byte {raw[exc.start]:#04x} at "
                        f"column {exc.start + 1}); is it the right file, or damaged?"
                    ) from None
    except (OSError, EOFError, zlib.error) as exc:  # EOFError, zlib.error: damaged gzip
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise DatasetError(f"cannot read {path}: {reason or type(exc).__name__}") from None


def _open_bytes(path: Path) -> io.BufferedIOBase:
    """A file's bytes; a .gz file's decompressed."""
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) pairs; a line that is not a JSON object is a DatasetError."""
    for lineno, line in text_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:  # JSONDecodeError, or a number too long to read
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise DatasetError(f"{path}:{lineno}: not valid JSON ({reason})") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{lineno}: expected a JSON object")
        yield lineno, row


def csv_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 CSV file, for ``csv.reader`` (which counts them itself)."""
    return (line for _, line in text_lines(path))


def read_csv_rows(path: Path, width: int) -> Iterator[tuple[int, list[str]]]:
    """(record number, row) pairs (the number counts records, which sample ids are made of;
    errors name the line)."""
    reader = csv.reader(csv_lines(path))
    try:
        for number, row in enumerate(reader, 1):
            if len(row) != width:
                raise DatasetError(
                    f"{path}:{reader.line_num}: expected {width} columns, found {len(row)}"
                )
            yield number, row
    except csv.Error as exc:
        raise DatasetError(f"{path}:{reader.line_num}: not valid CSV ({exc})") from None


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
