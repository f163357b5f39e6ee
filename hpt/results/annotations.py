"""Where annotations live: one append-only JSON-lines file per dataset, ``DIR/DATASET.jsonl``,
one line per (annotator, sample) with the four scores. Several annotators and sessions add
to the same file; a later line by the same annotator for the same sample replaces an earlier
one (hpt.results.penalties.latest). DIR is ``--out``/``--annotations``, else
``$HPT_ANNOTATIONS_DIR``, else ``$XDG_DATA_HOME/hpt/annotations`` (``~/.local/share/...``).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from hpt.errors import validation_message
from hpt.results.penalties import Annotation
from hpt.results.rundir import RunDirError

ANNOTATIONS_ENV = "HPT_ANNOTATIONS_DIR"


class AnnotationsError(RunDirError):
    """An annotations file that cannot be read or written (a user's error, reported in one
    line as a run directory's are)."""


def default_annotations_dir() -> Path:
    """Annotations are the user's data, not a cache: the data directory, not the cache's."""
    given = os.environ.get(ANNOTATIONS_ENV)
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    root = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return root / "hpt" / "annotations"


def annotations_file(directory: Path, dataset: str) -> Path:
    return directory / f"{dataset}.jsonl"


def read_annotations(path: Path) -> list[Annotation]:
    """Every annotation in ``path`` (none when it does not exist). A torn last line (a
    session killed mid-write) is skipped; any other bad line is an error naming it."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise AnnotationsError(f"cannot read {path}: {exc}") from None
    found = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            found.append(Annotation.model_validate_json(line))
        except ValidationError as exc:
            if number == len(lines):  # no newline after it: torn
                continue
            raise AnnotationsError(
                validation_message(exc, f"{path}:{number}", whole="line")
            ) from None
    return found


def append_annotation(path: Path, annotation: Annotation) -> None:
    """Add one line, whole (one write in append mode) and flushed to disk."""
    line = (annotation.model_dump_json() + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise AnnotationsError(f"cannot write {path}: {exc.strerror}") from None
