"""How much reading matters: re-read a run's saved replies with this checkout's answer readers
and selector reader, and count the climbs whose resolved level would change.

    .venv/bin/python bench/reader_drift.py RUN_DIR [RUN_DIR ...]
    .venv/bin/python bench/reader_drift.py --make-run REV [--limit 50] [--datasets gsm8k,mmlu,csqa]
                                           [--modes adaptive] [--out DIR]
    .venv/bin/python bench/reader_drift.py --compare OLD_RUN NEW_RUN

With ``--make-run REV`` the script first climbs the embedded model with revision REV's code (a
git worktree of REV, run with this checkout's virtualenv), so the saved readings are REV's and
the re-reading is this checkout's: the drift between the two revisions' readers on the very
same completions. No model is called while re-reading.

What is exact and what is not. A standard climb tried every level up to the one its readers
resolved (or all m). Re-read, it resolves at the first tried level today's readers accept: an
earlier level, the same, or none of those tried -- then it would have climbed past the saved
level, to a level the run never asked ("later, not asked"). An adaptive climb follows its
selector: if today's selector reader reads a turn differently, the climb would have taken
another path, whose outcome nobody measured ("path changes"); otherwise its attempts are
re-read like a standard climb's. Counts of changed climbs are exact; where a changed climb
would have ended beyond what was asked is unknown and reported as such.

``--compare OLD_RUN NEW_RUN`` answers that for adaptive runs: NEW_RUN is this checkout's run of
OLD_RUN's command over the same response cache (HPT_CACHE_DIR), so every reply asked before is
served again and new calls go only where today's readers chose another path; the script then
compares the two runs' resolved levels climb by climb.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.graphs.adaptive import strategy_labels  # noqa: E402
from hpt.graphs.selector_reader import parse_level  # noqa: E402
from hpt.prompts import PromptSet  # noqa: E402
from hpt.results.reader import read_records  # noqa: E402
from hpt.results.records import SampleRecord  # noqa: E402
from hpt.tasks import get_task  # noqa: E402
from hpt.tasks.base import Sample, Task  # noqa: E402


def make_run(rev: str, out: Path, limit: int, datasets: str, modes: str) -> Path:
    """Climb the embedded model with revision ``rev``'s code; the run directory."""
    with tempfile.TemporaryDirectory(prefix="hpt-rev-") as tree:
        subprocess.run(["git", "worktree", "add", "--detach", tree, rev], cwd=REPO, check=True,
                       capture_output=True)  # fmt: skip
        try:
            env = {**os.environ, "PYTHONPATH": tree}
            command = [sys.executable, "-c", "import sys; from hpt.cli import main; "
                       "sys.exit(main())", "run", "--dataset", datasets, "--mode", modes,
                       "--limit", str(limit), "--out", str(out)]  # fmt: skip
            subprocess.run(command, cwd=tree, env=env, check=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=REPO,
                           check=False, capture_output=True)  # fmt: skip
    return out


class Rereader:
    """Today's readers, with each dataset's samples loaded once."""

    def __init__(self, data_dir: Path | None) -> None:
        self.data_dir = data_dir
        self.tasks: dict[str, Task] = {}
        self.samples: dict[str, dict[str, Sample]] = {}
        self.selector_prompts = PromptSet.load("adaptive")

    def sample(self, record: SampleRecord) -> tuple[Task, Sample]:
        if record.dataset not in self.tasks:
            task = self.tasks[record.dataset] = get_task(record.dataset, self.data_dir)
            self.samples[record.dataset] = {s.id: s for s in task.load_samples()}
        return self.tasks[record.dataset], self.samples[record.dataset][record.sample_id]

    async def resolved_at(self, record: SampleRecord) -> tuple[list[bool], int]:
        """Today's verdict on each saved attempt, and how many answers it reads differently."""
        task, sample = self.sample(record)
        verdicts, differ = [], 0
        for attempt in record.attempts:
            if attempt.completion is None or attempt.error is not None:
                verdicts.append(attempt.resolved)
                continue
            check = await task.acheck_reply(sample, attempt.completion, attempt.calls)
            verdicts.append(check.resolved)
            differ += check.parsed != attempt.parsed
        return verdicts, differ

    def selections_changed(self, record: SampleRecord) -> tuple[int, int]:
        """(turns read differently, hallucinations today) of an adaptive climb."""
        labels = strategy_labels(self.selector_prompts, record.strategies)
        changed = hallucinated = 0
        for turn in record.selections:
            if turn.error is not None:
                continue
            level = parse_level(turn.answer, record.m, labels)
            changed += level != turn.level
            hallucinated += level is None
        return changed, hallucinated


