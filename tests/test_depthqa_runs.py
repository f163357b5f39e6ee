"""DepthQA runs end to end against a scripted OpenAI-compatible server: the four inference
modes as cells, one record per node and cell, each distinct prompt asked once (however the
graph lists its nodes), the judge's verdict in the record, and depth means and discrepancies
in the summary computed by hand."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_cli import assert_user_error, hpt

# depth 1: a, b, and a2 (a second node with a's question); depth 2: c <- a, b and d <- b;
# depth 3: e <- c, d.
QUESTIONS = [
    ("q_a", 1, "What is a mean?"), ("q_b", 1, "What is a variance?"),
    ("q_c", 2, "How do mean and variance relate?"), ("q_d", 2, "Why square deviations?"),
    ("q_e", 3, "Explain the central limit theorem."),
]  # fmt: skip
NODES = [
    ("a", 1, [], ["c"]), ("a2", 1, [], []), ("b", 1, [], ["c", "d"]),
    ("c", 2, ["a", "b"], ["e"]), ("d", 2, ["b"], ["e"]), ("e", 3, ["c", "d"], []),
]  # fmt: skip
NODE_TO_Q = {"a": "q_a", "a2": "q_a", "b": "q_b", "c": "q_c", "d": "q_d", "e": "q_e"}
# The model knows depths 1 and 2 and fails depth 3; the judge scores by what it sees.
SCORES = {1: 5, 2: 4, 3: 1}


def write_graph(folder: Path, shuffle: int | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    questions = [{"qid": q, "depth": d, "domain": "stats", "question": text,
                  "answer": f"reference for {q}"} for q, d, text in QUESTIONS]  # fmt: skip
    nodes = [{"nodeid": n, "group": "g1", "depth": d, "direct_predecessors": p,
              "direct_successors": s} for n, d, p, s in NODES]  # fmt: skip
    links = [{"nodeid": n, "qid": q} for n, q in NODE_TO_Q.items()]
    if shuffle is not None:
        rng = random.Random(shuffle)
        for rows in (questions, nodes, links):
            rng.shuffle(rows)
        for row in nodes:
            rng.shuffle(row["direct_predecessors"])
            rng.shuffle(row["direct_successors"])
    for name, rows in (("questions", questions), ("nodes", nodes), ("node_to_q", links)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _depth_of_question(text: str) -> int:
    last = text.rsplit("## Question:", 1)[-1]
    return next(d for _, d, q in QUESTIONS if q in last)


class Scripted:
    """Answers "answer at depth k"; judges 1-5 by SCORES, with one reply per judge prompt
    that echoes the rubric first (the parser must take the final [RESULT])."""

    def __init__(self) -> None:
        self.answers: list[str] = []
        self.judged: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        messages = body["messages"]
        if messages[0]["content"].startswith("You are a fair judge"):
            user = messages[-1]["content"]
            self.judged.append(user)
            depth = int(user.split("answer at depth ")[1][0])
            return (f"Feedback: 1. Score 5: The response is consistently correct. "
                    f"[RESULT] {SCORES[depth]}")  # fmt: skip
        self.answers.append(json.dumps(messages))
        return f"answer at depth {_depth_of_question(messages[-1]['content'])}"


@pytest.fixture
def scripted() -> Any:
    fake = FakeOpenAI(Scripted())
    server = ServerThread(fake.app()).start()
    yield fake, server
    server.stop()


def _run(server: ServerThread, graph: Path, out: Path, *extra: str) -> Any:
    return hpt("run", "--dataset", "depthqa", "--graph", str(graph), "--model",
               "openai:test-model", "--base-url", server.base_url, "--out", str(out),
               "--no-cache", *extra)  # fmt: skip


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


ALL_MODES = "zero-shot,prompt-gold,prompt-pred,multi-turn"


def test_four_modes_one_record_per_node_and_each_prompt_once(scripted, tmp_path: Path) -> None:
    fake, server = scripted
    out = tmp_path / "run"
    result = _run(server, write_graph(tmp_path / "graph"), out, "--depth-mode", ALL_MODES)
    assert result.returncode == 0, result.stderr
    recs = _records(out)
    # One record per node and cell, never one per question: a and a2 share q_a.
    assert len(recs) == 6 * 4
    assert {(r["variant"], r["node_id"]) for r in recs} == {
        (m, n) for m in ALL_MODES.split(",") for n in NODE_TO_Q
    }
    by = {(r["variant"], r["node_id"]): r for r in recs}
    assert by["zero-shot", "a2"]["qid"] == by["zero-shot", "a"]["qid"] == "q_a"
    e = by["prompt-pred", "e"]
    assert e["depth"] == 3 and e["predecessors"] == ["c", "d"] and e["judge_score"] == 1
    assert e["prediction"] == "answer at depth 3" and e["judge_replies"][0].endswith("[RESULT] 1")
    assert "Score 5" in e["feedback"]  # the echoed rubric is feedback, not the score
    # prompt-pred shows the model's own answers to c and d; prompt-gold the references.
    assert "A: answer at depth 2" in e["prompt"][-1]["content"]
    assert "A: reference for q_c" in by["prompt-gold", "e"]["prompt"][-1]["content"]
    multi = by["multi-turn", "e"]["prompt"]
    assert [m["role"] for m in multi] == ["system", "user", "assistant", "user", "assistant",
                                          "user"]  # fmt: skip
    assert multi[-1]["content"].startswith("Based on previous questions")
    # Each distinct prompt is asked once. Zero-shot: 5 questions (a and a2 share one).
    # Gold and pred: c, d, e (nodes without predecessors are the zero-shot call). Multi-turn:
    # c asks a (the zero-shot call) then b in a's conversation, then c: 2 new; d: b's turn is
    # b's zero-shot call, then d: 1 new; e: c's, then d's turn, then e: 2 new.
    answers = fake.responder.answers
    assert len(answers) == len(set(answers)) == 5 + 3 + 3 + 5
    judged = fake.responder.judged
    assert len(judged) == len(set(judged))
    summary = json.loads((out / "summary.json").read_text())["cells"]
    zero = next(c for c in summary if c["variant"] == "zero-shot")
    assert zero["depth_scores"] == {"1": 5.0, "2": 4.0, "3": 1.0}
    # Forward: c (preds a, b at 5) gap (5-4)/4 = .25; d (b: 5) .25; e (c, d at 4) (4-1)/4 =
    # .75. Overall (.25 + .25 + .75) / 3.
    fwd = zero["forward_discrepancy"]
    assert fwd["d1_d2"]["value"] == pytest.approx(0.25) and fwd["d1_d2"]["nodes"] == 2
    assert fwd["d2_d3"]["value"] == pytest.approx(0.75)
    assert fwd["overall"]["value"] == pytest.approx(1.25 / 3)
    assert fwd["overall"]["frequency"] == 1.0
    # Backward: the successors' mean never reaches 4 above a shallower node's score here
    # except none: a (succ c: 4) and b (succs c, d: 4) score 5, so gaps are 0; c and d
    # (succ e: 1) do not qualify.
    bwd = zero["backward_discrepancy"]
    assert bwd["d1_d2"]["value"] == 0.0 and bwd["d1_d2"]["nodes"] == 2
    assert bwd["d2_d3"]["nodes"] == 0 and bwd["d2_d3"]["value"] is None
    assert zero["judge_missing"] == 0 and zero["accuracy"] == pytest.approx(5 / 6)
    assert zero["depth_nodes"] == {"1": 3, "2": 2, "3": 1}
    # The end-of-run table: each cell's depth means beside the nodes they rest on.
    row = next(x for x in result.stdout.splitlines() if "standard · zero-shot" in x)
    assert "D1 5.000 (3 nodes)  D2 4.000 (2 nodes)  D3 1.000 (1 node)  judge missing 0" in row
    report = hpt("report", str(out), "--no-plots")
    assert report.returncode == 0, report.stderr
    assert "## DepthQA · mean judge score per depth" in report.stdout
    # HPI (5 x 1 + 1 x 2) / 6; each depth mean beside the nodes it rests on.
    row = _report_row(report.stdout, "zero-shot")
    assert row[0].startswith("1.17 [") and row[1:] == [
        "5.00 [5.00, 5.00]", "3", "4.00 [4.00, 4.00]", "2", "1.00 [1.00, 1.00]", "1", "0.42",
        "0.00", "6", "0"]  # fmt: skip


def _report_row(report: str, variant: str) -> list[str]:
    """The DepthQA table's cells after the model and variant, for one variant."""
    table = report.split("## DepthQA · mean judge score per depth", 1)[1].split("\n## ", 1)[0]
    line = next(x for x in table.splitlines() if x.startswith(f"| openai:test-model | {variant} |"))
    return [cell.strip() for cell in line.strip("|").split("|")][2:]


