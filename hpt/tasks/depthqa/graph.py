"""DepthQA's question graph: questions at depths 1-3, each linked to the shallower ones it needs.

Edges join nodes, not questions: several nodes may share one question (on the hub 1699 nodes
map to 1571 questions), and an edge always runs from a depth-k node to a depth-(k+1) node.
The graph comes from the hub's three configs (``questions``, ``nodes``, ``node_to_q``), from a
directory holding them as JSON lines, or, with no edges, from a questions file alone.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpt.errors import HptError

HUB_REPO = "kaist-ai/DepthQA"
HUB_SPLIT = "test"
DEPTHS = (1, 2, 3)
QUESTIONS_FILE = "questions.jsonl"
NODES_FILE = "nodes.jsonl"
NODE_TO_Q_FILE = "node_to_q.jsonl"
GRAPH_FILES = (QUESTIONS_FILE, NODES_FILE, NODE_TO_Q_FILE)
_HOLDS = (
    "a graph directory holds questions.jsonl, nodes.jsonl and node_to_q.jsonl "
    f"(the {HUB_REPO} configs questions, nodes and node_to_q as JSON lines)"
)

Depth = Annotated[int, Field(ge=1, le=3)]
Id = Annotated[str, Field(min_length=1)]


class GraphError(HptError, ValueError):
    """The question graph is malformed or inconsistent; the message names the ids or file.

    Not a DatasetError: hpt.tasks imports this module (the DepthQA task), so this module
    imports hpt.tasks only inside functions; a hub failure stays a DatasetError.
    """


class DepthQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    qid: Id
    depth: Depth
    domain: str | None = None
    question: str
    # The reference answer the judge compares with; both the hub and the offline file have one.
    answer: str


class DepthNode(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    nodeid: Id
    # The depth-3 question's tree the node was built for ("1" for 1_d3, 1_d2_n1, ...).
    group: str
    depth: Depth
    direct_predecessors: list[str] = Field(default_factory=list)
    direct_successors: list[str] = Field(default_factory=list)


def _natural(text: str) -> tuple[tuple[str, int], ...]:
    """Sort key that puts n2 before n10; text and number chunks alternate, so tuples compare."""
    parts = re.split(r"(\d+)", text)
    return tuple((p, 0) if i % 2 == 0 else ("", int(p)) for i, p in enumerate(parts))


def _id_key(text: str) -> tuple[tuple[tuple[str, int], ...], str]:
    return _natural(text), text


@dataclass
class QuestionGraph:
    questions: dict[str, DepthQuestion]
    nodes: dict[str, DepthNode]
    node_to_q: dict[str, str]

    # -- lookups ------------------------------------------------------------------------
    def _node(self, nodeid: str) -> DepthNode:
        try:
            return self.nodes[nodeid]
        except KeyError:
            raise GraphError(f"unknown node {nodeid!r}") from None

    def question_of(self, nodeid: str) -> DepthQuestion:
        self._node(nodeid)
        return self.questions[self.node_to_q[nodeid]]

    def predecessors(self, nodeid: str) -> list[str]:
        return list(self._node(nodeid).direct_predecessors)

    def successors(self, nodeid: str) -> list[str]:
        return list(self._node(nodeid).direct_successors)

    def depth_of(self, nodeid: str) -> int:
        return self._node(nodeid).depth

    @property
    def has_edges(self) -> bool:
        return any(n.direct_predecessors for n in self.nodes.values())

    def order(self) -> list[str]:
        """Node ids by depth, then id (natural order); never by how the input listed them.

        Every edge joins adjacent depths (``validate``), so depth order puts each node after
        all its predecessors.
        """
        return sorted(self.nodes, key=lambda n: (self.nodes[n].depth, _id_key(n)))

    def _reach(self, nodeid: str, direction: Literal["up", "down"]) -> set[str]:
        seen: set[str] = set()
        todo = [nodeid]
        while todo:
            node = self._node(todo.pop())
            step = node.direct_predecessors if direction == "up" else node.direct_successors
            for other in step:
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return seen

    def components(self) -> dict[str, str]:
        """Each node's component: the nodes joined by edges or by asking the same question
        (whose answers a run shares), named by its first node in id order."""
        parent = {n: n for n in self.nodes}

        def root(n: str) -> str:
            while parent[n] != n:
                parent[n] = parent[parent[n]]
                n = parent[n]
            return n

        def join(a: str, b: str) -> None:
            ra, rb = root(a), root(b)
            if ra != rb:
                first, other = sorted((ra, rb), key=_id_key)
                parent[other] = first

        asking: dict[str, str] = {}
        for nodeid in sorted(self.nodes, key=_id_key):
            for pred in self.nodes[nodeid].direct_predecessors:
                if pred in parent:
                    join(nodeid, pred)
            qid = self.node_to_q.get(nodeid)
            if qid is not None:
                join(nodeid, asking.setdefault(qid, nodeid))
        return {n: root(n) for n in self.nodes}

    def ancestors(self, nodeid: str) -> set[str]:
        return self._reach(nodeid, "up")

    def descendants(self, nodeid: str) -> set[str]:
        return self._reach(nodeid, "down")

    def subgraph(self, nodeids: Iterable[str]) -> QuestionGraph:
        """The given nodes and all their ancestors (what answering them builds on), for --limit.

        Successor lists keep only nodes inside; the questions are the ones still used.
        """
        keep: set[str] = set()
        for nodeid in nodeids:
            keep.add(nodeid)
            keep |= self.ancestors(nodeid)
        nodes = {
            n: self.nodes[n].model_copy(
                update={
                    "direct_successors": [s for s in self.nodes[n].direct_successors if s in keep]
                }
            )
            for n in sorted(keep, key=_id_key)
        }
        links = {n: self.node_to_q[n] for n in nodes}
        questions = {q: self.questions[q] for q in sorted(set(links.values()), key=_id_key)}
        graph = QuestionGraph(questions=questions, nodes=nodes, node_to_q=links)
        graph.validate()
        return graph

    # -- integrity ----------------------------------------------------------------------
    def validate(self) -> None:
        """Raise GraphError for the first inconsistency found (checked in id order)."""
        for key, q in self.questions.items():
            if key != q.qid:
                raise GraphError(f"questions[{key!r}] holds question {q.qid!r}")
        for key, n in self.nodes.items():
            if key != n.nodeid:
                raise GraphError(f"nodes[{key!r}] holds node {n.nodeid!r}")
        ids = sorted(self.nodes, key=_id_key)
        for nodeid, qid in sorted(self.node_to_q.items()):
            if nodeid not in self.nodes:
                raise GraphError(f"node_to_q maps unknown node {nodeid!r} (to {qid!r})")
        used = set(self.node_to_q.values())
        for qid in sorted(self.questions, key=_id_key):
            if qid not in used:
                # A question no node uses would silently never be asked.
                raise GraphError(f"question {qid!r} is not used by any node")
        for nodeid in ids:
            node = self.nodes[nodeid]
            mapped = self.node_to_q.get(nodeid)
            if mapped is None:
                raise GraphError(f"node {nodeid!r} has no question in node_to_q")
            if mapped not in self.questions:
                raise GraphError(f"node {nodeid!r} is mapped to unknown question {mapped!r}")
            if self.questions[mapped].depth != node.depth:
                raise GraphError(
                    f"node {nodeid!r} has depth {node.depth} but its question {mapped!r} "
                    f"has depth {self.questions[mapped].depth}"
                )
        for nodeid in ids:
            self._check_edges(self.nodes[nodeid])
        cycle = self._find_cycle(ids)
        if cycle:
            raise GraphError(
                "edges form a cycle: " + " -> ".join(cycle) + " (a -> b: a is a predecessor of b)"
            )
        for nodeid in ids:
            node = self.nodes[nodeid]
            for field, others, want in (
                ("direct_predecessors", node.direct_predecessors, node.depth - 1),
                ("direct_successors", node.direct_successors, node.depth + 1),
            ):
                for other in others:
                    got = self.nodes[other].depth
                    if got != want:
                        raise GraphError(
                            f"node {nodeid!r} (depth {node.depth}) lists {other!r} (depth {got}) "
                            f"in {field}; edges join adjacent depths, so it must be at depth {want}"
                        )

    def _check_edges(self, node: DepthNode) -> None:
        for field, twin, others in (
            ("direct_predecessors", "direct_successors", node.direct_predecessors),
            ("direct_successors", "direct_predecessors", node.direct_successors),
        ):
            for other, count in Counter(others).items():
                if count > 1:
                    raise GraphError(f"node {node.nodeid!r} lists {other!r} twice in {field}")
                if other not in self.nodes:
                    raise GraphError(
                        f"node {node.nodeid!r} lists unknown node {other!r} in {field}"
                    )
                if node.nodeid not in getattr(self.nodes[other], twin):
                    raise GraphError(
                        f"node {node.nodeid!r} lists {other!r} in {field} "
                        f"but {other!r} does not list {node.nodeid!r} in {twin}"
                    )

    def _find_cycle(self, ids: list[str]) -> list[str] | None:
        """A cycle as node ids in edge direction (first == last), or None; iterative DFS."""
        done: set[str] = set()
        for start in ids:
            if start in done:
                continue
            path = [start]
            on_path = {start}
            stack = [iter(self.nodes[start].direct_successors)]
            while stack:
                nxt = next(stack[-1], None)
                if nxt is None:
                    stack.pop()
                    done.add(path[-1])
                    on_path.discard(path.pop())
                elif nxt in on_path:
                    return [*path[path.index(nxt) :], nxt]
                elif nxt not in done:
                    path.append(nxt)
                    on_path.add(nxt)
                    stack.append(iter(self.nodes[nxt].direct_successors))
        return None


def describe(graph: QuestionGraph) -> dict[str, Any]:
    """Counts for display: totals, and per depth the nodes, questions and edges arriving there.

    ``edges`` at depth d counts links from depth d-1 nodes (so depth 1 has none); ``shared``
    counts questions used by more than one node.
    """
    by_depth: dict[int, dict[str, int]] = {}
    for d in DEPTHS:
        at = [n for n in graph.nodes.values() if n.depth == d]
        by_depth[d] = {
            "nodes": len(at),
            "questions": len({graph.node_to_q[n.nodeid] for n in at}),
            "edges": sum(len(n.direct_predecessors) for n in at),
        }
    uses = Counter(graph.node_to_q.values())
    return {
        "nodes": len(graph.nodes),
        "questions": len(graph.questions),
        "edges": sum(v["edges"] for v in by_depth.values()),
        "shared": sum(1 for c in uses.values() if c > 1),
        "has_edges": graph.has_edges,
        "by_depth": by_depth,
    }


# -- reading rows --------------------------------------------------------------------------
# Older hub revisions had no node depth and listed neighbours as shallower_nodes/deeper_nodes,
# either flat or keyed by depth ({"1": [...], "2": [...]}, null where empty).
_Levels = list[str] | dict[str, list[str] | None]


class _NodeRow(BaseModel):
    model_config = ConfigDict(strict=True)

    nodeid: Id
    group: str
    depth: Depth | None = None
    direct_predecessors: list[str] | None = None
    direct_successors: list[str] | None = None
    shallower_nodes: _Levels | None = None
    deeper_nodes: _Levels | None = None


class _Link(BaseModel):
    model_config = ConfigDict(strict=True)

    nodeid: Id
    qid: Id


M = TypeVar("M", bound=BaseModel)


def _parse(model: type[M], row: Mapping[str, Any], where: str) -> M:
    # Unknown columns are dropped, not refused: hub rows carry more than the graph keeps
    # (questions' tutoreval_data and augmented).
    known = {k: v for k, v in row.items() if k in model.model_fields}
    try:
        return model.model_validate(known)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'row'}: {e['msg']}" for e in exc.errors()
        )
        raise GraphError(f"{where}: {problems}") from None


def _index(rows: Iterable[tuple[str, M]], key: str, what: str) -> dict[str, M]:
    found: dict[str, M] = {}
    first: dict[str, str] = {}
    for where, row in rows:
        ident = getattr(row, key)
        if ident in found:
            raise GraphError(f"{where}: duplicate {what} {ident!r} (first at {first[ident]})")
        found[ident] = row
        first[ident] = where
    return found


def _levels(
    value: _Levels, depth: int, step: int, field: str, where: str
) -> tuple[list[str], dict[int, list[str]]]:
    """Direct neighbours (depth + step) and, for the keyed form, the farther ones by depth."""
    if isinstance(value, list):
        return value, {}
    direct: list[str] = []
    farther: dict[int, list[str]] = {}
    for key, ids in value.items():
        if not ids:
            continue
        if key not in {str(d) for d in DEPTHS}:
            raise GraphError(f"{where}: {field} has key {key!r}; keys are depths 1-3")
        level = int(key)
        if level == depth + step:
            direct = ids
        elif (level - depth) * step > 1:
            farther[level] = ids
        else:
            raise GraphError(f"{where}: {field} lists depth-{level} nodes for a depth-{depth} node")
    return direct, farther


def _assemble(
    questions: list[tuple[str, DepthQuestion]],
    node_rows: list[tuple[str, _NodeRow]],
    links: list[tuple[str, _Link]],
    source: str,
) -> QuestionGraph:
    by_qid = _index(questions, "qid", "question")
    by_node = _index(links, "nodeid", "node in node_to_q")
    nodes: list[tuple[str, DepthNode]] = []
    # Old-schema entries beyond the adjacent depth: checked against the graph once built.
    farther: list[tuple[str, str, str, int, list[str]]] = []
    for where, row in node_rows:
        depth = row.depth
        if depth is None:
            # Older node rows have no depth: their question's is the node's.
            link = by_node.get(row.nodeid)
            question = by_qid.get(link.qid) if link else None
            if question is None:
                raise GraphError(
                    f"{where}: node {row.nodeid!r} has no depth field and no question in "
                    "node_to_q to take it from"
                )
            depth = question.depth
        lists: list[list[str]] = []
        for new, old, step in (
            ("direct_predecessors", "shallower_nodes", -1),
            ("direct_successors", "deeper_nodes", 1),
        ):
            new_value: list[str] | None = getattr(row, new)
            old_value: _Levels | None = getattr(row, old)
            if new_value is not None:
                lists.append(new_value)
            elif old_value is not None:
                direct, far = _levels(old_value, depth, step, old, where)
                lists.append(direct)
                farther += [(where, row.nodeid, old, lvl, ids) for lvl, ids in far.items()]
            else:
                raise GraphError(f"{where}: node {row.nodeid!r} has no {new} (nor {old})")
        node = DepthNode(
            nodeid=row.nodeid,
            group=row.group,
            depth=depth,
            direct_predecessors=lists[0],
            direct_successors=lists[1],
        )
        nodes.append((where, node))
    graph = QuestionGraph(
        questions=by_qid,
        nodes=_index(nodes, "nodeid", "node"),
        node_to_q={nodeid: link.qid for nodeid, link in by_node.items()},
    )
    try:
        graph.validate()
    except GraphError as exc:
        raise GraphError(f"{source}: {exc}") from None
    for where, nodeid, field, level, ids in farther:
        reach = graph.ancestors(nodeid) if field == "shallower_nodes" else graph.descendants(nodeid)
        for other in ids:
            if other not in reach or graph.nodes[other].depth != level:
                raise GraphError(
                    f"{where}: node {nodeid!r} lists {other!r} in {field} at depth {level}, "
                    "but the direct edges do not reach it there"
                )
    return graph


# -- loading and saving --------------------------------------------------------------------
def _rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    from hpt.tasks.base import DatasetError
    from hpt.tasks.sources import read_jsonl

    try:
        for lineno, row in read_jsonl(path):
            yield f"{path}:{lineno}", row
    except DatasetError as exc:
        raise GraphError(str(exc)) from None


def load_graph_dir(path: str | Path) -> QuestionGraph:
    """The graph in a directory of questions.jsonl, nodes.jsonl and node_to_q.jsonl."""
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise GraphError(f"{directory} is not a directory; {_HOLDS}")
    for name in GRAPH_FILES:
        if not (directory / name).is_file():
            raise GraphError(f"{directory}: {name} is missing; {_HOLDS}")
    return _assemble(
        [(w, _parse(DepthQuestion, r, w)) for w, r in _rows(directory / QUESTIONS_FILE)],
        [(w, _parse(_NodeRow, r, w)) for w, r in _rows(directory / NODES_FILE)],
        [(w, _parse(_Link, r, w)) for w, r in _rows(directory / NODE_TO_Q_FILE)],
        str(directory),
    )


def write_graph_dir(graph: QuestionGraph, path: str | Path) -> None:
    """The three files ``load_graph_dir`` reads, in the hub's field names and a fixed order."""
    graph.validate()
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    order = graph.order()
    qids = sorted(graph.questions, key=lambda q: (graph.questions[q].depth, _id_key(q)))
    files: dict[str, list[dict[str, Any]]] = {
        QUESTIONS_FILE: [graph.questions[q].model_dump() for q in qids],
        NODES_FILE: [graph.nodes[n].model_dump() for n in order],
        NODE_TO_Q_FILE: [{"nodeid": n, "qid": graph.node_to_q[n]} for n in order],
    }
    for name, rows in files.items():
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        (directory / name).write_text(text, encoding="utf-8")


