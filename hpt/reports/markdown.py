"""The Markdown pieces every report writes: a number (or "-" for none), an interval and a
pipe table."""

from __future__ import annotations

from collections.abc import Sequence


def number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def interval(ci: tuple[float, float] | None, digits: int = 2) -> str:
    """A 95% interval as it follows its value: " [low, high]"; nothing for none."""
    return "" if ci is None else f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def pipe_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
