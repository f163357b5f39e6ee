"""Each dataset's HPI_dataset for a run, and where it came from.

In order: a value set by hand (``--penalty``, or ``penalties`` in the run's settings); the
annotations in ``--annotations DIR`` (``hpt annotate``'s files: human annotators' scores when
there are any, else a model annotator's); else the value the dataset declares with its
source (HPT's table 4, or a stated stand-in). The choice is made when a run starts and saved
in run.json (``penalties``), so a resumed run keeps it whatever the annotations became.
"""

from __future__ import annotations

from hpt.results.annotations import measured_penalty
from hpt.results.penalties import Penalty
from hpt.runs.spec import ConfigError, RunSpec
from hpt.tasks import task_class


def declared_penalty(dataset: str) -> Penalty:
    cls = task_class(dataset)
    return Penalty(value=cls.penalty, source=cls.penalty_source)


def run_penalties(spec: RunSpec) -> dict[str, Penalty]:
    """Every dataset of ``spec``'s penalty (reads annotation files: blocking)."""
    stray = [name for name in spec.penalties if name not in spec.dataset]
    if stray:
        raise ConfigError(
            f"--penalty names {', '.join(stray)}, which the run does not evaluate "
            f"({', '.join(spec.dataset)})"
        )
    if spec.annotations is not None and not spec.annotations.is_dir():
        raise ConfigError(
            f"--annotations {spec.annotations}: no such directory (hpt annotate writes there)"
        )
    chosen = {}
    for name in spec.dataset:
        if name in spec.penalties:
            chosen[name] = spec.penalties[name]
            continue
        if spec.annotations is not None:
            found, path = measured_penalty(spec.annotations, task_class(name).name)
            if found is not None:
                chosen[name] = found.penalty(str(path))
                continue
        chosen[name] = declared_penalty(name)
    return chosen


def penalty_notices(penalties: dict[str, Penalty]) -> list[str]:
    """One line per dataset whose penalty no human measured and nobody set by hand."""
    lines = []
    for name, p in penalties.items():
        if p.source.by_humans or p.source.kind == "set":
            continue
        if p.source.kind == "model":
            why = "a model's scores, not human annotators'"
        else:
            why = (f"nobody has annotated {name}: measure it with `hpt annotate {name}` "
                   f"(then --annotations), or set one with --penalty")  # fmt: skip
        lines.append(f"{name}: an unresolved sample scores m + {p.value:.4g}, "
                     f"{p.source.label}; {why}")  # fmt: skip
    return lines
