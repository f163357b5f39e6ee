"""One base for the errors hpt reports to a user, and its kinds that cross rooms (raised in
one, such as the response cache or the run store, handled in another, such as the runner or
the command line). A leaf: it imports nothing of hpt, so every room may raise these."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, TypeVar

from pydantic import ValidationError

E = TypeVar("E", bound=BaseException)

EXIT_USAGE = 2  # the input's fault: a flag, a file, a name, a refused key
EXIT_FAILURE = 1  # the machine's (a full disk) or hpt's own (a bug)


class HptError(Exception):
    """Anything hpt tells a user as one line ("hpt: error: ..."): what was wrong and what to
    do. The command line catches this base; ``exit_status`` says whose fault it was."""

    exit_status: ClassVar[int] = EXIT_USAGE


class StorageError(HptError):
    """A write a run depends on failed (disk full, read-only, I/O error): the run must stop
    sending calls at once, since what they return could not be kept."""

    exit_status = EXIT_FAILURE

    def __init__(self, what: str, path: Path | str, cause: OSError) -> None:
        self.what = what  # "a record", "the summary", "the response cache"
        self.path = Path(path)
        self.cause = cause
        reason = cause.strerror or type(cause).__name__
        super().__init__(f"could not write {what} to {self.path}: {reason}")


def validation_message(
    exc: ValidationError, where: str = "", *, prefix: str = "", whole: str = "(top level)"
) -> str:
    """Pydantic's first problem as one line, ``WHERE: FIELD: what is wrong``: ``prefix`` goes
    before the field's path, ``whole`` stands for it when the problem is the whole value."""
    problems = exc.errors()
    first = problems[0]
    key = ".".join(str(p) for p in (*([prefix] if prefix else []), *first["loc"]))
    more = len(problems) - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    msg = first["msg"].removeprefix("Value error, ")
    text = f"{key or whole}: {msg}{tail}"
    return f"{where}: {text}" if where else text


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
