"""The DepthQA question graph: loading (directory, hub, questions only), saving, integrity, order."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import datasets
import pytest

from hpt.tasks import DatasetError
from hpt.tasks.depthqa.graph import (
    DepthQuestion,
    GraphError,
    QuestionGraph,
    describe,
    load_graph_dir,
    load_graph_hub,
    load_questions_only,
    write_graph_dir,
)

Row = dict[str, Any]

# Two depth-3 trees. 1_d1_n3 and 2_d1_n1 share question d1_q3 (DepthQA reuses questions).
NODES: dict[str, tuple[str, int]] = {
    "1_d3": ("d3_q1", 3),
    "1_d2_n1": ("d2_q1", 2),
    "1_d2_n2": ("d2_q2", 2),
    "1_d1_n1": ("d1_q1", 1),
    "1_d1_n2": ("d1_q2", 1),
    "1_d1_n3": ("d1_q3", 1),
    "2_d3": ("d3_q2", 3),
    "2_d2_n1": ("d2_q3", 2),
    "2_d1_n1": ("d1_q3", 1),
    "2_d1_n10": ("d1_q4", 1),
}
EDGES = [  # (predecessor, successor)
    ("1_d2_n1", "1_d3"),
    ("1_d2_n2", "1_d3"),
    ("1_d1_n1", "1_d2_n1"),
    ("1_d1_n2", "1_d2_n1"),
    ("1_d1_n2", "1_d2_n2"),
    ("1_d1_n3", "1_d2_n2"),
    ("2_d2_n1", "2_d3"),
    ("2_d1_n1", "2_d2_n1"),
    ("2_d1_n10", "2_d2_n1"),
]


def question_rows() -> list[Row]:
    qids = sorted({(qid, depth) for qid, depth in NODES.values()})
    return [
        {
            "qid": qid,
            "depth": depth,
            "domain": "Math",
            "question": f"Question {qid}?",
            "answer": f"Answer {qid}.",
        }
        for qid, depth in qids
    ]


def node_rows() -> list[Row]:
    return [
        {
            "nodeid": n,
            "group": n.split("_")[0],
            "depth": depth,
            "direct_predecessors": [a for a, b in EDGES if b == n],
            "direct_successors": [b for a, b in EDGES if a == n],
        }
        for n, (_, depth) in NODES.items()
    ]


def old_node_rows(keyed: bool) -> list[Row]:
    """The older hub schema: no depth, shallower_nodes/deeper_nodes (flat or keyed by depth)."""
    rows = []
    for row in node_rows():
        depth = row.pop("depth")
        preds = row.pop("direct_predecessors")
        succs = row.pop("direct_successors")
        if keyed:
            # Keyed rows also list farther ancestors/descendants; empty levels are null.
            grand_preds = sorted({a for p in preds for a, b in EDGES if b == p})
            grand_succs = sorted({b for s in succs for a, b in EDGES if a == s})
            shallower: dict[str, list[str] | None] = {"1": None, "2": None}
            deeper: dict[str, list[str] | None] = {"3": None, "2": None}
            if preds:
                shallower[str(depth - 1)] = preds
            if grand_preds:
                shallower[str(depth - 2)] = grand_preds
            if succs:
                deeper[str(depth + 1)] = succs
            if grand_succs:
                deeper[str(depth + 2)] = grand_succs
            row["shallower_nodes"], row["deeper_nodes"] = shallower, deeper
        else:
            row["shallower_nodes"], row["deeper_nodes"] = preds, succs
        rows.append(row)
    return rows


def link_rows() -> list[Row]:
    return [{"nodeid": n, "qid": qid} for n, (qid, _) in NODES.items()]


def write_rows(path: Path, rows: list[Row]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def make_dir(
    root: Path,
    questions: list[Row] | None = None,
    nodes: list[Row] | None = None,
    links: list[Row] | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_rows(root / "questions.jsonl", question_rows() if questions is None else questions)
    write_rows(root / "nodes.jsonl", node_rows() if nodes is None else nodes)
    write_rows(root / "node_to_q.jsonl", link_rows() if links is None else links)
    return root


def node(rows: list[Row], ident: str) -> Row:
    """The row of a node id (nodes, node_to_q) or question id (questions)."""
    return next(r for r in rows if ident in (r.get("nodeid"), r.get("qid")))


# -- loading and saving ----------------------------------------------------------------------
def test_loads_the_graph(tmp_path: Path) -> None:
    graph = load_graph_dir(make_dir(tmp_path / "g"))
    assert graph.has_edges
    assert graph.predecessors("1_d3") == ["1_d2_n1", "1_d2_n2"]
    assert graph.successors("1_d1_n2") == ["1_d2_n1", "1_d2_n2"]
    assert graph.depth_of("2_d2_n1") == 2
    assert graph.question_of("1_d3") == DepthQuestion(
        qid="d3_q1", depth=3, domain="Math", question="Question d3_q1?", answer="Answer d3_q1."
    )
    assert graph.ancestors("1_d3") == {"1_d2_n1", "1_d2_n2", "1_d1_n1", "1_d1_n2", "1_d1_n3"}
    assert graph.descendants("1_d1_n1") == {"1_d2_n1", "1_d3"}


def test_round_trip_is_exact_and_deterministic(tmp_path: Path) -> None:
    graph = load_graph_dir(make_dir(tmp_path / "in"))
    write_graph_dir(graph, tmp_path / "out")
    again = load_graph_dir(tmp_path / "out")
    assert again == graph
    # Shuffled input writes the same bytes.
    rng = random.Random(7)
    shuffled = [rows[:] for rows in (question_rows(), node_rows(), link_rows())]
    for rows in shuffled:
        rng.shuffle(rows)
    write_graph_dir(load_graph_dir(make_dir(tmp_path / "in2", *shuffled)), tmp_path / "out2")
    for name in ("questions.jsonl", "nodes.jsonl", "node_to_q.jsonl"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "out2" / name).read_bytes()
    first = json.loads((tmp_path / "out" / "nodes.jsonl").read_text().splitlines()[0])
    assert set(first) == {"nodeid", "group", "depth", "direct_predecessors", "direct_successors"}


@pytest.mark.parametrize("keyed", [False, True], ids=["flat", "keyed-by-depth"])
def test_older_node_schema_gives_the_same_graph(tmp_path: Path, keyed: bool) -> None:
    new = load_graph_dir(make_dir(tmp_path / "new"))
    old = load_graph_dir(make_dir(tmp_path / "old", nodes=old_node_rows(keyed)))
    assert old == new


def test_older_schema_farther_entry_must_be_reachable(tmp_path: Path) -> None:
    nodes = old_node_rows(keyed=True)
    node(nodes, "1_d3")["shallower_nodes"]["1"] = ["1_d1_n1", "2_d1_n1"]
    with pytest.raises(
        GraphError,
        match=r"nodes\.jsonl:\d+: node '1_d3' lists '2_d1_n1' in shallower_nodes at depth 1",
    ):
        load_graph_dir(make_dir(tmp_path / "g", nodes=nodes))


def test_shared_question(tmp_path: Path) -> None:
    graph = load_graph_dir(make_dir(tmp_path / "g"))
    assert graph.question_of("1_d1_n3") is graph.question_of("2_d1_n1")
    assert graph.node_to_q["1_d1_n3"] == graph.node_to_q["2_d1_n1"] == "d1_q3"
    info = describe(graph)
    assert info["nodes"] == 10 and info["questions"] == 9 and info["shared"] == 1
    assert info["edges"] == len(EDGES)
    assert info["by_depth"] == {
        1: {"nodes": 5, "questions": 4, "edges": 0},
        2: {"nodes": 3, "questions": 3, "edges": 6},
        3: {"nodes": 2, "questions": 2, "edges": 3},
    }


# -- order and subgraphs -----------------------------------------------------------------------
def test_order_ignores_input_order_and_respects_predecessors(tmp_path: Path) -> None:
    expected = [
        "1_d1_n1", "1_d1_n2", "1_d1_n3", "2_d1_n1", "2_d1_n10",
        "1_d2_n1", "1_d2_n2", "2_d2_n1",
        "1_d3", "2_d3",
    ]  # fmt: skip
    for seed in range(5):
        rng = random.Random(seed)
        nodes = node_rows()
        rng.shuffle(nodes)
        for row in nodes:
            rng.shuffle(row["direct_predecessors"])
            rng.shuffle(row["direct_successors"])
        links = link_rows()
        rng.shuffle(links)
        graph = load_graph_dir(make_dir(tmp_path / str(seed), nodes=nodes, links=links))
        order = graph.order()
        assert order == expected
        for i, nodeid in enumerate(order):
            assert all(order.index(p) < i for p in graph.predecessors(nodeid))


def test_subgraph_keeps_ancestors(tmp_path: Path) -> None:
    graph = load_graph_dir(make_dir(tmp_path / "g"))
    sub = graph.subgraph(["1_d2_n2"])
    assert set(sub.nodes) == {"1_d2_n2", "1_d1_n2", "1_d1_n3"}
    assert sub.successors("1_d2_n2") == []  # 1_d3 is outside
    assert sub.successors("1_d1_n2") == ["1_d2_n2"]
    assert set(sub.questions) == {"d2_q2", "d1_q2", "d1_q3"}
    whole = graph.subgraph(["1_d3"])
    assert set(whole.nodes) == {n for n in NODES if n.startswith("1_")}
    assert whole.order()[-1] == "1_d3"
    assert graph.subgraph(["1_d3", "2_d3"]) == graph
    with pytest.raises(GraphError, match="unknown node 'nope'"):
        graph.subgraph(["nope"])


# -- integrity -------------------------------------------------------------------------------
def _unknown_edge(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    node(nodes, "1_d2_n1")["direct_predecessors"].append("ghost")


def _skips_depth(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    node(nodes, "1_d3")["direct_predecessors"].append("1_d1_n1")
    node(nodes, "1_d1_n1")["direct_successors"].append("1_d3")


def _cycle(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    node(nodes, "1_d2_n1")["direct_successors"].append("1_d1_n1")
    node(nodes, "1_d1_n1")["direct_predecessors"].append("1_d2_n1")


def _unmapped(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    links.remove(node(links, "1_d1_n1"))
    questions[:] = [q for q in questions if q["qid"] != "d1_q1"]


def _unknown_question(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    node(links, "1_d1_n1")["qid"] = "d1_q99"
    questions[:] = [q for q in questions if q["qid"] != "d1_q1"]


def _unused_question(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    questions.append({"qid": "d1_q50", "depth": 1, "question": "?", "answer": "!"})


def _depth_mismatch(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    node(questions, "d1_q2")["depth"] = 2


def _twin_disagrees(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    node(nodes, "1_d1_n1")["direct_successors"].remove("1_d2_n1")


def _listed_twice(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    node(nodes, "1_d3")["direct_predecessors"].append("1_d2_n1")


def _duplicate_qid(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    questions.append(dict(questions[0]))


def _duplicate_nodeid(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    nodes.append(dict(node(nodes, "2_d3")))


def _duplicate_link(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    links.append({"nodeid": "1_d3", "qid": "d3_q2"})


def _missing_field(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    del node(questions, "d2_q1")["answer"]


def _bad_depth(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    node(questions, "d2_q1")["depth"] = 4


def _no_edge_lists(nodes: list[Row], links: list[Row], questions: list[Row]) -> None:
    del node(nodes, "1_d3")["direct_successors"]


@pytest.mark.parametrize(
    ("breaks", "message"),
    [
        (_unknown_edge, r"g: node '1_d2_n1' lists unknown node 'ghost' in direct_predecessors$"),
        (
            _skips_depth,
            r"node '1_d1_n1' \(depth 1\) lists '1_d3' \(depth 3\) in direct_successors; "
            r"edges join adjacent depths, so it must be at depth 2",
        ),
        (_cycle, r"edges form a cycle: 1_d1_n1 -> 1_d2_n1 -> 1_d1_n1 "),
        (_unmapped, r"node '1_d1_n1' has no question in node_to_q"),
        (_unknown_question, r"node '1_d1_n1' is mapped to unknown question 'd1_q99'"),
        (_unused_question, r"question 'd1_q50' is not used by any node"),
        (_depth_mismatch, r"node '1_d1_n2' has depth 1 but its question 'd1_q2' has depth 2"),
        (
            _twin_disagrees,
            r"node '1_d2_n1' lists '1_d1_n1' in direct_predecessors "
            r"but '1_d1_n1' does not list '1_d2_n1' in direct_successors",
        ),
        (_listed_twice, r"node '1_d3' lists '1_d2_n1' twice in direct_predecessors"),
        (
            _duplicate_qid,
            r"questions\.jsonl:10: duplicate question 'd1_q1' \(first at \S+questions\.jsonl:1\)",
        ),
        (
            _duplicate_nodeid,
            r"nodes\.jsonl:11: duplicate node '2_d3' \(first at \S+nodes\.jsonl:7\)",
        ),
        (_duplicate_link, r"node_to_q\.jsonl:11: duplicate node in node_to_q '1_d3'"),
        (_missing_field, r"questions\.jsonl:5: answer: Field required"),
        (_bad_depth, r"questions\.jsonl:5: depth: Input should be less than or equal to 3"),
        (
            _no_edge_lists,
            r"nodes\.jsonl:1: node '1_d3' has no direct_successors \(nor deeper_nodes\)",
        ),
    ],
)
def test_integrity_errors(tmp_path: Path, breaks: Any, message: str) -> None:
    questions, nodes, links = question_rows(), node_rows(), link_rows()
    breaks(nodes, links, questions)
    with pytest.raises(GraphError, match=message):
        load_graph_dir(make_dir(tmp_path / "g", questions, nodes, links))


def test_validate_catches_hand_built_mistakes(tmp_path: Path) -> None:
    graph = load_graph_dir(make_dir(tmp_path / "g"))
    broken = QuestionGraph(
        questions=dict(graph.questions),
        nodes={**graph.nodes, "other": graph.nodes["1_d3"]},
        node_to_q=dict(graph.node_to_q),
    )
    with pytest.raises(GraphError, match=r"nodes\['other'\] holds node '1_d3'"):
        broken.validate()


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    root = make_dir(tmp_path / "g")
    with (root / "node_to_q.jsonl").open("a") as fh:
        fh.write("{not json\n")
    with pytest.raises(GraphError, match=r"node_to_q\.jsonl:11: not valid JSON"):
        load_graph_dir(root)
    write_rows(root / "node_to_q.jsonl", [*link_rows(), {"nodeid": "x", "qid": 3}])
    with pytest.raises(
        GraphError, match=r"node_to_q\.jsonl:11: qid: Input should be a valid string"
    ):
        load_graph_dir(root)


def test_missing_file_says_what_the_directory_holds(tmp_path: Path) -> None:
    root = make_dir(tmp_path / "g")
    (root / "nodes.jsonl").unlink()
    with pytest.raises(
        GraphError,
        match=r"nodes\.jsonl is missing; a graph directory holds questions\.jsonl, nodes\.jsonl and node_to_q\.jsonl",
    ):
        load_graph_dir(root)
    with pytest.raises(GraphError, match="is not a directory"):
        load_graph_dir(tmp_path / "absent")


# -- offline questions -------------------------------------------------------------------------
def test_offline_questions_file_has_no_edges(data_dir: Path) -> None:
    graph = load_questions_only(data_dir / "depthqa" / "questions.jsonl")
    assert not graph.has_edges
    info = describe(graph)
    assert info["edges"] == 0 and info["shared"] == 0
    assert {d: v["nodes"] for d, v in info["by_depth"].items()} == {1: 1121, 2: 359, 3: 91}
    assert graph.order()[:3] == ["d1_q1", "d1_q2", "d1_q3"]
    assert graph.order()[-1] == "d3_q91"
    question = graph.question_of("d3_q1")
    assert question.depth == 3 and question.domain is None and question.answer
    assert graph.predecessors("d3_q1") == []
    assert load_questions_only(data_dir / "depthqa") == graph


# -- the hub -----------------------------------------------------------------------------------
def test_hub_failure_points_at_graph_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError(
            "Couldn't reach 'kaist-ai/DepthQA' on the Hub (LocalEntryNotFoundError)"
        )

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    with pytest.raises(
        DatasetError, match=r"could not load kaist-ai/DepthQA \(questions, test\).*--graph DIR"
    ):
        load_graph_hub()


@pytest.mark.parametrize("schema", ["new", "old-flat", "old-keyed"])
def test_hub_rows_in_both_schemas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, schema: str
) -> None:
    nodes = {"new": node_rows(), "old-flat": old_node_rows(False), "old-keyed": old_node_rows(True)}
    questions = [
        {**q, "tutoreval_data": None if q["depth"] < 3 else {"passage": "..."}, "augmented": False}
        for q in question_rows()
    ]
    configs = {"questions": questions, "nodes": nodes[schema], "node_to_q": link_rows()}
    calls = []

    def fake_load_dataset(repo: str, config: str, split: str) -> list[Row]:
        calls.append((repo, config, split))
        return configs[config]

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    graph = load_graph_hub()
    assert graph == load_graph_dir(make_dir(tmp_path / "g"))
    assert calls == [("kaist-ai/DepthQA", c, "test") for c in ("questions", "nodes", "node_to_q")]


def test_hub_rows_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = node_rows()
    node(nodes, "1_d1_n1")["direct_successors"] = []
    configs = {"questions": question_rows(), "nodes": nodes, "node_to_q": link_rows()}
    monkeypatch.setattr(datasets, "load_dataset", lambda repo, config, split: configs[config])
    with pytest.raises(GraphError, match=r"^kaist-ai/DepthQA: node '1_d2_n1' lists '1_d1_n1'"):
        load_graph_hub()
    configs["questions"][0]["depth"] = "1"
    with pytest.raises(GraphError, match=r"kaist-ai/DepthQA \(questions\) row 1: depth"):
        load_graph_hub()


# -- shards ------------------------------------------------------------------------------------
def test_components_join_edges_and_shared_questions(tmp_path: Path) -> None:
    """A node, its predecessors and every node asking its question share one component (a
    shard keeps them together: their answers are shared within a run)."""
    graph = load_graph_dir(make_dir(tmp_path / "g"))
    # The two trees meet only through d1_q3, asked by 1_d1_n3 and 2_d1_n1.
    assert set(graph.components().values()) == {"1_d1_n1"}
    apart = graph.subgraph(["1_d2_n1"])  # 1_d1_n1, 1_d1_n2 and 1_d2_n1, without d1_q3
    assert apart.components() == dict.fromkeys(apart.nodes, "1_d1_n1")
    # Without the shared question, tree 2 is a component of its own.
    links = [r if r["nodeid"] != "2_d1_n1" else {**r, "qid": "d1_q9"} for r in link_rows()]
    questions = [*question_rows(), {**node(question_rows(), "d1_q3"), "qid": "d1_q9"}]
    split = load_graph_dir(make_dir(tmp_path / "split", questions=questions, links=links))
    parts = split.components()
    assert {parts[n] for n in NODES if n.startswith("1_")} == {"1_d1_n1"}
    assert {parts[n] for n in NODES if n.startswith("2_")} == {"2_d1_n1"}


def test_shards_keep_each_component_whole(tmp_path: Path) -> None:
    """--shard places DepthQA's nodes by component: each shard holds whole components, and
    the shards together hold every node once."""
    from hpt.tasks import task_class
    from hpt.tasks.base import in_shard

    links = [r if r["nodeid"] != "2_d1_n1" else {**r, "qid": "d1_q9"} for r in link_rows()]
    questions = [*question_rows(), {**node(question_rows(), "d1_q3"), "qid": "d1_q9"}]
    graph_dir = make_dir(tmp_path / "split", questions=questions, links=links)
    task = task_class("depthqa").configured(None, {"graph": str(graph_dir)})
    samples = task.load_samples()
    for seed in range(6):
        shards = [
            {s.id for s in samples if in_shard(seed, task.shard_key(s), i, 2)} for i in (1, 2)
        ]
        assert shards[0].isdisjoint(shards[1]) and shards[0] | shards[1] == set(NODES)
        trees = [{n for n in NODES if n.startswith(t)} for t in ("1_", "2_")]
        assert all(tree <= shard for tree in trees for shard in shards if tree & shard)