def load_graph_hub(repo: str = HUB_REPO, split: str = HUB_SPLIT) -> QuestionGraph:
    """The graph from the hub's three configs. Blocking: call from a worker thread."""
    from hpt.tasks.base import DatasetError
    from hpt.tasks.sources import load_hub

    rows: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for config in ("questions", "nodes", "node_to_q"):
        try:
            loaded = load_hub(repo, config, split)
        except DatasetError as exc:
            raise DatasetError(
                f"{exc}. The DepthQA question graph needs the hub; without it pass --graph DIR "
                f"({_HOLDS})"
            ) from None
        rows[config] = [(f"{repo} ({config}) row {i}", r) for i, r in enumerate(loaded, 1)]
    return _assemble(
        [(w, _parse(DepthQuestion, r, w)) for w, r in rows["questions"]],
        [(w, _parse(_NodeRow, r, w)) for w, r in rows["nodes"]],
        [(w, _parse(_Link, r, w)) for w, r in rows["node_to_q"]],
        repo,
    )


def load_questions_only(path: str | Path) -> QuestionGraph:
    """A graph without edges from a questions file alone (shared/data's depthqa copy).

    Each question becomes its own node (nodeid and group = qid), so runs can still ask every
    question; ``has_edges`` is False. A directory means its questions.jsonl.
    """
    file = Path(path).expanduser()
    if file.is_dir():
        file = file / QUESTIONS_FILE
    if not file.is_file():
        raise GraphError(f"{file}: no such file; expected DepthQA's questions.jsonl")
    questions = [(w, _parse(DepthQuestion, r, w)) for w, r in _rows(file)]
    nodes = [
        (
            w,
            _NodeRow(
                nodeid=q.qid,
                group=q.qid,
                depth=q.depth,
                direct_predecessors=[],
                direct_successors=[],
            ),
        )
        for w, q in questions
    ]
    links = [(w, _Link(nodeid=q.qid, qid=q.qid)) for w, q in questions]
    return _assemble(questions, nodes, links, str(file))
