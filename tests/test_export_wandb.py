"""``hpt export --to wandb``: an offline W&B run, read back from its own files -- the .wandb
transaction log (W&B's records, wandb.proto) and the artifact's staged table files."""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import wandb
from wandb.proto import wandb_internal_pb2 as pb

from hpt.exports import ExportError, export
from hpt.exports.source import cell_metrics, open_run
from hpt.exports.tracking import SAMPLE_COLUMNS, cell_key
from tests.run_fixtures import make_record, write_run

# The .wandb file: a ":W&B" header, then LevelDB's log format (32 KiB blocks of chunks, each
# with a CRC-32 over its type and data), each whole record one protobuf Record. wandb 0.31
# ships no Python reader of its own (its DataStore is gone with the Go core).
_BLOCK = 32 * 1024
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def read_wandb_log(path: Path) -> Iterator[pb.Record]:
    data = path.read_bytes()
    ident, magic, _version = struct.unpack("<4sHB", data[:7])
    assert (ident, magic) == (b":W&B", 0xBEE1)
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if left < 7 or (length == 0 and kind == 0):  # a block's zero-filled tail
            pos += left
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        assert zlib.crc32(chunk, zlib.crc32(bytes([kind]))) == crc, f"bad chunk at {pos}"
        pos += 7 + length
        pending = chunk if kind in (_FULL, _FIRST) else pending + chunk
        if kind in (_FULL, _LAST):
            record = pb.Record()
            record.ParseFromString(pending)
            yield record


def summary_of(records: list[pb.Record]) -> dict[str, Any]:
    """The run's final summary: its summary records' updates, last one winning."""
    summary: dict[str, Any] = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            for item in r.summary.update:
                key = item.key or "/".join(item.nested_key)
                summary[key] = json.loads(item.value_json)
    return summary


@pytest.fixture
def wandb_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """W&B kept off the user's settings, keys and folders; its service stopped after."""
    home = tmp_path / "home"
    for name, sub in (("WANDB_CONFIG_DIR", "config"), ("WANDB_CACHE_DIR", "cache"),
                      ("WANDB_DATA_DIR", "data")):  # fmt: skip
        monkeypatch.setenv(name, str(home / sub))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("WANDB_SILENT", "true")
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL", "WANDB_ENTITY", "WANDB_PROJECT",
                 "WANDB_DIR", "WANDB_RUN_ID"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    yield home
    wandb.teardown()
    # wandb-core was started by this process: none is left running.
    children = psutil.Process().children(recursive=True)
    assert not [c for c in children if "wandb" in " ".join(c.cmdline())]


def sample_run(directory: Path) -> Path:
    records = [make_record(f"a{i}", level=1 + i % 3) for i in range(6)]
    records += [make_record("a6", level=None), make_record("a7", level=2, error="timeout")]
    records += [make_record(f"b{i}", model="beta/v2", level=2 + i % 2) for i in range(4)]
    spec = {"dataset": ["boolq"], "model": ["alpha", "beta/v2"], "mode": ["standard"],
            "strategies": ["role", "zero_shot_cot"], "limit": 8, "seed": 0,
            "params": {"temperature": 0.6}, "hpt_version": "0.3.0"}  # fmt: skip
    write_run(directory, records, spec)
    (directory / "summary.json").write_text(json.dumps({"complete": True, "cells": []}))
    return directory


