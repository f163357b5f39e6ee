"""``hpt agreement``: how far two runs' judges agree on the same nodes (DepthQA table 14):
Krippendorff's alpha with the ordinal metric over the nodes both runs scored."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from hpt.results.depth import krippendorff_alpha_ordinal
from hpt.results.reader import read_records
from hpt.results.records import Cell, DepthRecord
from hpt.results.rundir import RunDirError

# A node of a cell, and the draw: what two runs of the same nodes share.
Key = tuple[Cell, str, int]


class Agreement(BaseModel):
    """Alpha over the units both runs scored; ``by_depth`` splits them by node depth."""

    units: int
    # Nodes in one run only, or scored in one but missing (no valid judge score) in the other.
    unmatched: int
    alpha: float | None
    exact: float | None  # the share of units given the same score
    by_depth: dict[str, float | None]


def _scores(directory: Path) -> dict[Key, tuple[int, int | None]]:
    found: dict[Key, tuple[int, int | None]] = {}
    for record in read_records(directory):
        if isinstance(record, DepthRecord) and record.error is None:
            found[record.cell, record.node_id, record.draw] = (record.depth, record.judge_score)
    if not found:
        raise RunDirError(f"{directory} holds no judged DepthQA records")
    return found


def agreement(first: Path, second: Path) -> Agreement:
    a, b = _scores(first), _scores(second)
    shared = sorted(set(a) & set(b), key=str)
    pairs = [(a[k][0], a[k][1], b[k][1]) for k in shared]
    scored = [(d, x, y) for d, x, y in pairs if x is not None and y is not None]
    if not shared:
        raise RunDirError(
            f"{first} and {second} share no node (same dataset, model, mode, variant and node); "
            f"compare runs of the same nodes judged differently"
        )
    by_depth = {
        str(depth): krippendorff_alpha_ordinal([[x, y] for d, x, y in scored if d == depth])
        for depth in (1, 2, 3)
    }
    return Agreement(
        units=len(scored),
        unmatched=len(set(a) ^ set(b)) + len(pairs) - len(scored),
        alpha=krippendorff_alpha_ordinal([[x, y] for _, x, y in scored]),
        exact=sum(x == y for _, x, y in scored) / len(scored) if scored else None,
        by_depth=by_depth,
    )


def save(result: Agreement, path: Path) -> None:
    """The agreement as JSON, for scripts."""
    try:
        path.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise RunDirError(f"cannot write {path}: {exc.strerror}") from None
