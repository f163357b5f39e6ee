"""Hand-made run directories: records whose every number is known in advance."""

from __future__ import annotations

import json
from pathlib import Path

from hpt.backends.base import Message, Usage
from hpt.graphs import DEFAULT_LADDER
from hpt.results import Attempt, Call, Selection
from hpt.results.records import SampleRecord
from hpt.results.tally import Summary
from hpt.tasks import TASKS


def make_record(
    sample_id: str, *, dataset: str = "boolq", model: str = "alpha", mode: str = "standard",
    level: int | None, penalty: float = 1.71, m: int = 5, error: str | None = None,
    threshold: float | None = None, tokens: tuple[int, int] = (100, 10), final: str = "True",
    target: str = "True", iteration: int | None = None, hallucinations: int = 0,
    score: float | None = None,
) -> SampleRecord:  # fmt: skip
    """A climb that tried levels 1..level (or all m) with one call each of ``tokens``."""
    tried = level or m
    attempts = []
    for k in range(1, tried + 1):
        call = Call(
            purpose="answer", model=model,
            messages=[Message(role="user", content=f"Q {sample_id} at level {k}")],
            completion=final if k == level else "unsure", usage=Usage(
                prompt_tokens=tokens[0], completion_tokens=tokens[1]),
        )  # fmt: skip
        attempts.append(
            Attempt(level=k, strategy=DEFAULT_LADDER[k - 1], calls=[call],
                    completion=call.completion, parsed=final if k == level else None,
                    resolved=k == level, score=score, iteration=iteration if k == level else None)
        )  # fmt: skip
    if error:
        attempts[-1].error = error
    selections = [
        Selection(iteration=i + 1, answer="Level 9", level=None) for i in range(hallucinations)
    ]
    if mode == "adaptive":
        hpi = m + penalty if level is None or iteration is None else float(level + iteration)
    else:
        hpi = m + penalty if level is None else float(level)
    return SampleRecord(
        sample_id=sample_id, dataset=dataset, model=model, mode=mode, strategies=list(DEFAULT_LADDER),
        m=m, penalty=penalty, target=target, threshold=threshold, resolved_level=level if not error else None,
        hpi_score=None if error else hpi, error=error, attempts=attempts, iteration=iteration,
        selections=selections,
    )  # fmt: skip


def write_run(directory: Path, records: list[SampleRecord], spec: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "samples.jsonl").open("w") as fh:
        for r in records:
            fh.write(r.model_dump_json() + "\n")
    if spec is None:  # as a run writes it: the datasets' descriptions beside the spec
        datasets = list(dict.fromkeys(r.dataset for r in records)) or ["boolq"]
        tasks = {d: TASKS[d].info().model_dump() for d in datasets if d in TASKS}
        spec = {"dataset": datasets, "tasks": tasks}
    (directory / "run.json").write_text(json.dumps(spec))
    return directory


def make_summary(**extra: object) -> Summary:
    """A cell's summary with plausible figures (a GSM8K cell of 10 samples, 25 attempts),
    ``extra`` over them."""
    fields: dict[str, object] = dict(
        dataset="gsm8k", model="thinker", mode="standard", n=10, samples=10, m=3, penalty=1.0,
        hpi=2.0, accuracy=0.5, level1_accuracy=0.3, level_counts={1: 3, 2: 2}, unresolved=5,
        errors=0, calls=25, prompt_tokens=1000, completion_tokens=900, attempts=25,
    )  # fmt: skip
    return Summary.model_validate({**fields, **extra})
