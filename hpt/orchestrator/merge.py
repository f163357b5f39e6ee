"""Joining the shards of a campaign (``hpt run --shard I/N``) into one run directory
(``hpt merge DIR... --out DIR``) that reports, views, compares and resumes as the run of one
process would.

What is checked: every directory is a shard of the same campaign (same spec, field by field
as ``PER_PROCESS`` says; same shard count; no index twice), holds only records of the
campaign's cells and of its own slice (the hash ``--shard`` chose them by: a record elsewhere
means the directory was not made by ``--shard``, or with another seed; DepthQA's, sharded by
their question graph, only in no other shard) and is not written to while it is merged. What
is required: every shard present and finished, unless ``partial`` (the merged run is then
incomplete, and ``hpt run --resume`` finishes it). The input directories are only read; the
merged run is written into a new directory beside ``out`` and renamed into place once whole."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import secrets
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ValidationError

from hpt.backends.batch_journal import JOURNAL, RESULTS
from hpt.backends.secrets import redact_urls
from hpt.errors import HptError, StorageError, validation_message
from hpt.graphs import DEFAULT_LADDER
from hpt.orchestrator.budget import SPEND, ModelSpend, Spend, load_spend, spend_of_records
from hpt.orchestrator.planning import reasoning_settings
from hpt.orchestrator.resume import load_saved_spec
from hpt.orchestrator.spec import SavedSpec, Shard, evaluated
from hpt.results.costs import ModelPrice
from hpt.results.info import TaskInfo
from hpt.results.lock import LOCK
from hpt.results.reader import read_records
from hpt.results.records import Cell, DepthRecord, SampleRecord
from hpt.results.rundir import SAMPLES, SPEC, SUMMARY, RunDirError
from hpt.results.runfile import MergedShard, RunSummary
from hpt.results.store import RunStore
from hpt.results.tally import Summary, Tally, summarize_cells
from hpt.structured.optimise import calls_file, meta_file
from hpt.structured.runtime import PROGRAMS_DIR, USAGE_FILE
from hpt.tasks import task_class
from hpt.tasks.base import in_shard
from hpt.tasks.depthqa.graph import GRAPH_FILES
from hpt.tasks.generation import GenerationTask

# run.json's fields that may differ between the shards of one campaign, and why. Every other
# field (the matrix, the ladder, the models, seed, limit, params, samples per task, epoch,
# penalties, the contents of --program files and of DepthQA's --graph, plugins, batch mode,
# the datasets' descriptions and the generation parameters sent, and any field added later)
# must be equal: it says what the records measure, and one run holds one of each.
PER_PROCESS = {
    # Checked apart: one count, each index once.
    "shard": "each directory's own slice",
    "out": "each shard's own directory",
    # When and how each process ran: kept per shard in the merged run's ``merged_from``.
    "started_at": "when each process started (the merged run: the earliest)",
    "resumed_at": "when each process was resumed",
    "command": "each process's command line (the merged run: the merge's)",
    "python": "nodes of a cluster may differ",
    "platform": "nodes of a cluster may differ",
    # Warned of, as a resume by another version is: the records of both stand in one run.
    "hpt_version": "a difference is warned of (the merged run: the first shard's)",
    # How fast each process went, which a resume may change too: the first shard's.
    "concurrency": "pacing",
    "max_concurrency": "pacing",
    "requests_per_minute": "pacing (a cluster splits a provider's limit among shards)",
    "tokens_per_minute": "pacing",
    "retry": "pacing",
    "batch_size": "pacing",
    "batch_wait_s": "pacing",
    "batch_poll_s": "pacing",
    # Where files were on each machine; what they gave is compared (tasks, penalties, prices).
    "data_dir": "a path on each machine",
    "annotations": "a path on each machine",
    "prices_file": "a path on each machine",
    # Where each process reached its models: a Slurm array whose jobs each serve their own
    # vLLM (--base-url http://$(hostname):8000/v1) is one campaign; the models' labels,
    # providers and ids are compared (named models' endpoints: MODEL_PER_PROCESS).
    "base_url": "each process's own endpoint",
    "cache": "on or off is how a process ran, not what it measured",
    # Each process's own bound: the merged run's is their sum (none where a shard had none).
    "budget_usd": "summed",
    "max_calls": "summed",
    # Each shard priced the models it opened: joined label by label, never two ways.
    "prices": "joined by label",
    "merged_from": "written by merge",
}
# A named model's settings of how each process reached it, not of which model answered (its
# provider and id are compared, as is the label records carry).
MODEL_PER_PROCESS = {
    "endpoints", "api_key_env", "max_concurrency", "requests_per_minute", "tokens_per_minute",
    "min_concurrency", "adaptive_concurrency", "timeout_s", "retry", "health_interval_s",
    "slots", "client",
}  # fmt: skip
# Program files that are not programs: the meters (summed) and a save cut short (left out).
PROGRAM_SUFFIXES = (".meta.json", ".calls.jsonl", ".tmp.json", ".tmp")


class MergeError(RunDirError):
    """Shards that cannot be one run, or a merge that cannot be written where asked."""


@dataclass
class ShardDir:
    path: Path
    spec: SavedSpec
    shard: Shard
    summary: RunSummary | None  # None: no summary.json (stopped before it ended)
    # samples.jsonl's and summary.json's size and time of change as the merge found them.
    stamp: tuple[tuple[int, int] | None, ...]
    # Records by cell, counted as they are merged.
    records: Counter[Cell] = field(default_factory=Counter)

    @property
    def name(self) -> str:
        return f"shard {self.shard} ({self.path})"

    def unfinished(self) -> str | None:
        """Why this shard does not hold its whole slice; None: it does. Finished means its
        last session ended with every sample recorded (summary.json's ``complete``) and its
        records are still the ones that summary counted (a resume that dropped errored records
        to run them again, killed, leaves a finished summary over fewer records)."""
        if self.summary is None:
            return f"{self.name} has no {SUMMARY} (it stopped before it ended)"
        if not self.summary.complete:
            return f"{self.name} is not finished ({SUMMARY} says so)"
        counted = {s.cell: s.samples for s in self.summary.cells if s.samples}
        if counted != dict(self.records):
            held, said = self.records.total(), sum(counted.values())
            return f"{self.name} holds {held} records where its {SUMMARY} counts {said}"
        return None


@dataclass
class MergeResult:
    out: Path
    count: int  # N: the campaign's shard count
    merged: list[int]  # the shard indices merged
    records: int
    summaries: list[Summary]
    complete: bool
    # What the merged run lacks (missing shards, unfinished ones); empty when complete.
    missing: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    resume_command: str = ""


def merge_shards(
    directories: Sequence[Path],
    out: Path,
    *,
    partial: bool = False,
    command: list[str] | None = None,
) -> MergeResult:
    """Merge the shard directories into a new run directory ``out``; see the module's
    docstring. A refusal is a ``MergeError`` (or the ``RunDirError`` of an unreadable
    input) naming what is wrong; nothing is written then."""
    if not directories:
        raise MergeError("give the shards' run directories to merge")
    _check_out(out, directories)
    shards = sorted((_read_shard(d) for d in directories), key=lambda s: s.shard.index)
    _check_slices(shards)
    warnings = _check_campaign(shards)
    count = shards[0].shard.count
    held = {s.shard.index for s in shards}
    absent = [f"{i}/{count}" for i in range(1, count + 1) if i not in held]
    missing = [f"shard{'s' * (len(absent) > 1)} {', '.join(absent)} missing"] if absent else []
    with contextlib.ExitStack() as stack:
        for shard in shards:  # no shard may be written to while it is read
            _hold(stack, shard.path)
        # What summary.json says; the records are counted as they are merged.
        missing += _unfinished(s for s in shards if not _said_finished(s))
        if missing and not partial:
            raise _incomplete(missing, out)
        programs = _programs(shards)
        base = shards[0].spec
        prices = _prices(shards)
        tmp = _new_dir_beside(out)
        try:
            summaries = _write_records(tmp, shards)
            missing += _unfinished(s for s in shards if _said_finished(s))
            if missing and not partial:
                raise _incomplete(missing, out)
            complete = not missing
            saved = _merged_spec(base, shards, out, prices, command)
            store = RunStore(tmp)
            store.write_json(SPEC, saved)
            store.write_json(SUMMARY, RunSummary(complete=complete, cells=summaries))
            spend = _spend(shards, prices)
            if spend is not None:
                store.write_json(SPEND, spend)
            _copy_batches(tmp, shards)
            _copy_programs(tmp, programs, shards)
            _check_unchanged(shards)
            _rename(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return MergeResult(
        out=out,
        count=count,
        merged=sorted(held),
        records=sum(s.records.total() for s in shards),
        summaries=summaries,
        complete=complete,
        missing=missing,
        warnings=warnings,
        resume_command=base.run_spec().resume_command(out),
    )


def _said_finished(shard: ShardDir) -> bool:
    return shard.summary is not None and shard.summary.complete


def _unfinished(shards: Iterable[ShardDir]) -> list[str]:
    return [why for why in (s.unfinished() for s in shards) if why is not None]


def _check_out(out: Path, directories: Sequence[Path]) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise MergeError(
            f"--out {out} already exists and is not empty; hpt merge writes a new run "
            "directory (choose another --out)"
        )
    where = out.resolve()
    for directory in directories:
        if where == directory.resolve() or directory.resolve() in where.parents:
            raise MergeError(
                f"--out {out} is inside {directory}; hpt merge never writes into the shards' "
                "directories (choose an --out outside them)"
            )


def _read_shard(directory: Path) -> ShardDir:
    stamp = _stamp(directory)  # before anything is read: a write after it is seen
    spec = load_saved_spec(directory)
    if spec.shard is None:
        raise MergeError(
            f"{directory} holds a whole run, not a shard (its {SPEC} has no shard); hpt merge "
            "joins the directories of hpt run --shard I/N"
        )
    if not (directory / SAMPLES).is_file():
        raise MergeError(f"{directory} has no {SAMPLES}: start that shard, then merge")
    path = directory / SUMMARY
    summary = None
    try:
        summary = RunSummary.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise RunDirError(f"cannot read {path}: {exc.strerror}") from None
    except ValidationError as exc:
        problem = validation_message(exc, whole="(document)")
        raise RunDirError(
            f"{path}: not a run summary ({problem}); hpt run --resume {directory} rewrites it"
        ) from None
    return ShardDir(directory, spec, spec.shard, summary, stamp)


def _stamp(directory: Path) -> tuple[tuple[int, int] | None, ...]:
    """The size and time of change of what a run writes as it goes (None: no such file)."""
    found: list[tuple[int, int] | None] = []
    for name in (SAMPLES, SUMMARY):
        try:
            stat = (directory / name).stat()
        except FileNotFoundError:
            found.append(None)
        except OSError as exc:
            raise RunDirError(f"cannot read {directory / name}: {exc.strerror}") from None
        else:
            found.append((stat.st_size, stat.st_mtime_ns))
    return tuple(found)


def _check_unchanged(shards: list[ShardDir]) -> None:
    """Refuse where a shard was written to while it was merged: a run that ended removed its
    lock, so nothing kept another from starting in the shard meanwhile."""
    for shard in shards:
        if _stamp(shard.path) != shard.stamp:
            raise MergeError(
                f"{shard.name} was written to during the merge ({SAMPLES} or {SUMMARY} "
                "changed); nothing was merged: let the process writing it end, then merge again"
            )


def _check_slices(shards: list[ShardDir]) -> None:
    """One shard count; each index once (one directory given twice, copies of a shard, or
    shards of two campaigns)."""
    first = shards[0]
    for shard in shards[1:]:
        if shard.shard.count != first.shard.count:
            raise MergeError(
                f"{first.path} holds shard {first.shard} and {shard.path} shard {shard.shard}: "
                "the shards of one campaign share their count"
            )
    for one, other in itertools.pairwise(shards):
        if one.shard.index == other.shard.index:
            same = one.path.resolve() == other.path.resolve()
            raise MergeError(
                f"{one.path} is given twice"
                if same
                else f"{one.path} and {other.path} both hold shard {one.shard}; give each "
                "shard once (copies of one shard, or shards of two campaigns?)"
            )


def _check_campaign(shards: list[ShardDir]) -> list[str]:
    """Refuse shards whose specs differ in what the records measure (``PER_PROCESS`` says
    what may differ); the warnings to give (other hpt versions)."""
    first = shards[0]
    kept = _campaign(first.spec)
    for shard in shards[1:]:
        other = _campaign(shard.spec)
        for name in dict.fromkeys([*kept, *other]):
            if kept.get(name) != other.get(name):
                values = _shown(kept.get(name)), _shown(other.get(name))
                said = f" ({values[0]} and {values[1]})" if all(values) else ""
                raise MergeError(
                    f"{first.path} (shard {first.shard}) and {shard.path} (shard "
                    f"{shard.shard}) are not shards of one campaign: their {name} differs{said}"
                )
    versions: dict[str, list[str]] = {}
    for shard in shards:
        versions.setdefault(shard.spec.hpt_version, []).append(str(shard.shard))
    if len(versions) == 1:
        return []
    ran = "; ".join(f"shard{'s' * (len(which) > 1)} {', '.join(which)}: hpt {v}"
                    for v, which in versions.items())  # fmt: skip
    return [
        f"the shards were run by different hpt versions ({ran}); records of each stand in the "
        "merged run (run every shard with one version to compare like with like)"
    ]


def _campaign(spec: SavedSpec) -> dict[str, Any]:
    """What identifies the measurement, by run.json's field: paths given on each machine
    (--program files, DepthQA's --graph directory) stand for their files' contents."""
    saved = spec.model_dump(mode="json")
    kept = {k: v for k, v in saved.items() if k not in PER_PROCESS}
    kept["models"] = {
        name: {k: v for k, v in config.items() if k not in MODEL_PER_PROCESS}
        for name, config in saved.get("models", {}).items()
    }
    kept["programs"] = {key: _contents(Path(path)) for key, path in spec.programs.items()}
    kept["task_args"] = {
        dataset: {
            k: _contents(Path(v)) if dataset.lower() == "depthqa" and k == "graph" and v else v
            for k, v in fields.items()
        }
        for dataset, fields in saved.get("task_args", {}).items()
    }
    return kept


def _contents(path: Path) -> str:
    """A file's, or a DepthQA graph directory's files', SHA-256; the path itself where it
    cannot be read here (two shards naming one path then still agree)."""
    files = [path / name for name in GRAPH_FILES] if path.is_dir() else [path]
    digest = hashlib.sha256()
    try:
        for file in files:
            digest.update(f"{file.name}\0{file.stat().st_size}\0".encode())
            digest.update(file.read_bytes())
    except OSError:
        return str(path)
    return f"sha256:{digest.hexdigest()}"


def _shown(value: Any) -> str:
    """A differing value, where it is short enough to say in the line."""
    text = json.dumps(value)
    return text if len(text) <= 40 else ""


def _hold(stack: contextlib.ExitStack, directory: Path) -> None:
    """A shared lock on a shard's run lock, where a writer left its lock file: one under way
    makes the merge refuse, and one starting meanwhile refuses. A writer that ended removed
    its lock file, and none is made (the shard is only read), so nothing keeps a writer from
    starting in a finished shard during the merge: ``_check_unchanged`` catches that before
    the merged run is put in place."""
    try:
        fd = os.open(directory / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # no writer has it (a writer makes the file first)
    stack.callback(os.close, fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise MergeError(
            f"{directory} is being written by an hpt process; wait for it to end (or stop "
            "it and finish it with hpt run --resume), then merge"
        ) from None


def _incomplete(missing: list[str], out: Path) -> MergeError:
    return MergeError(
        f"the shards are not the whole campaign: {'; '.join(missing)}; finish each with hpt "
        f"run --resume DIR (a missing one with its hpt run --shard) and merge again, or merge "
        f"with --partial and finish the merged run with hpt run --resume {out}"
    )


def _prices(shards: list[ShardDir]) -> dict[str, ModelPrice]:
    joined: dict[str, tuple[ModelPrice, ShardDir]] = {}
    for shard in shards:
        for label, price in shard.spec.prices.items():
            known = joined.setdefault(label, (price, shard))
            if known[0] != price:
                raise MergeError(
                    f"{known[1].path} (shard {known[1].shard}) and {shard.path} (shard "
                    f"{shard.shard}) priced {label} differently; one run costs its calls at one "
                    "price (run the shards with one --prices file)"
                )
    return {label: price for label, (price, _) in joined.items()}


def _merged_spec(
    base: SavedSpec,
    shards: list[ShardDir],
    out: Path,
    prices: dict[str, ModelPrice],
    command: list[str] | None,
) -> SavedSpec:
    def summed(name: str) -> Any:
        bounds = [getattr(s.spec, name) for s in shards]
        return None if None in bounds else sum(bounds)

    started = [s.spec.started_at for s in shards if s.spec.started_at]
    return base.model_copy(
        update={
            "shard": None,
            "out": out,
            "budget_usd": summed("budget_usd"),
            "max_calls": summed("max_calls"),
            "prices": prices,
            "started_at": min(started, default=""),
            "resumed_at": [],
            "command": command or [],
            "merged_from": [_provenance(s) for s in shards],
        }
    )


def _provenance(shard: ShardDir) -> MergedShard:
    spec = shard.spec
    process = spec.model_dump(include={"hpt_version", "python", "platform", "started_at",
                                       "resumed_at", "command"})  # fmt: skip
    return MergedShard(index=shard.shard.index, count=shard.shard.count,
                       directory=str(shard.path), complete=shard.unfinished() is None,
                       **process)  # fmt: skip


def _write_records(tmp: Path, shards: list[ShardDir]) -> list[Summary]:
    """``samples.jsonl``: shard 1's records, then shard 2's, ..., each shard's in the order
    it finished them. That order is the same for the same shards whatever order they are
    given in, and it is written as it is read (memory stays flat however many records): a
    single-process run's records also stand in the order they finished. Returns the cells'
    summaries, recomputed from the records as ``hpt summarize`` does, in the order the shards'
    summaries list them (the run's plan)."""
    path = tmp / SAMPLES
    try:
        with path.open("wb") as fh:
            records = _checked(shards, fh)
            summaries = summarize_cells(records, shards[0].spec.tasks)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise StorageError("the merged records", path, exc) from None
    return _in_plan_order(summaries, shards)


def _checked(shards: list[ShardDir], fh: IO[bytes]) -> Iterator[SampleRecord]:
    """Every shard's records, each checked to be in its shard's slice and of a cell of the
    campaign, and written to ``fh``. A plain record in its own slice is in no other shard's:
    records of two shards never share a key (sample and draw of a cell)."""
    cells = {s.cell for shard in shards if shard.summary for s in shard.summary.cells}
    in_spec = _CampaignCells(shards[0].spec, cells)
    # A DepthQA node is sharded by its question graph's component (Task.shard_key), which
    # merge cannot know without loading the graph: its records' slice is not checked, but no
    # key may be in two shards. DepthQA runs are small: their keys are held in memory.
    depth: dict[tuple[object, ...], Shard] = {}
    for shard in shards:
        index, count = shard.shard.index, shard.shard.count
        seed = shard.spec.seed
        for record in read_records(shard.path):
            if isinstance(record, DepthRecord):
                other = depth.setdefault(record.key, shard.shard)
                if other != shard.shard:
                    raise MergeError(
                        f"{shard.path / SAMPLES}: node {record.sample_id} of "
                        f"{record.cell.title} is in shard {other} too: shards of one campaign "
                        "are disjoint (copies of a shard, or shards of two campaigns?)"
                    )
            elif not in_shard(seed, record.sample_id, index, count):
                owner = next(i for i in range(1, count + 1)
                             if in_shard(seed, record.sample_id, i, count))  # fmt: skip
                raise MergeError(
                    f"{shard.path / SAMPLES}: sample {record.sample_id} of "
                    f"{record.cell.title} is in shard {owner}/{count}, not {shard.shard}: this "
                    "directory was not made by hpt run --shard with this campaign's seed"
                )
            if record.cell not in in_spec:
                raise MergeError(
                    f"{shard.path / SAMPLES} (shard {shard.shard}): a record of "
                    f"{record.cell.title}, which the campaign's spec does not include"
                )
            fh.write((record.model_dump_json() + "\n").encode())
            shard.records[record.cell] += 1
            yield record


class _CampaignCells:
    """Whether a cell is the campaign's: one a shard's summary lists (its plan's), else one
    the saved spec lays out as planning does (dataset x model x mode x threshold x variant x
    reasoning setting), from the tasks' code and arguments without loading their data. Where
    that code is not here (a plugin's dataset or provider), the record's dataset, model and
    mode are checked against the spec's."""

    def __init__(self, spec: SavedSpec, planned: set[Cell]) -> None:
        self.cells = planned or _spec_cells(spec)
        self.spec = spec

    def __contains__(self, cell: Cell) -> bool:
        if self.cells is not None:
            return cell in self.cells
        spec = self.spec
        return (
            cell.dataset.lower() in evaluated(spec.dataset)
            and cell.model in {redact_urls(m.strip()) for m in spec.model}  # as spec_label
            and cell.mode in spec.mode
        )


def _spec_cells(spec: SavedSpec) -> set[Cell] | None:
    ladder_given = list(spec.strategies) != list(DEFAULT_LADDER)
    task_args = {name.lower(): fields for name, fields in spec.task_args.items()}
    cells: set[Cell] = set()
    try:
        labels = [spec.resolve(m).label for m in spec.model]
        for name in spec.dataset:
            task = task_class(name).configured(None, task_args.get(name.lower(), {}))
            defaults = task.paper_thresholds if isinstance(task, GenerationTask) else None
            variants = [v for v, _ in task.variants(spec.strategies, ladder_given)]
            for threshold, variant, label, mode, (effort, budget) in itertools.product(
                spec.thresholds_for(defaults), variants, labels, spec.mode,
                reasoning_settings(spec),
            ):  # fmt: skip
                cells.add(Cell(task.name, label, mode, threshold, variant, effort, budget))
    except HptError:
        return None
    return cells


def _in_plan_order(summaries: list[Summary], shards: list[ShardDir]) -> list[Summary]:
    """The summaries in the order a run writes them (its plan's, which every shard's
    summary.json has), a cell without records included, as a run lists it; cells only the
    records know (no shard ended with a summary) after them, in ``Cell.order``."""
    plan = next((s.summary.cells for s in shards if s.summary is not None), [])
    made = {s.cell: s for s in summaries}
    infos = shards[0].spec.tasks
    ordered = [made.pop(s.cell) if s.cell in made else _empty(s, infos.get(s.dataset))
               for s in plan]  # fmt: skip
    return ordered + list(made.values())


def _empty(planned: Summary, info: TaskInfo | None) -> Summary:
    """A cell no shard recorded a sample of, summarised as a run summarises it."""
    tally = Tally(**asdict(planned.cell), m=planned.m, penalty=planned.penalty,
                  info=info, strategies=planned.strategies)  # fmt: skip
    return tally.summary()


def _spend(shards: list[ShardDir], prices: dict[str, ModelPrice]) -> Spend | None:
    """``spend.json``: what every shard spent, where any shard kept a ledger (a run with a
    budget); a shard without one counts what its records' calls cost, as a resume does."""
    ledgers = [load_spend(s.path) for s in shards]
    if all(ledger is None for ledger in ledgers):
        return None
    total = Spend()
    for shard, ledger in zip(shards, ledgers, strict=True):
        if ledger is None:
            ledger = spend_of_records(read_records(shard.path, None), prices)
        total.spent_usd += ledger.spent_usd
        total.calls += ledger.calls
        for label, used in ledger.by_model.items():
            entry = total.by_model.setdefault(label, ModelSpend())
            entry.usd += used.usd
            entry.calls += used.calls
        total.batches += ledger.batches
    return total


class _Journal(BaseModel):
    """What merging needs of a batch journal (``hpt.backends.batch_journal``): its entries,
    carried as they are."""

    batches: list[dict[str, Any]]


def _copy_batches(tmp: Path, shards: list[ShardDir]) -> None:
    """The shards' batch journals as one, with their results files: a shard's finished
    batches answered its records already; one still out (a --partial merge of an unfinished
    shard) is followed and collected by the merged run's resume, as by the shard's, so no
    request is sent twice."""
    entries: list[dict[str, Any]] = []
    for shard in shards:
        path = shard.path / JOURNAL
        try:
            journal = _Journal.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RunDirError(f"cannot read {path}: {exc.strerror}") from None
        except ValidationError as exc:
            problem = validation_message(exc, whole="(document)")
            raise RunDirError(f"{path}: not a batch journal ({problem})") from None
        entries += journal.batches
        results = shard.path / RESULTS
        if results.is_dir():
            _copy_tree(results, tmp / RESULTS)
    if entries:
        _write_json(tmp / JOURNAL, {"batches": entries})


def _programs(shards: list[ShardDir]) -> dict[str, ShardDir]:
    """The optimised DSPy programs the merged run keeps, by file name, with the shard whose
    copy it takes (the first). Each shard optimised its own: where two saved different
    programs for one cell, their records were climbed under different programs and one run
    cannot hold both. A program without its meta file was cut short: left out (a resume
    optimises it again, as the shard's would)."""
    chosen: dict[str, tuple[ShardDir, Any]] = {}
    for shard in shards:
        directory = shard.path / PROGRAMS_DIR
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.json")):
            if path.name == USAGE_FILE or path.name.endswith(PROGRAM_SUFFIXES):
                continue
            if not meta_file(path).is_file():
                continue
            state = _program_state(path)
            first = chosen.setdefault(path.name, (shard, state))
            if first[1] != state:
                raise MergeError(
                    f"{first[0].path} (shard {first[0].shard}) and {shard.path} (shard "
                    f"{shard.shard}) optimised different DSPy programs ({PROGRAMS_DIR}/"
                    f"{path.name}): their records were climbed under different programs, "
                    "which one run cannot hold; run the shards with one program (--program "
                    "STRATEGY=FILE, e.g. one a first run optimised)"
                )
    return {name: shard for name, (shard, _) in chosen.items()}


def _program_state(path: Path) -> Any:
    """A saved program as DSPy loads it, without its metadata (the versions of the machine
    that saved it)."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise RunDirError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise RunDirError(f"{path}: not a saved DSPy program (not JSON)") from None
    return {k: v for k, v in data.items() if k != "metadata"} if isinstance(data, dict) else data


def _copy_programs(tmp: Path, programs: dict[str, ShardDir], shards: list[ShardDir]) -> None:
    """Each kept program with its meta and traces; the meters (usage.json) summed over the
    shards, each of which paid for its own optimisation."""
    target = tmp / PROGRAMS_DIR
    for name, shard in programs.items():
        program = shard.path / PROGRAMS_DIR / name
        for path in (program, meta_file(program), calls_file(program)):
            if path.is_file():
                _copy(path, target / path.name)
    usage: dict[str, Any] = {}
    for shard in shards:
        path = shard.path / PROGRAMS_DIR / USAGE_FILE
        try:
            usage = _summed(usage, json.loads(path.read_bytes()))
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            raise RunDirError(f"cannot read {path} (the programs' calls and tokens)") from None
    if usage:
        _write_json(target / USAGE_FILE, usage)


def _summed(total: Any, more: Any) -> Any:
    """Two meters' JSON (nested tables of counts) added up, key by key."""
    if isinstance(total, dict) and isinstance(more, dict):
        return {k: _summed(total[k], more[k]) if k in total and k in more
                else total.get(k, more.get(k)) for k in {**total, **more}}  # fmt: skip
    if isinstance(total, int | float) and isinstance(more, int | float):
        return total + more
    return total


def _new_dir_beside(out: Path) -> Path:
    """An empty directory in ``out``'s parent, to be renamed to ``out`` once written."""
    tmp = out.parent / f".{out.name}.merging-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
    except OSError as exc:
        raise MergeError(f"cannot write the merged run beside {out}: {exc.strerror}") from None
    return tmp


def _rename(tmp: Path, out: Path) -> None:
    try:
        os.rename(tmp, out)  # over an empty directory too: POSIX replaces it
        fd = os.open(out.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError("the merged run", out, exc) from None


def _copy(source: Path, target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    except OSError as exc:
        raise StorageError("the merged run", target, exc) from None


def _copy_tree(source: Path, target: Path) -> None:
    for path in sorted(source.iterdir()):
        if path.is_file() and not path.is_symlink():
            if (target / path.name).exists():
                raise MergeError(f"two shards hold {RESULTS}/{path.name}: one batch twice?")
            _copy(path, target / path.name)


def _write_json(path: Path, data: Any) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise StorageError("the merged run", path, exc) from None
