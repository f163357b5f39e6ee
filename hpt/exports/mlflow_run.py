"""``hpt export --to mlflow``: the run as an MLflow run (experiment "hpt", named after the run
directory), through MLflow's own client. The spec is the run's parameters (flattened, "a.b"),
the cells' figures and the run's totals its metrics ("boolq/local/standard/hpi",
"total/calls"), and its artifacts are run.json, hpt report's tables and plots under report/,
and two MLflow tables, cells.json and samples.json (one row per sample: id, cell, resolved
level, HPI score, error, ...).

Without --push the run goes into a local store at ``<out>/mlruns`` (a ``file:`` URI); with
--push into that tracking URI (http(s)://..., databricks, sqlite:///...). MLflow 3 keeps its
file store in maintenance mode and refuses it unless MLFLOW_ALLOW_FILE_STORE is set; hpt sets
it for the export alone. The file store is still what MLflow reads without a database: the
SQLite store needs SQLAlchemy and Alembic, which mlflow-skinny (hpt's extra) does not bring,
and costs seconds of schema migrations on every new store. To browse it:
``MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri <out>/mlruns``, or move it into a
database with ``mlflow migrate-filestore --source <out>/mlruns --target sqlite:///mlflow.db``."""

from __future__ import annotations

import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunStatus
from mlflow.exceptions import MlflowException
from mlflow.utils.validation import (
    MAX_ENTITY_KEY_LENGTH,
    MAX_METRICS_PER_BATCH,
    MAX_PARAM_VAL_LENGTH,
    MAX_PARAMS_TAGS_PER_BATCH,
)

from hpt.exports import ExportError, tracking
from hpt.exports.source import Exported, RunSource
from hpt.results.rundir import SPEC

EXPERIMENT = "hpt"
MLRUNS = "mlruns"  # under --out: the local store
CUT = " ..."  # ends a parameter cut at MLflow's length limit (run.json holds it whole)
T = TypeVar("T")


def _batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def params(run: RunSource) -> dict[str, str]:
    """The spec as MLflow parameters: flat names within MLflow's key limit, values cut at its
    value limit (the whole spec is the run.json artifact)."""
    flat = {"run_name": run.name, **tracking.flat_params(tracking.spec(run))}
    return {
        key: value if len(value) <= MAX_PARAM_VAL_LENGTH
        else value[: MAX_PARAM_VAL_LENGTH - len(CUT)] + CUT
        for key, value in flat.items()
        if len(key) <= MAX_ENTITY_KEY_LENGTH
    }  # fmt: skip


def export(run: RunSource, out: Path, *, push: str | None = None) -> Exported:
    uri = push.strip() if push is not None else (out / MLRUNS).resolve().as_uri()
    where = "the local MLflow store" if push is None else f"MLflow at {uri}"
    try:
        with tracking.scoped_env("MLFLOW_ALLOW_FILE_STORE", "true"):
            return _export(run, out, uri, local=push is None)
    except MlflowException as exc:
        first = (exc.message.strip().splitlines() or [type(exc).__name__])[0]
        raise ExportError(f"cannot write an MLflow run to {where}: {first}") from None
    except ModuleNotFoundError as exc:  # a store whose driver is not installed (sqlite://)
        raise ExportError(
            f"cannot write an MLflow run to {where}: its store needs {exc.name!r}, which is not "
            f"installed (pip install {exc.name})"
        ) from None


def _export(run: RunSource, out: Path, uri: str, *, local: bool) -> Exported:
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(EXPERIMENT)
    created = client.create_run(experiment_id, run_name=run.name, tags=tracking.tags(run))
    run_id = created.info.run_id
    try:
        count = _log(client, run_id, run)
    except BaseException:
        client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
        raise
    client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
    if local:
        return Exported(format="mlflow", path=out / MLRUNS, samples=count)
    page = f"{uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    target = page if uri.startswith(("http://", "https://")) else f"{uri} (run {run_id})"
    return Exported(format="mlflow", path=out, samples=count, target=target)


def _log(client: MlflowClient, run_id: str, run: RunSource) -> int:
    """Log the run's parameters, metrics and artifacts; the number of sample records."""
    now = int(time.time() * 1000)
    for batch in _batches([Param(k, v) for k, v in params(run).items()], MAX_PARAMS_TAGS_PER_BATCH):
        client.log_batch(run_id, params=batch)
    figures = [Metric(k, v, now, 0) for k, v in tracking.metrics(run).items()]
    for metrics in _batches(figures, MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=metrics)
    columns, rows = tracking.cell_rows(run)
    samples: dict[str, list[object]] = {c: [] for c in tracking.SAMPLE_COLUMNS}
    count = 0
    for row in tracking.sample_rows(run):
        for column, value in zip(tracking.SAMPLE_COLUMNS, row, strict=True):
            samples[column].append(value)
        count += 1
    with warnings.catch_warnings():
        # log_table asks pandas for object columns in a way pandas 3 deprecates: MLflow's
        # to change, and no news to the person exporting.
        warnings.filterwarnings("ignore", message=".*select_dtypes.*")
        client.log_table(run_id, {c: [row[i] for row in rows] for i, c in enumerate(columns)},
                         "cells.json")  # fmt: skip
        client.log_table(run_id, samples, "samples.json")
    if (run.directory / SPEC).is_file():
        client.log_artifact(run_id, str(run.directory / SPEC))
    with tempfile.TemporaryDirectory(prefix="hpt-mlflow-") as tmp:
        run.write_report(Path(tmp))
        client.log_artifacts(run_id, tmp, artifact_path="report")
    client.set_tag(run_id, "hpt.samples", str(count))
    return count
