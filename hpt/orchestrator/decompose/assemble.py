"""The question graph a build ends with, in the hub's ids: the n-th depth-3 row is group ``n``
with nodes ``n_d3``, ``n_d2_nK``, ``n_d1_nK``; depth-3 questions keep their qid and the
generated ones are numbered ``d2_qN`` and ``d1_qN``."""

from __future__ import annotations

from hpt.orchestrator.decompose.asker import Asker
from hpt.orchestrator.decompose.dedup import Dedup
from hpt.orchestrator.decompose.items import Item
from hpt.tasks.depthqa.graph import DepthNode, DepthQuestion, QuestionGraph


def assemble(
    build: Asker, roots: list[Item], d2: list[Item], new_d2: list[Item], dedup: Dedup
) -> QuestionGraph:
    """The DepthQA graph of what ``build`` made: a tree of nodes per depth-3 question that has
    a reference answer, its kept depth-2 and depth-1 questions (``new_d2``: augmentation's)
    under it, nodes sharing the question their duplicates merged into, and hub-style ids."""
    removed, canonical = dedup.removed, dedup.canonical
    decomposed = {i.id for i in d2}
    added = {i.id for i in new_d2}
    questions: dict[str, DepthQuestion] = {}
    nodes: dict[str, DepthNode] = {}
    node_to_q: dict[str, str] = {}
    qids: dict[str, str] = {}  # question item id -> qid
    taken = {build.sources[r.id].qid for r in roots}
    counters = {1: 0, 2: 0}

    def qid_of(lead: Item, domain: str | None) -> str | None:
        """The question's id, made on first use; None when it has no answer."""
        if lead.id in qids:
            return qids[lead.id]
        answer = build.answer_of(lead)
        if answer is None:
            return None
        if lead.depth == 3:
            qid = build.sources[lead.id].qid
        else:
            while True:
                counters[lead.depth] += 1
                qid = f"d{lead.depth}_q{counters[lead.depth]}"
                if qid not in taken:
                    break
        taken.add(qid)
        qids[lead.id] = qid
        questions[qid] = DepthQuestion(
            qid=qid, depth=lead.depth, domain=domain, question=lead.text, answer=answer
        )
        return qid

    for root in roots:
        g = root.group
        domain = build.sources[root.id].domain
        root_q = qid_of(root, domain)
        if root_q is None:
            continue  # no reference answer: the tree is left out (listed in failures)
        top = DepthNode(nodeid=f"{g}_d3", group=g, depth=3)
        nodes[top.nodeid], node_to_q[top.nodeid] = top, root_q
        d1_nodes: dict[str, DepthNode] = {}  # question item id -> this tree's node
        n2 = 0
        for child in root.children:
            item = build.items[child]
            if child in removed or (child not in decomposed and child not in added):
                continue
            lead = build.items[canonical.get(child, child)]
            q = qid_of(lead, domain)
            if q is None:
                continue
            n2 += 1
            mid = DepthNode(nodeid=f"{g}_d2_n{n2}", group=g, depth=2,
                            direct_successors=[top.nodeid])  # fmt: skip
            top.direct_predecessors.append(mid.nodeid)
            nodes[mid.nodeid], node_to_q[mid.nodeid] = mid, q
            for grandchild in item.children:
                sub = build.items[grandchild]
                if grandchild in removed:
                    continue
                if not sub.augmented and child in decomposed and grandchild not in canonical:
                    continue
                lead1 = build.items[canonical.get(grandchild, grandchild)]
                q1 = qid_of(lead1, domain)
                if q1 is None:
                    continue
                low = d1_nodes.get(lead1.id)
                if low is None:
                    low = DepthNode(nodeid=f"{g}_d1_n{len(d1_nodes) + 1}", group=g, depth=1)
                    d1_nodes[lead1.id] = low
                    nodes[low.nodeid], node_to_q[low.nodeid] = low, q1
                if mid.nodeid not in low.direct_successors:
                    low.direct_successors.append(mid.nodeid)
                    mid.direct_predecessors.append(low.nodeid)
    graph = QuestionGraph(questions=questions, nodes=nodes, node_to_q=node_to_q)
    graph.validate()
    return graph