def test_prompts_do_not_depend_on_how_the_graph_lists_its_nodes(scripted, tmp_path: Path) -> None:
    fake, server = scripted
    prompts = []
    for seed in (None, 1, 2):
        fake.responder.answers.clear()
        out = tmp_path / f"run{seed}"
        graph = write_graph(tmp_path / f"graph{seed}", shuffle=seed)
        assert _run(server, graph, out, "--depth-mode", ALL_MODES).returncode == 0
        prompts.append(sorted(fake.responder.answers))
        records = sorted(_records(out), key=lambda r: (r["variant"], r["node_id"]))
        paid = 0
        for r in records:
            r.pop("wall_s")
            for a in r["attempts"]:
                for c in a["calls"]:
                    c.pop("latency_s")
                    # Which of the records sharing a call made it is a race; how many calls
                    # were made is not.
                    paid += not c.pop("cached")
                    c.pop("shared", None)  # the same race: who asked first
        assert paid == len(set(fake.responder.answers)) + len(set(fake.responder.judged))
        fake.responder.judged.clear()
        prompts.append(json.dumps(records, sort_keys=True))
    assert prompts[0] == prompts[2] == prompts[4]
    assert prompts[1] == prompts[3] == prompts[5]


def test_a_ladder_over_depth_gives_an_hpi(scripted, tmp_path: Path) -> None:
    _, server = scripted
    out = tmp_path / "ladder"
    result = _run(server, write_graph(tmp_path / "graph"), out, "--strategies",
                  "role,depth_pred,depth_gold,depth_multi_turn")  # fmt: skip
    assert result.returncode == 0, result.stderr
    recs = {r["node_id"]: r for r in _records(out)}
    assert all(r["variant"] is None for r in recs.values())
    assert recs["a"]["resolved_level"] == 1 and recs["c"]["resolved_level"] == 1
    # e fails at every level: 4 + 1.0 (depthqa's penalty).
    assert recs["e"]["resolved_level"] is None and recs["e"]["hpi_score"] == 5.0
    assert [a["strategy"] for a in recs["e"]["attempts"]] == [
        "role", "depth_pred", "depth_gold", "depth_multi_turn"
    ]  # fmt: skip