def test_offline_run_holds_the_spec_the_cells_figures_and_the_samples(
    tmp_path: Path, wandb_home: Path
) -> None:
    run_dir = sample_run(tmp_path / "run")
    done = export(run_dir, "wandb", out=tmp_path / "out")

    assert done.format == "wandb" and done.samples == 12 and done.target is None
    assert done.path.parent == tmp_path / "out" / "wandb"
    assert done.path.name.startswith("offline-run-")
    records = list(read_wandb_log(next(done.path.glob("run-*.wandb"))))
    kinds = [r.WhichOneof("record_type") for r in records]
    assert kinds[0] == "header" and kinds[-1] == "exit" and "run" in kinds

    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    config = {u.key: json.loads(u.value_json) for u in run.config.update}
    assert config["dataset"] == ["boolq"] and config["model"] == ["alpha", "beta/v2"]
    assert config["limit"] == 8 and config["params"] == {"temperature": 0.6}
    assert config["run_name"] == "run" and run.display_name == "run" and run.project == "hpt"
    assert set(run.tags) == {"hpt", "hpt-0.3.0", "complete"}

    # The summary metrics are the CellReport's figures, by cell; the totals add the cells up.
    summary = summary_of(records)
    source = open_run(run_dir)
    assert [cell_key(r.cell) for r in source.cells] == ["boolq/alpha/standard",
                                                          "boolq/beta_v2/standard"]  # fmt: skip
    for report in source.cells:
        for name, value in cell_metrics(report).items():
            assert summary[f"{cell_key(report.cell)}/{name}"] == pytest.approx(value)
    alpha = summary["boolq/alpha/standard/hpi"]
    assert alpha == pytest.approx((1 + 2 + 3 + 1 + 2 + 3 + 5 + 1.71) / 7)
    assert summary["boolq/alpha/standard/errors"] == 1
    assert summary["total/samples"] == 12 and summary["total/errors"] == 1
    assert summary["total/calls"] == sum(r.summary.calls for r in source.cells)

    # One artifact: the report's files and the two tables, staged beside the offline run.
    artifact = next(
        r.artifact for r in records
        if r.WhichOneof("record_type") == "artifact" and r.artifact.type == "hpt-run"
    )  # fmt: skip
    entries = {c.path: c for c in artifact.manifest.contents}
    assert {"cells.table.json", "samples.table.json"} <= entries.keys()
    assert any(p.startswith("report/") and p.endswith(".md") for p in entries)
    assert any(p.startswith("report/") and p.endswith(".png") for p in entries)
    staged = Path(entries["samples.table.json"].local_path)
    assert staged.is_relative_to(tmp_path / "out" / "wandb" / "staging")
    table = json.loads(staged.read_text())
    assert table["columns"] == list(SAMPLE_COLUMNS)
    rows = {(row[0], row[2]): dict(zip(table["columns"], row, strict=True))
            for row in table["data"]}  # fmt: skip
    assert len(rows) == 12
    assert rows["a6", "boolq/alpha/standard"]["resolved_level"] is None
    assert rows["a6", "boolq/alpha/standard"]["hpi_score"] == pytest.approx(6.71)
    assert rows["a7", "boolq/alpha/standard"]["error"] == "timeout"
    assert rows["b1", "boolq/beta_v2/standard"]["resolved_level"] == 3
    cells = json.loads(Path(entries["cells.table.json"].local_path).read_text())
    assert [row[0] for row in cells["data"]] == ["boolq/alpha/standard", "boolq/beta_v2/standard"]
    # Nothing went to the user's W&B folders; the export's own setting is undone.
    assert not (wandb_home / "data").exists()
    assert os.environ["WANDB_DATA_DIR"] == str(wandb_home / "data")


def test_push_names_a_project(tmp_path: Path, wandb_home: Path) -> None:
    run_dir = sample_run(tmp_path / "run")
    with pytest.raises(ExportError, match="ENTITY/PROJECT or PROJECT"):
        export(run_dir, "wandb", out=tmp_path / "out", push="a/b/c")


def test_unreachable_push_target_is_one_line(
    tmp_path: Path, wandb_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # the discard port: refused
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "5")
    run_dir = sample_run(tmp_path / "run")
    with pytest.raises(ExportError) as caught:
        export(run_dir, "wandb", out=tmp_path / "out", push="someone/hpt")
    message = str(caught.value)
    assert message.startswith("cannot write W&B project 'someone/hpt': ") and "\n" not in message
