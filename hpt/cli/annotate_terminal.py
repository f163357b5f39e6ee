"""``hpt annotate --terminal``: the browser page's work in a terminal. Each sample is shown in
full, then each criterion asks for a score 1-5 on its own line ("s" skips the sample, "q" or
end of input stops); a sample is saved as soon as its four scores are in."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.rule import Rule
from rich.text import Text

from hpt.orchestrator.annotate import Guide, SampleView
from hpt.results.annotations import append_annotation, read_annotations
from hpt.results.penalties import Annotation, Scores


class _Stop(Exception):
    pass


class _Skip(Exception):
    pass


def _ask(console: Console, stdin: TextIO, prompt: str) -> int:
    while True:
        console.print(prompt, end="", markup=False, highlight=False)
        line = stdin.readline()
        if not line:  # end of input
            console.print()
            raise _Stop
        answer = line.strip().lower()
        if answer in ("q", "quit"):
            raise _Stop
        if answer in ("s", "skip"):
            raise _Skip
        if answer in ("1", "2", "3", "4", "5"):
            return int(answer)
        console.print(f"  {line.strip()!r}: type 1 to 5, s to skip, q to stop",
                      markup=False, highlight=False)  # fmt: skip


def _show(console: Console, view: SampleView, place: str) -> None:
    heading = f"{place} {view.id}" + (f" · {view.category}" if view.category else "")
    console.print(Rule(Text(heading), style="bold"))
    for label, body in view.blocks:
        console.print(f"{label}:", style="bold", markup=False, highlight=False)
        console.print(body, markup=False, highlight=False)
        console.print()
    console.print("Reference answer:", style="bold", markup=False, highlight=False)
    console.print(view.answer, markup=False, highlight=False)
    console.print()


def score_in_terminal(
    console: Console,
    stdin: TextIO,
    views: Sequence[SampleView],
    guide: Guide,
    path: Path,
    dataset: str,
    annotator: str,
) -> int:
    """Score the samples ``annotator`` has not scored yet; the number saved."""
    done = {a.sample_id for a in read_annotations(path) if a.annotator == annotator}
    todo = [v for v in views if v.id not in done]
    console.print(guide.guidance, markup=False, highlight=False)
    for c in guide.criteria:
        console.print(f"  {c.name}: {c.definition}", markup=False, highlight=False)
    console.print(
        f"{len(views) - len(todo)} of {len(views)} scored by {annotator} already; "
        f"{len(todo)} to go. Type 1-5 for each criterion, s to skip a sample, q to stop.",
        markup=False, highlight=False,
    )  # fmt: skip
    saved = 0
    for n, view in enumerate(todo, 1):
        _show(console, view, f"[{n}/{len(todo)}]")
        try:
            given = {c.key: _ask(console, stdin, f"{c.name} (1-5): ") for c in guide.criteria}
        except _Skip:
            continue
        except _Stop:
            break
        annotation = Annotation(
            dataset=dataset, sample_id=view.id, annotator=annotator, kind="human",
            scores=Scores.model_validate(given), at=datetime.now().isoformat(timespec="seconds"),
        )  # fmt: skip
        append_annotation(path, annotation)
        saved += 1
    return saved