def test_missing_judge_scores_are_missing_not_zero(tmp_path: Path) -> None:
    def responder(body: dict[str, Any]) -> str:
        if body["messages"][0]["content"].startswith("You are a fair judge"):
            return "Feedback: fine. Score: 4 out of 5"  # no [RESULT]: never a score
        return "an answer"

    fake = FakeOpenAI(responder)
    server = ServerThread(fake.app()).start()
    try:
        out = tmp_path / "run"
        result = _run(server, write_graph(tmp_path / "graph"), out)
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    recs = _records(out)
    assert all(r["judge_score"] is None and len(r["judge_replies"]) == 3 for r in recs)
    # Not unresolved (m + penalty): not scored at all.
    assert all(r["hpi_score"] is None and r["resolved_level"] is None for r in recs)
    cell = json.loads((out / "summary.json").read_text())["cells"][0]
    assert cell["judge_missing"] == 6 and cell["depth_scores"] == {"1": None, "2": None,
                                                                    "3": None}  # fmt: skip
    assert cell["depth_nodes"] == {"1": 0, "2": 0, "3": 0}
    assert cell["forward_discrepancy"]["overall"]["value"] is None
    assert (cell["n"], cell["samples"], cell["unresolved"], cell["errors"]) == (0, 6, 0, 0)
    assert cell["hpi"] is None and cell["accuracy"] is None and cell["level1_accuracy"] is None
    assert cell["level_counts"] == {"1": 0} and cell["strategies"] == ["depth_zero_shot"]

    # The end-of-run table and hpt summarize: no HPI, no accuracy, the one level the cell has.
    summarized = hpt("summarize", str(out))
    assert summarized.returncode == 0, summarized.stderr
    for text in (result.stdout, summarized.stdout):
        lines = {" ".join(x.replace("│", " ").split()) for x in text.splitlines()}
        assert "HPI (lower is better) - (nothing scored)" in lines, text
        assert "HPF accuracy - (nothing scored)" in lines
        assert "resolved at L1 depth_zero_shot 0" in lines
        assert "judge gave no score (not scored) 6" in lines
        assert "mean judge score, depth 1 - (no scored node)" in lines
        assert "samples scored / recorded 0 / 6" in lines
        assert "resolved at L2" not in text and "2.000" not in text

    report = hpt("report", str(out), "--no-plots")
    assert report.returncode == 0, report.stderr
    # HPI, D1, its nodes, D2, its nodes, D3, its nodes, forward, backward, scored, missing
    assert _report_row(report.stdout, "zero-shot") == ["-", "-", "0", "-", "0", "-", "0", "-",
                                                       "-", "0", "6"]  # fmt: skip
    with (out / "report" / "cells.csv").open() as fh:
        [row] = list(csv.DictReader(fh))
    assert (row["hpi"], row["accuracy"], row["scored"], row["judge_missing"]) == ("", "", "0", "6")


