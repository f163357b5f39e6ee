"""Each dataset's HPI_dataset for a run, and where it came from.

In order: a value set by hand (``--penalty``, or ``penalties`` in the run's settings); the
annotations in ``--annotations DIR`` (``hpt annotate``'s files) of the dataset's
representative set as ``hpt annotate`` draws it by default (seed 0, 5%), once every sample
of it is scored: human annotators' when they scored them all, else a model annotator's; else
the value the dataset declares with its source (HPT's table 4, or a stated stand-in). A set
scored in part is not used: its mean is not the paper's measure, and the samples left are
often the ones skipped as hard; the penalty's ``note`` (and the run's notice) says so. The
choice is made when a run starts and saved in run.json (``penalties``), so a resumed run
keeps it whatever the annotations became.
"""

from __future__ import annotations

from pathlib import Path

from hpt.orchestrator.annotate import representative_set
from hpt.orchestrator.spec import ConfigError, RunSpec
from hpt.results.annotations import annotations_file, read_annotations
from hpt.results.penalties import Penalty, annotated_penalties, scored_outside
from hpt.tasks import get_task, resolve_data_dir, task_class


def declared_penalty(dataset: str) -> Penalty:
    cls = task_class(dataset)
    return Penalty(value=cls.penalty, source=cls.penalty_source)


def run_penalties(spec: RunSpec) -> dict[str, Penalty]:
    """Every dataset of ``spec``'s penalty (reads annotation files and, where they hold the
    dataset's, its samples: blocking)."""
    stray = [name for name in spec.penalties if name not in spec.dataset]
    if stray:
        raise ConfigError(
            f"--penalty names {', '.join(stray)}, which the run does not evaluate "
            f"({', '.join(spec.dataset)})"
        )
    chosen = {}
    for name in spec.dataset:
        if name in spec.penalties:  # set by hand, or saved in run.json by the run resumed
            chosen[name] = spec.penalties[name]
        elif spec.annotations is not None:
            chosen[name] = annotated_or_declared(spec, name, spec.annotations)
        else:
            chosen[name] = declared_penalty(name)
    return chosen


def annotated_or_declared(spec: RunSpec, name: str, directory: Path) -> Penalty:
    if not directory.is_dir():
        raise ConfigError(
            f"--annotations {directory}: no such directory (hpt annotate writes there)"
        )
    declared = declared_penalty(name)
    task = get_task(name, resolve_data_dir(spec.data_dir))
    path = annotations_file(directory, task.name)
    annotations = [a for a in read_annotations(path) if a.dataset == task.name]
    if not annotations:
        return declared
    ids = [s.id for s in representative_set(task).samples]
    found = annotated_penalties(annotations, task.name, ids)
    partial: list[str] = []
    for measured in found:
        if measured.complete:
            penalty = measured.penalty(str(path))
            return _noted(penalty, partial) if partial else penalty
        partial.append(f"{measured.coverage(str(path))}: not used until every one is scored "
                       f"(`hpt annotate {task.name}`)")  # fmt: skip
    if not found:
        others = scored_outside(annotations, task.name, ids)
        partial.append(f"the annotations in {path} score none of the {len(ids)} samples of the "
                       f"representative set a run measures on (`hpt annotate {task.name}` "
                       f"without --seed or --fraction), only {others} of another set")  # fmt: skip
    return _noted(declared, partial)


def _noted(penalty: Penalty, notes: list[str]) -> Penalty:
    source = penalty.source.model_copy(update={"note": "; ".join(notes)})
    return penalty.model_copy(update={"source": source})


def penalty_notices(penalties: dict[str, Penalty]) -> list[str]:
    """One line per dataset whose penalty no human measured and nobody set by hand, or that
    annotations were found for but not used."""
    lines = []
    for name, p in penalties.items():
        if p.source.kind == "set":
            continue
        why = [p.source.note] if p.source.note else []
        if p.source.kind == "model":
            why.append("a model's scores, not human annotators'")
        elif not p.source.by_humans and p.source.note:
            why.append("or set one with --penalty")
        elif not p.source.by_humans:
            why.append(f"nobody has annotated {name}: measure it with `hpt annotate {name}` "
                       f"(then --annotations), or set one with --penalty")  # fmt: skip
        if why:
            lines.append(f"{name}: an unresolved sample scores m + {p.value:.4g}, "
                         f"{p.source.label}; {'; '.join(why)}")  # fmt: skip
    return lines
