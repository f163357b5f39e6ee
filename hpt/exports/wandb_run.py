"""``hpt export --to wandb``: the run as a W&B run, through wandb itself. The spec is the run's
config, the cells' figures and the run's totals its summary metrics, and one artifact holds
hpt report's tables and plots with a W&B Table of the cells and one of the samples (id, cell,
resolved level, HPI score, error, ...). Without --push the run is an offline run under
``<out>/wandb/`` (no login, nothing sent; ``wandb sync <that directory>`` uploads it later);
with --push ENTITY/PROJECT or PROJECT, an online run there."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import wandb
from wandb.errors import Error as WandbError

from hpt.exports import ExportError, tracking
from hpt.exports.source import Exported, RunSource

PROJECT = "hpt"  # the offline run's project, and a pushed run's unless --push names one
WANDB_DIR = "wandb"  # under --out: W&B's own <dir>/wandb/offline-run-*/ layout
STAGING = "staging"  # under <out>/wandb/: the artifact files an offline run uploads at sync
# W&B names artifacts with letters, digits, dashes, underscores and dots.
_ARTIFACT_UNSAFE = re.compile(r"[^\w.\-]")


def _target(push: str) -> tuple[str | None, str]:
    """--push ENTITY/PROJECT or PROJECT as (entity, project)."""
    parts = push.strip().split("/")
    if len(parts) > 2 or not all(parts):
        raise ExportError(f"--push {push!r}: give a W&B project as ENTITY/PROJECT or PROJECT")
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])


def _settings(offline: bool) -> wandb.Settings:
    # A record of finished work: no console capture, no system metrics, no git or code
    # snapshot, no job, no banner; offline, nothing is sent anywhere.
    return wandb.Settings(
        mode="offline" if offline else "online",
        console="off",
        silent=True,
        x_disable_stats=True,
        x_disable_meta=True,
        x_disable_machine_info=True,
        x_save_requirements=False,
        disable_git=True,
        disable_code=True,
        save_code=False,
        disable_job_creation=True,
    )


def export(run: RunSource, out: Path, *, push: str | None = None) -> Exported:
    entity, project = _target(push) if push is not None else (None, PROJECT)
    folder = out / WANDB_DIR
    folder.mkdir(parents=True, exist_ok=True)
    # Offline, the artifact's files wait for `wandb sync` beside the run, not in the user's
    # data folder where W&B stages them otherwise: the export is all under <out>/wandb/ (the
    # run's log names them by absolute path: sync it where it was written).
    staging = str((folder / STAGING).resolve()) if push is None else None
    try:
        with tracking.scoped_env("WANDB_DATA_DIR", staging):
            return _export(run, out, entity, project, offline=push is None)
    except WandbError as exc:
        where = "an offline W&B run" if push is None else f"W&B project {push!r}"
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ExportError(f"cannot write {where}: {first}") from None


def _export(
    run: RunSource, out: Path, entity: str | None, project: str, *, offline: bool
) -> Exported:
    tags = tracking.tags(run)
    config = {**tracking.spec(run), "run_name": run.name}
    wb = wandb.init(
        dir=str(out.resolve()),
        entity=entity,
        project=project,
        name=run.name,
        job_type="hpt-eval",
        config=config,
        # W&B tags are short labels, not key-value pairs.
        tags=["hpt", f"hpt-{tags['hpt.version']}", "complete" if run.complete else "incomplete"],
        notes=f"hpt run {run.name}, exported by hpt {tags['hpt.exported_by']}",
        settings=_settings(offline),
        reinit="create_new",  # never joins a run the caller has open
    )
    try:
        wb.summary.update(tracking.metrics(run))
        columns, rows = tracking.cell_rows(run)
        cells = wandb.Table(columns=list[str | int](columns), data=rows)
        samples = wandb.Table(columns=list[str | int](tracking.SAMPLE_COLUMNS))
        count = 0
        for row in tracking.sample_rows(run):
            samples.add_data(*row)
            count += 1
        artifact = wandb.Artifact(
            _ARTIFACT_UNSAFE.sub("_", f"hpt-{run.name}"),
            type="hpt-run",
            description=f"hpt report's tables and plots of {run.name}, with its cells and samples",
            metadata=tags,
        )
        artifact.add(cells, "cells")
        # Up to wandb.Table.MAX_ARTIFACT_ROWS rows (200,000) in an artifact.
        artifact.add(samples, "samples")
        with tempfile.TemporaryDirectory(prefix="hpt-wandb-") as tmp:
            for path in run.write_report(Path(tmp)):
                # Copied into the staging folder now (mutable policy), not into W&B's cache.
                name = f"report/{path.relative_to(tmp).as_posix()}"
                artifact.add_file(str(path), name=name, skip_cache=True)
            wb.log_artifact(artifact)
        # The run page shows logged tables; the samples too while W&B shows them whole.
        logged = {"cells": cells}
        if count <= wandb.Table.MAX_ROWS:
            logged["samples"] = samples
        wb.log(logged)
        directory = Path(wb.settings.sync_dir)
        url = None if offline else wb.url
    except BaseException:
        wb.finish(exit_code=1)
        raise
    wb.finish()
    target = None if offline else (url or f"{entity + '/' if entity else ''}{project}")
    return Exported(format="wandb", path=directory, samples=count, target=target)