def test_graph_modes_need_the_graph(data_dir: Path, tmp_path: Path) -> None:
    result = hpt("run", "--dataset", "depthqa", "--data-dir", str(data_dir), "--depth-mode",
                 "prompt-pred", "--model", "openai:x", "--base-url", "http://127.0.0.1:9/v1",
                 "--out", str(tmp_path / "r"))  # fmt: skip
    assert_user_error(result, "prompt-pred", "--graph DIR", "hpt decompose")
    assert not (tmp_path / "r").exists()


def test_judge_agreement_between_two_runs(scripted, tmp_path: Path) -> None:
    from hpt.results.depth import krippendorff_alpha_ordinal

    _, server = scripted
    graph = write_graph(tmp_path / "graph")
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        assert _run(server, graph, out).returncode == 0
    same = hpt("agreement", str(first), str(second), "--out", str(tmp_path / "same.json"))
    assert same.returncode == 0, same.stderr
    assert json.loads((tmp_path / "same.json").read_text())["alpha"] == 1.0
    # The second judge gives e a 3 instead of 1: alpha over the six nodes' pairs.
    lines = (second / "samples.jsonl").read_text().splitlines()
    edited = []
    for line in lines:
        record = json.loads(line)
        if record["node_id"] == "e":
            record["judge_score"] = 3
        edited.append(json.dumps(record))
    (second / "samples.jsonl").write_text("\n".join(edited) + "\n")
    other = hpt("agreement", str(first), str(second), "--out", str(tmp_path / "other.json"))
    assert other.returncode == 0, other.stderr
    result = json.loads((tmp_path / "other.json").read_text())
    pairs = [[5, 5], [5, 5], [5, 5], [4, 4], [4, 4], [1, 3]]
    assert result["units"] == 6 and result["exact"] == pytest.approx(5 / 6)
    assert result["alpha"] == pytest.approx(krippendorff_alpha_ordinal(pairs))
    assert result["alpha"] < 1.0 and "Krippendorff's alpha (ordinal)" in other.stdout
    assert_user_error(hpt("agreement", str(first), str(tmp_path / "nope")), "not a run directory")


def test_zero_shot_on_the_offline_questions_file(data_dir: Path, tmp_path: Path) -> None:
    """Without the graph: the deepest questions alone, depth means only."""

    def responder(body: dict[str, Any]) -> str:
        if body["messages"][0]["content"].startswith("You are a fair judge"):
            return "Feedback: partly right. [RESULT] 3"
        return "an answer"

    fake = FakeOpenAI(responder)
    server = ServerThread(fake.app()).start()
    out = tmp_path / "offline"
    try:
        result = hpt("run", "--dataset", "depthqa", "--data-dir", str(data_dir), "--limit", "2",
                     "--model", "openai:test-model", "--base-url", server.base_url, "--out",
                     str(out), "--no-cache")  # fmt: skip
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    recs = _records(out)
    assert len(recs) == 2 and {r["depth"] for r in recs} == {3}
    assert all(r["predecessors"] == [] and r["variant"] == "zero-shot" for r in recs)
    cell = json.loads((out / "summary.json").read_text())["cells"][0]
    assert cell["depth_scores"] == {"1": None, "2": None, "3": 3.0}
    assert cell["forward_discrepancy"]["overall"]["nodes"] == 0


