"""Replies cut off at the token limit, as the report's tables and the terminal's show them: of
the model calls that decide a climb (attempts, and adaptive HPF's selector turns), how many
were cut, of how many made, and where; and from which share on a cell's HPI measures the
token budget as much as the model."""

from __future__ import annotations

from hpt.results.tally import Summary

# From this share of a cell's attempts and selector turns cut off at the token limit on, the
# run ends with a warning naming --max-tokens and the report says the cell's HPI measures the
# budget: each cut attempt is unresolved, whatever the model would have answered.
TRUNCATION_WARNING_SHARE = 0.10


def heavily_cut(summary: Summary) -> bool:
    """At least ``TRUNCATION_WARNING_SHARE`` of the cell's calls were cut off."""
    share = summary.truncated_share
    return share is not None and share >= TRUNCATION_WARNING_SHARE


def counted(summary: Summary) -> str:
    """What the cell's share is a share of."""
    return "attempts and selector turns" if summary.selector_turns else "attempts"


def percent(share: float) -> str:
    # A few cuts among many calls are not none ("<1%", never "0%"), and nearly all are not
    # all (">99%", never "100%").
    if 0 < share < 0.005:
        return "<1%"
    return ">99%" if 0.995 <= share < 1 else f"{share:.0%}"


def truncations(summary: Summary, *, by_level: bool = True) -> str:
    """The cell's calls cut off at the token limit, of those made, and (``by_level``) where:
    "3 / 20 (15%; L1 2, selector 1)"; "0" for none. A summary saved before hpt counted the
    attempts made has the count alone: "3 (L1 2, selector 1)"."""
    cut, made = summary.cut_off
    if not cut:
        return "0"
    share = summary.truncated_share
    where = [f"L{level} {n}" for level, n in sorted(summary.truncated.items())]
    where += [f"selector {summary.selector_truncated}"] if summary.selector_truncated else []
    parts = [] if share is None else [percent(share)]
    if by_level:
        parts.append(", ".join(where))
    of = "" if share is None else f" / {made}"
    return f"{cut}{of}" + (f" ({'; '.join(parts)})" if parts else "")


def budget_note(summary: Summary) -> str:
    """One line for a heavily cut cell: what share was cut, and what its HPI then measures."""
    cut, made = summary.cut_off
    share = summary.truncated_share or 0.0
    return (
        f"{summary.cell.title}: {percent(share)} of {counted(summary)} ({cut} of {made}) cut off "
        f"at the token limit, each cut attempt unresolved: its HPI measures the token budget as "
        f"much as the model (raise `--max-tokens`)."
    )