async def drift(directories: Sequence[Path], data_dir: Path | None) -> None:
    reader = Rereader(data_dir)
    cells: dict[tuple[str, str], Counter[str]] = {}
    for directory in directories:
        for record in read_records(directory):
            if record.error is not None or record.dataset not in (
                "gsm8k",
                "mmlu",
                "csqa",
                "boolq",
                "mmlu_pro",
                "gpqa",
            ):
                continue
            count = cells.setdefault((record.dataset, record.mode), Counter())
            count["climbs"] += 1
            verdicts, differ = await reader.resolved_at(record)
            count["attempts"] += len(verdicts)
            count["answers read differently"] += differ
            if record.mode == "adaptive":
                changed, hallucinated = reader.selections_changed(record)
                count["selector turns"] += len(record.selections)
                count["selector turns read differently"] += changed
                count["hallucinations saved"] += sum(s.hallucinated for s in record.selections)
                count["hallucinations today"] += hallucinated
                if changed:
                    count["path changes (outcome not asked)"] += 1
                    continue
                first = next((i for i, ok in enumerate(verdicts) if ok), None)
                was = next((i for i, a in enumerate(record.attempts) if a.resolved), None)
                if first == was:
                    count["unchanged"] += 1
                elif first is None:
                    count["unresolved today (would ask the selector again)"] += 1
                else:
                    count["resolved at another attempt"] += 1
                continue
            levels = [a.level for a in record.attempts]
            first = next((lv for lv, ok in zip(levels, verdicts, strict=True) if ok), None)
            saved = record.resolved_level
            if first == saved:
                count["unchanged"] += 1
            elif first is not None and (saved is None or first < saved):
                count["resolved earlier"] += 1
            elif len(levels) < record.m:
                count["later, not asked"] += 1
            else:
                count["resolved -> unresolved"] += 1
    for (dataset, mode), count in sorted(cells.items()):
        changed = count["climbs"] - count["unchanged"]
        print(f"{dataset} · {mode}: {count['climbs']} climbs, {changed} change "
              f"({changed / count['climbs']:.0%})")  # fmt: skip
        for key, value in count.items():
            if key not in ("climbs", "unchanged"):
                print(f"  {key}: {value}")


def compare(old: Path, new: Path) -> None:
    """Climb by climb, an earlier revision's run against this checkout's run of the same spec
    over the same response cache: replies asked before come from the cache, so the two differ
    only where the readers (and the paths they chose) differ; new calls were made only there."""
    before = {r.key: r for r in read_records(old)}
    cells: dict[tuple[str, str], Counter[str]] = {}
    for record in read_records(new):
        was = before.get(record.key)
        if was is None:
            continue
        count = cells.setdefault((record.dataset, record.mode), Counter())
        count["climbs"] += 1
        count["calls sent (not cache or shared)"] += record.calls - record.cached_calls
        count["hallucinations before"] += sum(s.hallucinated for s in was.selections)
        count["hallucinations now"] += sum(s.hallucinated for s in record.selections)
        count["strategy attempts before"] += len(was.attempts)
        count["strategy attempts now"] += len(record.attempts)
        if (was.resolved_level, was.iteration) == (record.resolved_level, record.iteration):
            count["unchanged"] += 1
            continue
        count["resolved level changes"] += 1
        if was.resolved_level is None:
            count["  unresolved -> resolved"] += 1
        elif record.resolved_level is None:
            count["  resolved -> unresolved"] += 1
        else:
            count["  resolved at another level or iteration"] += 1
    for (dataset, mode), count in sorted(cells.items()):
        print(f"{dataset} · {mode}: {count['climbs']} climbs in both runs, "
              f"{count['resolved level changes']} resolved levels change")  # fmt: skip
        for key, value in count.items():
            if key not in ("climbs", "resolved level changes"):
                print(f"  {key}: {value}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", type=Path, nargs="*")
    ap.add_argument("--make-run", metavar="REV", help="first climb the embedded model at REV")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("OLD_RUN", "NEW_RUN"),
                    help="compare two runs of one spec over one cache, climb by climb")  # fmt: skip
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--datasets", default="gsm8k,mmlu,csqa")
    ap.add_argument("--modes", default="adaptive")
    ap.add_argument("--out", type=Path, default=None, help="the made run's directory")
    ap.add_argument("--data-dir", type=Path, default=None,
                    help="offline data (default: HPT_DATA_DIR, else ../shared/data)")  # fmt: skip
    args = ap.parse_args()
    data_dir = args.data_dir or Path(os.environ.get("HPT_DATA_DIR") or REPO.parent / "shared/data")
    if args.compare:
        compare(*args.compare)
        return
    directories = list(args.run_dirs)
    if args.make_run:
        out = args.out or Path(tempfile.mkdtemp(prefix="hpt-drift-")) / "run"
        directories.append(make_run(args.make_run, out, args.limit, args.datasets, args.modes))
    if not directories:
        ap.error("give a run directory, or --make-run REV")
    asyncio.run(drift(directories, data_dir))


if __name__ == "__main__":
    main()