def test_a_ladder_stops_where_the_judge_gave_no_score(tmp_path: Path) -> None:
    """Once a level's verdict is missing the climb cannot be scored: no level above it is
    asked (every call would be spent on nothing), and the record is not scored."""

    def responder(body: dict[str, Any]) -> str:
        if body["messages"][0]["content"].startswith("You are a fair judge"):
            return "Feedback: fine. Score: 4 out of 5"  # no [RESULT]: never a score
        return "an answer"

    fake = FakeOpenAI(responder)
    server = ServerThread(fake.app()).start()
    try:
        out = tmp_path / "ladder"
        result = _run(server, write_graph(tmp_path / "graph"), out, "--strategies",
                      "role,depth_pred,depth_gold,depth_multi_turn")  # fmt: skip
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    recs = _records(out)
    assert recs and all([a["strategy"] for a in r["attempts"]] == ["role"] for r in recs)
    assert all(r["hpi_score"] is None and r["resolved_level"] is None for r in recs)
    # Per node: one answer and the judge's three tries, nothing more.
    assert all(len(r["attempts"][0]["calls"]) == 1 + 3 for r in recs)
    cell = json.loads((out / "summary.json").read_text())["cells"][0]
    assert (cell["n"], cell["judge_missing"], cell["hpi"]) == (0, len(recs), None)


def test_an_empty_answer_scores_the_rubrics_lowest_without_a_judge(tmp_path: Path) -> None:
    judged: list[str] = []

    def responder(body: dict[str, Any]) -> str:
        if body["messages"][0]["content"].startswith("You are a fair judge"):
            judged.append(body["messages"][-1]["content"])
            return "Feedback: fine. [RESULT] 5"
        return "   "  # the model answers nothing

    fake = FakeOpenAI(responder)
    server = ServerThread(fake.app()).start()
    try:
        out = tmp_path / "run"
        result = _run(server, write_graph(tmp_path / "graph"), out)
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    recs = _records(out)
    assert not judged  # nothing was sent to the judge
    assert all(r["judge_score"] == 1 and r["hpi_score"] == 2.0 for r in recs)
    assert all("by rule" in r["attempts"][0]["detail"] for r in recs)
    cell = json.loads((out / "summary.json").read_text())["cells"][0]
    assert (cell["n"], cell["judge_missing"], cell["unresolved"]) == (len(recs), 0, len(recs))
    assert cell["depth_scores"] == {"1": 1.0, "2": 1.0, "3": 1.0}


def test_task_args_are_the_flags_long_form(scripted, tmp_path: Path) -> None:
    """--task-arg depthqa.mode/graph do what --depth-mode and --graph do (these are short for
    them), in either spelling of a mode; the two disagreeing is one error line."""
    _, server = scripted
    graph = write_graph(tmp_path / "graph")
    out = tmp_path / "long"
    result = hpt("run", "--dataset", "depthqa", "--task-arg", f"depthqa.graph={graph}",
                 "--task-arg", 'depthqa.mode=["zero-shot", "multi_turn"]', "--model",
                 "openai:test-model", "--base-url", server.base_url, "--out", str(out),
                 "--no-cache")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert {r["variant"] for r in _records(out)} == {"zero-shot", "multi-turn"}
    spec = json.loads((out / "run.json").read_text())
    assert spec["task_args"] == {"depthqa": {"graph": str(graph),
                                             "mode": ["zero-shot", "multi_turn"]}}  # fmt: skip
    # The same value both ways is no conflict; a shorthand wins over a config file's value.
    config = tmp_path / "run.toml"
    config.write_text('[run.task_args.depthqa]\nmode = "prompt-gold"\n')
    same = _run(server, graph, tmp_path / "same", "--depth-mode", "multi-turn", "--task-arg",
                "depthqa.mode=multi_turn", "--config", str(config))  # fmt: skip
    assert same.returncode == 0, same.stderr
    assert {r["variant"] for r in _records(tmp_path / "same")} == {"multi-turn"}
    clash = _run(server, graph, tmp_path / "clash", "--depth-mode", "zero-shot", "--task-arg",
                 "depthqa.mode=multi_turn")  # fmt: skip
    assert_user_error(clash, "--depth-mode and --task-arg depthqa.mode disagree")
    clash = _run(server, graph, tmp_path / "clash", "--task-arg", "depthqa.graph=elsewhere")
    assert_user_error(clash, "--graph and --task-arg depthqa.graph disagree")
    assert not (tmp_path / "clash").exists()


