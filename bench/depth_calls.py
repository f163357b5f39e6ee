"""Model calls per node for each DepthQA inference mode, against the fewest possible.

A synthetic graph shaped like DepthQA's (each depth-3 question with a few depth-2
predecessors, each with a few depth-1 predecessors, some shared between trees and some
nodes sharing one question) is run one mode at a time, with no response cache, against a
local OpenAI-compatible server that records every request. "Fewest possible" is the number of
distinct answering prompts the mode needs (a repeated prompt would be a wasted call); the
naive count is what asking every node's prompts afresh would cost (the reference code's way:
prompt-pred asks each predecessor again for each successor, multi-turn replays each
conversation).

    .venv/bin/python bench/depth_calls.py [--trees 20] [--fan 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.orchestrator import RunSpec, run_evaluation  # noqa: E402
from tests.servers.openai_compat import FakeOpenAI, ServerThread  # noqa: E402

MODES = ("zero-shot", "prompt-gold", "prompt-pred", "multi-turn")


def build_graph(folder: Path, trees: int, fan: int, seed: int = 0) -> dict[str, list[str]]:
    """Write a graph directory; return each node's predecessors."""
    rng = random.Random(seed)
    questions: dict[str, tuple[int, str]] = {}
    preds: dict[str, list[str]] = {}
    depth: dict[str, int] = {}
    d1_pool: list[str] = []
    for t in range(trees):
        top = f"{t}_d3"
        questions[f"q{top}"] = (3, f"Deep question {t}?")
        depth[top], preds[top] = 3, []
        for i in range(fan):
            mid = f"{t}_d2_n{i}"
            questions[f"q{mid}"] = (2, f"Middle question {t}.{i}?")
            depth[mid], preds[mid] = 2, []
            preds[top].append(mid)
            for j in range(fan):
                if d1_pool and rng.random() < 0.2:  # shared with an earlier tree
                    leaf = rng.choice(d1_pool)
                else:
                    leaf = f"{t}_d1_n{i}_{j}"
                    # one leaf in ten repeats another leaf's question (two nodes, one qid)
                    text = f"Basic question {t}.{i}.{j}?"
                    if d1_pool and rng.random() < 0.1:
                        text = questions[f"q{rng.choice(d1_pool)}"][1]
                    questions[f"q{leaf}"] = (1, text)
                    depth[leaf], preds[leaf] = 1, []
                    d1_pool.append(leaf)
                if leaf not in preds[mid]:
                    preds[mid].append(leaf)
    # nodes sharing a question text share one qid
    qid_of_text: dict[str, str] = {}
    node_to_q = {}
    for node in depth:
        _, text = questions[f"q{node}"]
        node_to_q[node] = qid_of_text.setdefault(text, f"q{node}")
    succs: dict[str, list[str]] = {n: [] for n in depth}
    for node, ps in preds.items():
        for p in ps:
            succs[p].append(node)
    folder.mkdir(parents=True, exist_ok=True)
    used = set(node_to_q.values())
    rows = [{"qid": q, "depth": questions[q][0], "domain": None, "question": questions[q][1],
             "answer": f"reference {q}"} for q in sorted(used)]  # fmt: skip
    (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    nodes = [
        {"nodeid": n, "group": n.split("_")[0], "depth": depth[n],
         "direct_predecessors": preds[n], "direct_successors": succs[n]}
        for n in depth
    ]  # fmt: skip
    (folder / "nodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in nodes))
    links = [{"nodeid": n, "qid": q} for n, q in node_to_q.items()]
    (folder / "node_to_q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in links))
    return preds


def naive(mode: str, preds: dict[str, list[str]]) -> int:
    """Calls when every node asks everything its prompt needs afresh."""
    if mode in ("zero-shot", "prompt-gold"):
        return len(preds)
    if mode == "prompt-pred":
        return sum(1 + len(ps) for ps in preds.values())
    return sum(1 + len(ps) for ps in preds.values())  # multi-turn: every turn, every node


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", type=int, default=20)
    ap.add_argument("--fan", type=int, default=3)
    args = ap.parse_args()
    answers: list[str] = []

    def respond(body: dict[str, Any]) -> str:
        if body["messages"][0]["content"].startswith("You are a fair judge"):
            return "Feedback: ok [RESULT] 4"
        answers.append(json.dumps(body["messages"]))
        return "an answer"

    fake = FakeOpenAI(respond, record_requests=False)
    server = ServerThread(fake.app()).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            graph = Path(tmp) / "graph"
            preds = build_graph(graph, args.trees, args.fan)
            nodes = len(preds)
            print(f"graph: {nodes} nodes ({args.trees} depth-3 trees, fan {args.fan})")
            print(f"{'mode':<12} {'calls':>6} {'distinct':>8} {'per node':>8} {'naive':>6}")
            for mode in MODES:
                answers.clear()
                spec = RunSpec.model_validate({
                    "dataset": "depthqa", "model": "openai:test-model",
                    "base_url": server.base_url, "graph": graph, "depth_mode": mode,
                    "cache": False, "concurrency": 32, "out": Path(tmp) / mode,
                })  # fmt: skip
                await run_evaluation(spec)
                print(f"{mode:<12} {len(answers):>6} {len(set(answers)):>8} "
                      f"{len(answers) / nodes:>8.2f} {naive(mode, preds):>6}")  # fmt: skip
    finally:
        server.stop()


if __name__ == "__main__":
    import os

    os.environ["OPENAI_API_KEY"] = "test-key"  # what the local server accepts
    asyncio.run(main())
