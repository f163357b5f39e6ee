"""How much the answer readers matter: re-read a run's completions with the readers of an
earlier revision and count the samples whose resolved level would change.

    .venv/bin/python bench/reader_drift.py RUN_DIR [--rev GIT_REV]

The run was climbed by today's readers, so every level up to the one that resolved (or all of
them) was tried. The earlier readers read those same completions: if they first resolve at
level j, their climb would have stopped there; if they resolve none of the levels tried and
today's resolved at k < m, theirs would have gone on past k (a change, to a level the run did
not try). The count of changed samples is therefore exact; only the level a changed sample
would have reached beyond k is unknown. The run's `readings` (GSM8K's strict reader, the
rule reader beside an --extractor-model) are printed too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from hpt.results.store import read_records

REPO = Path(__file__).resolve().parents[1]
# The last revision before issue 11 replaced the readers.
OLD_READERS = "01a0aaf"


def old_readers(rev: str) -> dict[str, Callable[[str], str | None]]:
    source = subprocess.run(
        ["git", "show", f"{rev}:hpt/tasks/parsing.py"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    module = types.ModuleType("old_parsing")
    exec(compile(source, f"{rev}:hpt/tasks/parsing.py", "exec"), module.__dict__)
    return {
        "boolq": module.parse_bool,
        "gsm8k": module.parse_number,
        "csqa": lambda text: module.parse_choice(text, "ABCDE"),
        "mmlu": lambda text: module.parse_choice(text, "ABCD"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument(
        "--rev", default=OLD_READERS, help=f"revision of the old readers ({OLD_READERS})"
    )
    args = ap.parse_args()
    readers = old_readers(args.rev)
    per: dict[str, Counter[str]] = {}
    moves: dict[str, Counter[tuple[object, object]]] = {}
    for record in read_records(args.run_dir):
        read = readers.get(record.dataset)
        if read is None or record.error is not None or record.mode != "standard":
            continue
        tally = per.setdefault(record.dataset, Counter())
        tally["samples"] += 1
        old_level: object = None
        for attempt in record.attempts:
            old = read(attempt.completion or "")
            tally["attempts"] += 1
            tally["attempts read differently"] += old != attempt.parsed
            if old is not None and old == record.target:
                old_level = attempt.level
                break
        else:
            if record.resolved_level is not None:
                old_level = f">{record.resolved_level}"  # the old climb would have gone on
        new_level = record.resolved_level
        if old_level != new_level:
            tally["resolved level changed"] += 1
            moves.setdefault(record.dataset, Counter())[(old_level, new_level)] += 1
    for dataset, tally in per.items():
        print(f"{dataset}: {dict(tally)}")
        for (old, new), count in sorted(moves.get(dataset, {}).items(), key=str):
            print(f"    old {old or 'unresolved'} -> new {new or 'unresolved'}: {count}")
    summary = json.loads((args.run_dir / "summary.json").read_text())
    for cell in summary["cells"]:
        for name, reading in cell.get("readings", {}).items():
            print(
                f"{cell['dataset']} {cell['model']}: reader {name!r} vs the deciding one: {reading}"
            )


if __name__ == "__main__":
    main()