def test_resume_a_run_saved_before_task_args(scripted, tmp_path: Path) -> None:
    """run.json files written before task_args keep depth_mode and graph at the top level;
    --resume reads them as DepthQA's arguments and writes run.json anew with task_args."""
    fake, server = scripted
    graph = write_graph(tmp_path / "graph")
    out = tmp_path / "run"
    assert _run(server, graph, out, "--depth-mode", "zero-shot,multi-turn").returncode == 0
    spec = json.loads((out / "run.json").read_text())
    assert spec.pop("task_args") == {"depthqa": {"mode": ["zero-shot", "multi-turn"],
                                                 "graph": str(graph)}}  # fmt: skip
    old = {**spec, "depth_mode": ["zero-shot", "multi-turn"], "graph": str(graph),
           "hpt_version": "0.1.0"}  # fmt: skip
    (out / "run.json").write_text(json.dumps(old, indent=2))
    lines = (out / "samples.jsonl").read_text().splitlines(keepends=True)
    (out / "samples.jsonl").write_text("".join(lines[:-3]))  # three records still to do
    fake.responder.answers.clear()
    refused = hpt("run", "--resume", str(out), "--depth-mode", "zero-shot", "--task-arg",
                  "depthqa.mode=zero-shot")  # fmt: skip
    assert_user_error(refused, "cannot take --depth-mode, --task-arg")
    resumed = hpt("run", "--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr
    # Records of two versions in one run: said once, not hidden.
    warned = [x for x in resumed.stderr.splitlines() if x.startswith("hpt: warning:")]
    assert len(warned) == 1 and "started by hpt 0.1.0 and is resumed by hpt" in warned[0]
    records = _records(out)
    assert len(records) == 12 and {r["variant"] for r in records} == {"zero-shot", "multi-turn"}
    assert fake.responder.answers  # the missing ones were asked
    saved = json.loads((out / "run.json").read_text())
    assert "depth_mode" not in saved and "graph" not in saved
    assert saved["task_args"] == {"depthqa": {"mode": ["zero-shot", "multi-turn"],
                                              "graph": str(graph)}}  # fmt: skip


def test_depthqa_shorthands_apply_to_nothing_in_a_run_without_depthqa(
    scripted, data_dir: Path, tmp_path: Path
) -> None:
    """As before task_args: --depth-mode/--graph, a shared config's depth_mode and an old
    run.json's depth_mode/graph do nothing to a run that does not evaluate DepthQA; and a
    dataset's name is read whatever its case."""
    _, server = scripted
    graph = write_graph(tmp_path / "graph")
    config = tmp_path / "shared.toml"
    config.write_text('[run]\ndepth_mode = "multi-turn"\n')
    out = tmp_path / "boolq"
    result = hpt("run", "--dataset", "boolq", "--limit", "2", "--strategies", "role",
                 "--depth-mode", "zero-shot", "--graph", str(graph), "--config", str(config),
                 "--data-dir", str(data_dir), "--model", "openai:test-model", "--base-url", server.base_url, "--out",
                 str(out), "--no-cache")  # fmt: skip
    assert result.returncode == 0, result.stderr
    saved = json.loads((out / "run.json").read_text())
    assert saved["task_args"] == {}
    # A run.json of before with a DepthQA setting in a boolq run resumes.
    lines = (out / "samples.jsonl").read_text().splitlines(keepends=True)
    (out / "samples.jsonl").write_text("".join(lines[:-1]))
    (out / "run.json").write_text(json.dumps({**saved, "depth_mode": ["zero-shot"]}))
    resumed = hpt("run", "--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr
    assert len(_records(out)) == 2
    upper = _run(server, graph, tmp_path / "upper", "--dataset", "DepthQA")
    assert upper.returncode == 0, upper.stderr
