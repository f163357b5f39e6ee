"""``hpt export --to hf``: the folder read back by ``datasets.load_from_disk`` holds one row per
sample record with its attempts, and its dataset card holds the run's summary."""

from __future__ import annotations

from pathlib import Path

from datasets import load_from_disk
from huggingface_hub import DatasetCard

from hpt.exports import export
from hpt.exports.source import open_run
from hpt.reports.markdown import interval, number
from tests.run_fixtures import make_record, write_run
from tests.test_export_inspect import export_records


def test_rows_attempts_and_card_read_back(tmp_path: Path) -> None:
    records = export_records()
    run_dir = write_run(tmp_path / "run-h", records)
    done = export(run_dir, "hf", out=tmp_path / "out")
    assert done.path == tmp_path / "out" / "hf" and done.samples == len(records) == 11
    rows = load_from_disk(str(done.path))
    assert len(rows) == 11
    by_key = {(r["model"], r["sample_id"], r["draw"]): r for r in rows}
    assert len(by_key) == 11

    s2 = by_key[("alpha", "s2", 0)]
    assert (s2["dataset"], s2["mode"], s2["resolved_level"], s2["hpi_score"]) == (
        "boolq", "standard", 2, 2.0)  # fmt: skip
    assert [a["level"] for a in s2["attempts"]] == [1, 2]
    assert [a["strategy"] for a in s2["attempts"]] == ["role", "zero_shot_cot"]
    assert [a["resolved"] for a in s2["attempts"]] == [False, True]
    assert s2["attempts"][1]["parsed"] == "True"
    call = s2["attempts"][0]["calls"][0]
    assert call["messages"] == [{"role": "user", "content": "Q s2 at level 1"}]
    assert (call["prompt_tokens"], call["completion_tokens"]) == (200, 20)
    assert s2["node_id"] is None and s2["threshold"] is None

    unresolved = by_key[("alpha", "s4", 0)]
    assert unresolved["resolved_level"] is None and len(unresolved["attempts"]) == 5
    errored = by_key[("alpha", "s5", 0)]
    assert errored["error"] == "HTTP 500: server fell over" and errored["hpi_score"] is None
    assert by_key[("alpha", "s1", 1)]["resolved_level"] == 2

    node = by_key[("alpha", "n1", 0)]
    assert (node["dataset"], node["variant"], node["depth"], node["judge_score"]) == (
        "depthqa", "zero-shot", 2, 4)  # fmt: skip
    assert node["predecessors"] == ["n0"] and node["attempts"][0]["judge_score"] == 4

    card = DatasetCard.load(done.path / "README.md")
    assert card.data.pretty_name == "hpt run run-h"
    for report in open_run(run_dir).cells:
        # Each cell's row of the card, with hpt report's HPI and interval.
        figure = number(report.summary.hpi) + interval(report.hpi_ci)
        line = f"| {report.cell.label} | {report.cell.model} | {report.cell.mode} | "
        assert any(row.startswith(line) and figure in row for row in card.text.splitlines())
    assert "## HPT report" in card.text and "### Table 1" in card.text


def test_a_run_exported_again_after_it_grew_is_read_afresh(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run", [make_record(f"s{i}", level=1) for i in range(3)])
    assert export(run_dir, "hf").samples == 3
    write_run(run_dir, [make_record(f"s{i}", level=1) for i in range(5)])
    done = export(run_dir, "hf")
    assert done.path == run_dir / "exports" / "hf"
    assert len(load_from_disk(str(done.path))) == 5
    # The build cache is gone; only the dataset folder is left.
    assert [p.name for p in (run_dir / "exports").iterdir()] == ["hf"]
