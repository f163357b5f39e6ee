"""``hpt export --to inspect``: the eval logs read back by inspect_ai's own reader hold every
climb as a sample, the records' scores, and the cells' figures exactly as hpt report has them."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_ai.log import EvalLog, read_eval_log

from hpt.exports import export
from hpt.exports.source import open_run
from hpt.results.records import Attempt, Call, DepthRecord, SampleRecord, Verdict
from hpt.types import Message
from tests.run_fixtures import make_record, write_run


def depth_record() -> DepthRecord:
    """A DepthQA node judged 4 (resolved), with its edges."""
    prompt = [Message(role="user", content="## Question:\nwhat is a graph?")]
    call = Call(purpose="answer", model="alpha", messages=prompt, completion="nodes and edges")
    attempt = Attempt(level=1, strategy="depth_zero_shot", calls=[call],
                      completion="nodes and edges", parsed="nodes and edges", resolved=True,
                      verdict=Verdict(score=4, feedback="good"))  # fmt: skip
    return DepthRecord(
        sample_id="n1", dataset="depthqa", model="alpha", variant="zero-shot",
        strategies=["depth_zero_shot"], m=1, penalty=1.0, target="a set of vertices and edges",
        resolved_level=1, hpi_score=1.0, attempts=[attempt], node_id="n1", qid="q1", depth=2,
        predecessors=["n0"], successors=["n2"], prompt=prompt, prediction="nodes and edges",
        judge_score=4, feedback="good",
    )  # fmt: skip


def export_records() -> list[SampleRecord]:
    """Three cells: boolq on alpha (levels 1-3, one unresolved, one errored, a second draw),
    boolq on beta, and a DepthQA node."""
    alpha = [
        make_record("s1", level=1),
        make_record("s2", level=2, tokens=(200, 20)),
        make_record("s3", level=3),
        make_record("s4", level=None),
        make_record("s5", level=None, error="HTTP 500: server fell over"),
        make_record("s1", level=2).model_copy(update={"draw": 1}),
    ]
    beta = [make_record(f"b{i}", model="beta", level=(i % 5) + 1) for i in range(4)]
    return [*alpha, *beta, depth_record()]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    directory = write_run(tmp_path / "run-a", export_records())
    (directory / "summary.json").write_text('{"complete": true, "cells": []}')
    return directory


def _logs(folder: Path) -> dict[str, EvalLog]:
    logs = [read_eval_log(str(p)) for p in sorted(folder.glob("*.eval"))]
    return {f"{log.eval.task_display_name}|{log.eval.model}": log for log in logs}


def test_each_cell_is_a_log_inspect_reads_back_with_hpts_figures(run_dir: Path) -> None:
    done = export(run_dir, "inspect")
    assert done.path == run_dir / "exports" / "run-a" and done.samples == 11
    logs = _logs(done.path)
    assert set(logs) == {"boolq|alpha", "boolq|beta", "depthqa · zero-shot|alpha"}
    for report in open_run(run_dir).cells:
        log = logs[f"{report.cell.label}|{report.cell.model}"]
        assert log.status == "success"  # summary.json says the run is complete
        assert log.samples is not None and len(log.samples) == report.summary.samples
        assert log.results is not None
        metrics = {m.name: m.value for s in log.results.scores for m in s.metrics.values()}
        assert metrics["hpi"] == report.summary.hpi
        assert metrics["accuracy"] == report.summary.accuracy
        assert report.hpi_ci is not None and metrics["hpi_ci_low"] == report.hpi_ci[0]
        tokens = sum(u.input_tokens for u in log.stats.model_usage.values())
        assert tokens == report.summary.prompt_tokens
        assert log.eval.task_args["mode"] == report.cell.mode

    alpha = logs["boolq|alpha"]
    assert alpha.samples is not None
    by_key = {(s.id, s.epoch): s for s in alpha.samples}
    assert set(by_key) == {("s1", 1), ("s2", 1), ("s3", 1), ("s4", 1), ("s5", 1), ("s1", 2)}
    s2 = by_key[("s2", 1)]
    assert s2.scores is not None
    assert s2.scores["hpi"].value == 2.0 and s2.scores["level"].value == 2
    assert s2.scores["resolved"].value == "C" and s2.scores["resolved"].answer == "True"
    assert s2.metadata["resolved_level"] == 2 and s2.metadata["dataset"] == "boolq"
    # Both attempts' calls in order, each prompt and answer naming its level and strategy.
    assert [(m.role, m.text) for m in s2.messages] == [
        ("user", "Q s2 at level 1"), ("assistant", "unsure"),
        ("user", "Q s2 at level 2"), ("assistant", "True"),
    ]  # fmt: skip
    first, _, second, answer = (m.metadata or {} for m in s2.messages)
    assert (first["level"], first["strategy"]) == (1, "role")
    assert (second["level"], second["strategy"]) == (2, "zero_shot_cot")
    assert (answer["level"], answer["resolved"], answer["parsed"]) == (2, True, "True")
    assert s2.model_usage["alpha"].input_tokens == 400
    s4 = by_key[("s4", 1)]
    assert s4.scores is not None and s4.scores["level"].value == "unresolved"
    assert s4.scores["hpi"].value == pytest.approx(5 + 1.71)
    errored = by_key[("s5", 1)]
    assert errored.scores is None and errored.error is not None
    assert errored.error.message == "HTTP 500: server fell over"
    assert errored.metadata["error"] == "HTTP 500: server fell over"

    depth = logs["depthqa · zero-shot|alpha"]
    assert depth.samples is not None
    (node,) = depth.samples
    assert node.scores is not None and node.scores["judge_score"].value == 4
    assert node.metadata["depth"] == 2 and node.metadata["variant"] == "zero-shot"


def test_a_single_cell_run_is_one_log_named_after_the_run(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "solo", [make_record(f"s{i}", level=1) for i in range(3)])
    done = export(run_dir, "inspect", out=tmp_path / "out")
    assert done.path == tmp_path / "out" / "solo.eval"
    log = read_eval_log(str(done.path))
    assert log.samples is not None and [s.id for s in log.samples] == ["s0", "s1", "s2"]
    # No summary.json: the run is not known to be complete.
    assert log.status == "cancelled"
