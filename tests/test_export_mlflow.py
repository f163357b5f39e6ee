"""``hpt export --to mlflow``: an MLflow run in a local store, read back with MLflow's client."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mlflow import MlflowClient

from hpt.exports import ExportError, export
from hpt.exports.mlflow_run import CUT, MLRUNS
from hpt.exports.source import cell_metrics, open_run
from hpt.exports.tracking import SAMPLE_COLUMNS, cell_key
from tests.run_fixtures import make_record, write_run

LONG = "x" * 7000  # over MLflow's 6000-character parameter limit


@pytest.fixture(autouse=True)
def no_mlflow_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's tracking server and options stay out of the test."""
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE", "MLFLOW_EXPERIMENT_NAME",
                 "MLFLOW_EXPERIMENT_ID", "MLFLOW_RUN_ID"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


def sample_run(directory: Path, *, complete: bool = True) -> Path:
    records = [make_record(f"a{i}", level=1 + i % 3) for i in range(6)]
    records += [make_record("a6", level=None), make_record("a7", level=2, error="timeout")]
    records += [make_record(f"b{i}", model="beta/v2", level=2 + i % 2) for i in range(4)]
    spec = {"dataset": ["boolq"], "model": ["alpha", "beta/v2"], "mode": ["standard"],
            "strategies": ["role", "zero_shot_cot"], "limit": 8, "seed": 0, "threshold": [],
            "params": {"temperature": 0.6}, "hpt_version": "0.3.0", "knowledge_model": None,
            "command": ["hpt", "run", "--dataset", "boolq"], "notes": LONG,
            "tasks": {"boolq": {"name": "boolq"}}}  # fmt: skip
    write_run(directory, records, spec)
    (directory / "summary.json").write_text(json.dumps({"complete": complete, "cells": []}))
    return directory


def test_local_store_holds_params_metrics_tables_and_report(tmp_path: Path) -> None:
    run_dir = sample_run(tmp_path / "run", complete=False)
    done = export(run_dir, "mlflow", out=tmp_path / "out")

    store = tmp_path / "out" / MLRUNS
    assert done.format == "mlflow" and done.samples == 12 and done.target is None
    assert done.path == store
    # The export set MLflow's file-store opt-in for itself alone.
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # to read the store back
    try:
        client = MlflowClient(tracking_uri=store.as_uri())
        experiment = client.get_experiment_by_name("hpt")
        assert experiment is not None
        [found] = client.search_runs([experiment.experiment_id])
        run = client.get_run(found.info.run_id)
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        report_files = {a.path for a in client.list_artifacts(run.info.run_id, "report")}
        samples_path = client.download_artifacts(run.info.run_id, "samples.json", str(tmp_path))
    finally:
        del os.environ["MLFLOW_ALLOW_FILE_STORE"]

    assert run.info.run_name == "run" and run.info.status == "FINISHED"
    params = run.data.params
    assert params["dataset"] == "boolq" and params["model"] == "alpha,beta/v2"
    assert params["limit"] == "8" and params["params.temperature"] == "0.6"
    assert params["command"] == "hpt run --dataset boolq" and params["hpt_version"] == "0.3.0"
    # Unset options and the datasets' report layout are no parameters; a long value is cut.
    assert "threshold" not in params and "knowledge_model" not in params
    assert not any(k.startswith("tasks") for k in params)
    assert len(params["notes"]) == 6000 and params["notes"].endswith(CUT)
    tags = run.data.tags
    assert tags["hpt.version"] == "0.3.0" and tags["hpt.complete"] == "false"
    assert tags["hpt.samples"] == "12"

    # The metrics are the CellReport's figures, by cell, and the run's totals.
    metrics = run.data.metrics
    source = open_run(run_dir)
    keys = [cell_key(r.cell) for r in source.cells]
    assert keys == ["boolq/alpha/standard", "boolq/beta_v2/standard"]
    for report in source.cells:
        for name, value in cell_metrics(report).items():
            assert metrics[f"{cell_key(report.cell)}/{name}"] == pytest.approx(value)
    assert metrics["boolq/alpha/standard/hpi"] == pytest.approx(
        (1 + 2 + 3 + 1 + 2 + 3 + 5 + 1.71) / 7
    )
    assert metrics["boolq/beta_v2/standard/accuracy"] == 1.0
    assert metrics["total/samples"] == 12 and metrics["total/errors"] == 1
    assert metrics["total/cells"] == 2

    assert {"cells.json", "samples.json", "run.json", "report"} <= artifacts
    assert any(p.endswith(".md") for p in report_files)
    assert any(p.endswith(".png") for p in report_files)
    table = json.loads(Path(samples_path).read_text())
    assert table["columns"] == list(SAMPLE_COLUMNS)
    rows = {(r[0], r[2]): dict(zip(table["columns"], r, strict=True)) for r in table["data"]}
    assert len(rows) == 12
    assert rows["a6", "boolq/alpha/standard"]["resolved_level"] is None
    assert rows["a6", "boolq/alpha/standard"]["hpi_score"] == pytest.approx(6.71)
    assert rows["a7", "boolq/alpha/standard"]["error"] == "timeout"
    assert rows["b1", "boolq/beta_v2/standard"]["resolved_level"] == 3


def test_a_second_export_is_a_second_run_of_the_experiment(tmp_path: Path) -> None:
    run_dir = sample_run(tmp_path / "run")
    export(run_dir, "mlflow", out=tmp_path / "out")
    export(run_dir, "mlflow", out=tmp_path / "out")
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        client = MlflowClient(tracking_uri=(tmp_path / "out" / MLRUNS).as_uri())
        experiment = client.get_experiment_by_name("hpt")
        assert experiment is not None
        runs = client.search_runs([experiment.experiment_id])
    finally:
        del os.environ["MLFLOW_ALLOW_FILE_STORE"]
    assert len(runs) == 2 and {r.data.tags["hpt.complete"] for r in runs} == {"true"}


def test_unreachable_tracking_server_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MLflow retries a refused connection for minutes by default.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    run_dir = sample_run(tmp_path / "run")
    with pytest.raises(ExportError) as caught:
        export(run_dir, "mlflow", out=tmp_path / "out", push="http://127.0.0.1:9")
    message = str(caught.value)
    assert message.startswith("cannot write an MLflow run to MLflow at http://127.0.0.1:9: ")
    assert "\n" not in message
