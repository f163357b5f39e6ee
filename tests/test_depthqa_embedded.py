"""DepthQA end to end on the embedded SmolLM2 model: decompose two depth-3 questions into a
graph, run the four inference modes and the ladder over depth, judged by the same model, then
report and view. A 135M model rarely writes the JSON decomposition asks for or the judge's
[RESULT] line, so this checks what must hold whatever it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpt.tasks.depthqa.graph import load_graph_dir
from tests.test_cli import hpt

pytestmark = pytest.mark.embedded

MODES = ("zero-shot", "prompt-gold", "prompt-pred", "multi-turn")


def test_decompose_then_every_mode_and_the_depth_ladder(data_dir: Path, tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (data_dir / "depthqa" / "questions.jsonl").open()]
    questions = tmp_path / "q.jsonl"
    deepest = [r for r in rows if r["depth"] == 3][:2]
    questions.write_text("".join(json.dumps(r) + "\n" for r in deepest))
    graph = tmp_path / "graph"
    made = hpt("decompose", "--questions", str(questions), "--model", "local", "--out",
               str(graph), "--max-tokens", "192", timeout=900)  # fmt: skip
    assert made.returncode == 0, made.stderr
    loaded = load_graph_dir(graph)
    loaded.validate()
    tops = [n for n in loaded.order() if loaded.depth_of(n) == 3]
    assert len(tops) == 2
    summary = json.loads((graph / "decompose_summary.json").read_text())
    assert summary  # what was made, retried and failed is written down

    out = tmp_path / "run"
    run = hpt("run", "--dataset", "depthqa", "--graph", str(graph), "--model", "local",
              "--depth-mode", ",".join(MODES), "--strategies",
              "role,depth_pred,depth_gold,depth_multi_turn", "--max-tokens", "96",
              "--out", str(out), "--no-progress", timeout=1200)  # fmt: skip
    assert run.returncode == 0, run.stderr
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    nodes = set(loaded.nodes)
    cells = {(r["variant"], r["node_id"]) for r in records}
    assert cells == {(v, n) for v in (*MODES, None) for n in nodes}
    for r in records:
        assert r["kind"] == "depth" and r["error"] is None
        assert r["judge_score"] is None or 1 <= r["judge_score"] <= 5
        for a in r["attempts"]:
            judged = [c for c in a["calls"] if c["purpose"] == "judge"]
            if a.get("truncated"):
                # Cut off at the token limit (at 96 tokens the tiny model mostly is): scored 1
                # by rule, the judge not asked.
                assert not judged and a["verdict"]["score"] == 1 and "by rule" in a["detail"]
            else:
                assert judged and a["verdict"]["replies"]
    cells_summary = json.loads((out / "summary.json").read_text())["cells"]
    assert len(cells_summary) == 5
    for cell in cells_summary:
        assert set(cell["depth_scores"]) == {"1", "2", "3"}
        assert set(cell["forward_discrepancy"]) == {"d1_d2", "d2_d3", "overall"}
        mine = [r for r in records if r["variant"] == cell["variant"]]
        # A climb with a judge reply lacking [RESULT] at any level is missing, not unresolved.
        unjudged = [r for r in mine if any(a["verdict"] and a["verdict"]["score"] is None
                                           for a in r["attempts"])]  # fmt: skip
        assert all(r["hpi_score"] is None for r in unjudged)
        assert cell["judge_missing"] == len(unjudged)
        assert cell["n"] + cell["judge_missing"] == len(nodes)
        assert (cell["hpi"] is None) == (cell["n"] == 0) == (cell["accuracy"] is None)
        assert sum(cell["depth_nodes"].values()) <= cell["n"]
    report = hpt("report", str(out), "--no-plots")
    assert report.returncode == 0, report.stderr
    assert "## DepthQA · mean judge score per depth" in report.stdout
    view = hpt("view", str(out), "--no-open")
    assert view.returncode == 0, view.stderr


async def test_the_embedded_model_gives_offline_embeddings(tmp_path: Path) -> None:
    from hpt.backends import parse_model_spec
    from hpt.backends.embeddings import open_embeddings

    texts = ["What is a mean?", "What is a mean?", "How do volcanoes erupt?"]
    config = parse_model_spec("local")
    async with open_embeddings(config, label="local", cache_path=tmp_path / "e.sqlite3") as c:
        first = await c.embed(texts)
        assert first.shape[0] == 3 and first.shape[1] > 100
        same, other = float(first[0] @ first[1]), float(first[0] @ first[2])
        assert same > 0.999 and other < same
        assert c.stats.embedded == 2  # a repeated text is asked once
    async with open_embeddings(config, label="local", cache_path=tmp_path / "e.sqlite3") as c:
        again = await c.embed(texts)
        assert c.stats.requests == 0 and c.stats.cached == 3  # cached across server ports
        assert (again == first).all()
