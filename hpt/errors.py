"""Errors that cross rooms: raised in one (the response cache, the run store) and handled in
another (the runner, the command line)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

E = TypeVar("E", bound=BaseException)


class StorageError(Exception):
    """A write a run depends on failed (disk full, read-only, I/O error): the run must stop
    sending calls at once, since what they return could not be kept."""

    def __init__(self, what: str, path: Path | str, cause: OSError) -> None:
        self.what = what  # "a record", "the summary", "the response cache"
        self.path = Path(path)
        self.cause = cause
        reason = cause.strerror or type(cause).__name__
        super().__init__(f"could not write {what} to {self.path}: {reason}")


def in_chain(exc: BaseException, kind: type[E]) -> E | None:
    """The first exception of ``kind`` in ``exc``'s chain of causes and contexts (a library
    such as DSPy may have wrapped it on its way out)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
