"""hpt decompose: building a DepthQA graph against a scripted OpenAI-compatible server.

The server answers by looking at the prompt (tables 20-26) and embeds texts from a table of
vectors, so every step's outcome is known: one invalid JSON reply (retried), one list of five
(cut to four), near-duplicate sub-questions (merged), a depth-2 question that is really a
depth-1 one and a depth-1 question that is really a depth-2 one (removed, then augmented).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import math
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from hpt.backends.embeddings import (
    EmbeddingCache,
    EmbeddingSpecError,
    endpoint_for,
    open_embeddings,
)
from hpt.orchestrator.decompose import (
    REPLIES_FILE,
    STATE_FILE,
    SUMMARY_FILE,
    DecomposeSpec,
    DecomposeSummary,
    Item,
    deduplicate,
    exact_similarity,
    load_depth3,
    parse_questions,
    prepare_out,
    run_decompose,
    vector_similarity,
)
from hpt.orchestrator.models import ModelSettings
from hpt.results.rundir import RunDirError
from hpt.tasks import DatasetError
from hpt.tasks.depthqa.graph import QuestionGraph, load_graph_dir
from tests.servers.openai_compat import FakeOpenAI, ServerThread

GRAM = "What is the intuition behind the Gram-Schmidt procedure?"
EOTVOS = "Why couldn't we test general relativity effects using the Eotvos experiment?"

D2 = {
    GRAM: [
        "How do you project one vector onto another vector?",
        "How can you verify that two vectors are orthogonal?",
        "Describe the process of normalizing a vector.",
    ],
    EOTVOS: [  # five: the fifth is cut
        "How does the Eotvos experiment compare inertial and gravitational mass?",
        "Describe the equivalence principle.",
        "How is time dilation measured?",
        "What is inertial mass?",
        "How is the bending of light observed?",
    ],
}
D1 = {
    "How do you project one vector onto another vector?": [
        "What is a vector?",
        "What is a projection?",
        "How is the dot product defined?",
    ],
    "How can you verify that two vectors are orthogonal?": [
        "What does it mean for vectors to be orthogonal?",
        "What is a dot product?",  # near-duplicate of a question under the first one
    ],
    "Describe the process of normalizing a vector.": [
        "What is the norm of a vector?",
        "What does the norm of a vector measure?",  # near-duplicate sibling
    ],
    "How does the Eotvos experiment compare inertial and gravitational mass?": [
        "What is inertial mass, exactly?",  # makes "What is inertial mass?" a depth-1 question
        "What is gravitational mass?",
    ],
    "Describe the equivalence principle.": [
        "What is a vector?",  # the same question in the other tree
        "What is the equivalence principle about?",
    ],
    "How is time dilation measured?": [
        "What is time dilation?",
        "What is a clock?",  # 0.85 like its depth-2 question: really a depth-2 question
    ],
    "What is inertial mass?": ["What is mass?"],
    "How could one test general relativity directly?": ["What is general relativity?"],
}
AUGMENT_D2 = {EOTVOS: ["How could one test general relativity directly?"]}
AUGMENT_D1 = {
    "Describe the process of normalizing a vector.": ["What is a unit vector?"],
    "How is time dilation measured?": ["What is proper time?"],
}
# text -> (the text it nearly repeats, cosine similarity)
NEAR = {
    "What is a dot product?": ("How is the dot product defined?", 0.95),
    "What does the norm of a vector measure?": ("What is the norm of a vector?", 0.93),
    "What is inertial mass, exactly?": ("What is inertial mass?", 0.95),
    "What is a clock?": ("How is time dilation measured?", 0.85),
}


def _between(text: str, start: str, end: str) -> str:
    match = re.search(
        r"(?m)^" + re.escape(start) + r"\n(.*?)\n\n" + re.escape(end), text, re.DOTALL
    )
    assert match, f"no {start!r} in the prompt"
    return match.group(1)


class Script:
    """Replies by prompt, and vectors by text."""

    def __init__(self) -> None:
        self.asked: dict[str, int] = {}
        self.axes: dict[str, int] = {}

    def reply(self, body: dict[str, Any]) -> str:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if system.startswith("You are an excellent assistant"):  # table 20
            assert "## Question\n" in user and "## Chapter" not in user
            return f"Reference answer to: {_between(user, '## Question', '## Answer')}"
        if system.startswith("You are a helpful assistant"):  # table 21
            return f"Answer to: {user}"
        assert system.startswith("You are an excellent question generator")  # table 22
        if "Create maximum of 4 Depth-2" in user:  # table 23
            question = _between(user, "## Depth-3 question", "## Answer to the Depth-3 question")
            self.asked[question] = self.asked.get(question, 0) + 1
            if question == GRAM and self.asked[question] == 1:
                return 'Sure: {"Depth-2_questions": ["How do you project one vector'  # cut off
            return json.dumps({"Depth-2_questions": D2[question]})
        if "Create maximum of 4 Depth-1" in user:  # table 24
            question = _between(user, "## Depth-2 question", "## Answer to the Depth-2 question")
            # Python-style quotes, as in the prompt's own examples, inside a code fence.
            return "```json\n" + repr({"Depth-1_questions": D1[question]}) + "\n```"
        if "complementary Depth-2 questions" in user:  # table 25
            question = _between(user, "## Depth-3 question", "## Answer to the Depth-3 question")
            assert "Create 1 Depth-2 question(s)" in user
            return json.dumps({"complementary_Depth-2_questions": AUGMENT_D2[question]})
        question = _between(user, "## Depth-2 question", "## Answer to the Depth-2 question")
        assert "complementary Depth-1 questions" in user and "Create 1 Depth-1" in user
        return json.dumps({"complementary_Depth-1_questions": AUGMENT_D1[question]})

    def _axis(self, text: str) -> list[float]:
        vector = [0.0] * 128
        vector[self.axes.setdefault(text, len(self.axes))] = 1.0
        return vector

    def embed(self, text: str) -> list[float]:
        if text not in NEAR:
            return self._axis(text)
        base, similarity = NEAR[text]
        own = self._axis(text)
        return [similarity * b + math.sqrt(1 - similarity**2) * o
                for b, o in zip(self._axis(base), own, strict=True)]  # fmt: skip


@pytest.fixture
def server() -> Iterator[tuple[FakeOpenAI, ServerThread]]:
    script = Script()
    fake = FakeOpenAI(responder=script.reply, embedder=script.embed)
    thread = ServerThread(fake.app()).start()
    yield fake, thread
    thread.stop()


@pytest.fixture
def questions(tmp_path: Path) -> Path:
    rows = [
        {"qid": "d3_q1", "depth": 3, "domain": "Math", "question": GRAM,
         "answer": "It subtracts projections."},
        {"qid": "d2_q9", "depth": 2, "question": "Not a depth-3 question.", "answer": "-"},
        {"qid": "d3_q7", "depth": 3, "domain": "Physics", "question": EOTVOS},
    ]  # fmt: skip
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def spec_for(server: ServerThread, questions: Path, out: Path, **extra: Any) -> DecomposeSpec:
    return DecomposeSpec.model_validate({
        "model": "openai:test-model", "base_url": server.base_url, "questions": questions,
        "out": out, "embedding_model": "embed",
        "models": {"embed": {"provider": "openai", "model": "embed-model",
                             "endpoints": [server.base_url]}},
        **extra,
    })  # fmt: skip


def replies(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / REPLIES_FILE).read_text().splitlines()]


def texts(graph: QuestionGraph, nodeid: str) -> list[str]:
    return [graph.question_of(n).question for n in graph.predecessors(nodeid)]


def check_graph(out: Path) -> QuestionGraph:
    """The graph the script makes, whoever built it."""
    graph = load_graph_dir(out)
    graph.validate()
    by_depth = {d: [q for q in graph.questions.values() if q.depth == d] for d in (1, 2, 3)}
    assert [len(by_depth[d]) for d in (3, 2, 1)] == [2, 7, 12]
    assert sorted(q.qid for q in by_depth[3]) == ["d3_q1", "d3_q7"]  # input ids kept
    assert graph.question_of("2_d3").answer == f"Reference answer to: {EOTVOS}"
    assert graph.question_of("1_d3").answer == "It subtracts projections."
    assert graph.question_of("1_d2_n1").answer.startswith("Answer to: How do you project")
    assert {q.domain for q in by_depth[2]} == {"Math", "Physics"}

    # Tree 1: the dot-product duplicates are one node under both depth-2 questions; the norm
    # duplicates are one, and the question that lost one gained "What is a unit vector?".
    assert texts(graph, "1_d3") == D2[GRAM]
    assert texts(graph, "1_d2_n1") == D1["How do you project one vector onto another vector?"]
    assert texts(graph, "1_d2_n2") == [
        "What does it mean for vectors to be orthogonal?",
        "How is the dot product defined?",  # its "What is a dot product?", merged
    ]
    dot = next(n for n in graph.predecessors("1_d2_n2") if n in graph.predecessors("1_d2_n1"))
    assert graph.successors(dot) == ["1_d2_n1", "1_d2_n2"]
    assert texts(graph, "1_d2_n3") == ["What is the norm of a vector?", "What is a unit vector?"]

    # Tree 2: four depth-2 questions were kept of five; "What is inertial mass?" went (it is
    # depth-1 material) and augmentation replaced it; "What is a clock?" went (depth-2-like)
    # and "What is proper time?" replaced it.
    assert texts(graph, "2_d3") == [
        *D2[EOTVOS][:3],
        "How could one test general relativity directly?",
    ]
    assert texts(graph, "2_d2_n3") == ["What is time dilation?", "What is proper time?"]
    assert texts(graph, "2_d2_n4") == ["What is general relativity?"]
    everything = {q.question for q in graph.questions.values()}
    assert not everything & {"What is inertial mass?", "What is mass?", "What is a clock?",
                             "How is the bending of light observed?"}  # fmt: skip
    # "What is a vector?" is one question used by a node in each tree.
    vector = [n for n in graph.nodes if graph.question_of(n).question == "What is a vector?"]
    assert sorted(n.split("_")[0] for n in vector) == ["1", "2"]
    assert len({graph.node_to_q[n] for n in vector}) == 1
    return graph


def check_summary(summary: DecomposeSummary) -> None:
    assert summary.questions == {"1": 12, "2": 7, "3": 2}
    assert summary.nodes == {"1": 13, "2": 7, "3": 2}
    assert summary.shared_questions == 1
    d = summary.dedup
    assert (d.method, d.embedding_model, d.note) == ("embeddings", "embed", None)
    assert d.thresholds == {"same_depth": 0.9, "d2_like_d1": 0.9, "d1_like_d2": [0.8, 0.9]}
    assert (d.d2_removed_like_d1, d.d2_duplicates_removed, d.d2_shared_across_trees) == (1, 0, 0)
    assert (d.d1_removed_like_d2, d.d1_removed_with_parent) == (1, 1)
    assert (d.d1_merged_in_tree, d.d1_shared_across_trees) == (2, 1)
    assert summary.augmented == {"2": 1, "1": 2}
    g = summary.generation
    assert (g.json_retries, g.json_failures, g.cut_to_max) == (1, 0, 1)
    assert summary.failures == [] and summary.errors == []


# Chat requests of one full build: 1 depth-3 answer, 3 depth-2 generations (one retried),
# 7 depth-2 answers, 7 depth-1 generations, 3 augmentations, 1 answer and 1 generation for
# the new depth-2 question, 12 depth-1 answers.
CALLS = 1 + 3 + 7 + 7 + 3 + 2 + 12


def test_decompose_end_to_end_and_resume(
    server: tuple[FakeOpenAI, ServerThread], questions: Path, tmp_path: Path,
    _private_cache: Path,
) -> None:  # fmt: skip
    fake, thread = server
    out = tmp_path / "graph"
    summary = asyncio.run(run_decompose(spec_for(thread, questions, out)))
    check_summary(summary)
    assert summary.calls.model_requests == CALLS == len(fake.requests)
    assert summary.calls.embedding_requests == 1 == len(fake.embedding_requests)
    # 7 depth-2 and 14 depth-1 questions, "What is a vector?" twice: each text once
    assert len(fake.embedding_requests[0]["input"]) == 20
    assert fake.embedding_requests[0]["model"] == "embed-model"
    check_graph(out)
    saved = json.loads((out / SUMMARY_FILE).read_text())
    assert DecomposeSummary.model_validate(saved) == summary
    # Every reply beside its verdict: the cut-off JSON, its retry, the list of five (read
    # whole, then cut to four), and the answers taken.
    kept = replies(out)
    assert len(kept) == CALLS
    first, retry = [r for r in kept if (r["prompt"], r["item"]) == ("d2_questions", "1")]
    assert (first["attempt"], first["question"], first["parsed"]) == (1, GRAM, None)
    assert first["error"] == "no JSON object in the reply"
    assert first["reply"].startswith('Sure: {"Depth-2_questions": ["How do you project')
    assert (retry["attempt"], retry["parsed"], retry["error"]) == (2, D2[GRAM], None)
    [five] = [r for r in kept if (r["prompt"], r["item"]) == ("d2_questions", "2")]
    assert five["parsed"] == D2[EOTVOS] and json.loads(five["reply"]) == {
        "Depth-2_questions": D2[EOTVOS]}  # fmt: skip
    [d3] = [r for r in kept if r["prompt"] == "d3_answer"]
    assert d3["item"] == "2" and d3["parsed"] == d3["reply"] == f"Reference answer to: {EOTVOS}"
    assert {r["prompt"] for r in kept} == {"d3_answer", "answer", "d2_questions",
                                           "d1_questions", "d2_augment", "d1_augment"}  # fmt: skip

    # A finished folder is refused without --resume; with it nothing is asked again.
    with pytest.raises(RunDirError, match="--resume"):
        asyncio.run(run_decompose(spec_for(thread, questions, out)))
    again = asyncio.run(run_decompose(spec_for(thread, questions, out, resume=True)))
    assert again.calls.model_requests == 0 and again.calls.embedding_requests == 0
    assert (len(fake.requests), len(fake.embedding_requests)) == (CALLS, 1)

    # Interrupted: the graph and summary never written, half the checkpoint lost. The rest of
    # the checkpoint and the response cache answer everything.
    state = (out / STATE_FILE).read_text().splitlines()
    (out / STATE_FILE).write_text("\n".join(state[: len(state) // 2]) + '\n{"step": "ans')
    for name in ("questions.jsonl", "nodes.jsonl", "node_to_q.jsonl", SUMMARY_FILE):
        (out / name).unlink()
    resumed = asyncio.run(run_decompose(spec_for(thread, questions, out)))
    assert resumed.calls.model_requests == 0 and resumed.calls.cache_hits > 0
    assert (len(fake.requests), len(fake.embedding_requests)) == (CALLS, 1)
    check_graph(out)
    assert replies(out) == kept  # replies read again from the cache are not written twice

    # The caches gone (another machine, --no-cache): the checkpoint alone is enough.
    shutil.rmtree(_private_cache)
    (out / SUMMARY_FILE).unlink()
    alone = asyncio.run(run_decompose(spec_for(thread, questions, out, cache=False)))
    assert alone.calls.model_requests == alone.calls.cache_hits == 0
    assert alone.calls.steps_from_checkpoint > CALLS - 10
    assert (len(fake.requests), len(fake.embedding_requests)) == (CALLS, 1)
    check_summary(alone)
    check_graph(out)

    # Another model on the same folder would mix answers: refused.
    (out / SUMMARY_FILE).unlink()
    with pytest.raises(RunDirError, match="built with model"):
        asyncio.run(run_decompose(spec_for(thread, questions, out, params={"temperature": 0})))


def test_limit_takes_the_first_questions(
    server: tuple[FakeOpenAI, ServerThread], questions: Path, tmp_path: Path
) -> None:
    fake, thread = server
    out = tmp_path / "one"
    summary = asyncio.run(run_decompose(spec_for(thread, questions, out, limit=1)))
    graph = load_graph_dir(out)
    assert {n.group for n in graph.nodes.values()} == {"1"}
    assert summary.questions == {"1": 6, "2": 3, "3": 1}
    # Then the second question too, in the same folder: only its steps call the model.
    before = len(fake.requests)
    asyncio.run(run_decompose(spec_for(thread, questions, out, resume=True)))
    check_graph(out)
    assert 0 < len(fake.requests) - before < CALLS


def test_invalid_json_every_time_leaves_the_node_without_children(
    server: tuple[FakeOpenAI, ServerThread], questions: Path, tmp_path: Path
) -> None:
    fake, thread = server
    script_reply = fake.responder

    def stubborn(body: dict[str, Any]) -> str:
        user = body["messages"][-1]["content"]
        if "Create maximum of 4 Depth-2" in user and GRAM in user:
            return '{"Depth-2_questions": "not a list"}'
        return script_reply(body)

    fake.responder = stubborn
    out = tmp_path / "graph"
    summary = asyncio.run(run_decompose(spec_for(thread, questions, out)))
    graph = load_graph_dir(out)
    assert graph.predecessors("1_d3") == [] and graph.question_of("1_d3").question == GRAM
    assert len(graph.predecessors("2_d3")) == 4
    assert summary.generation.json_failures == 1 and summary.generation.json_retries == 2
    [failure] = summary.failures
    assert (failure.item, failure.step) == ("1", "d2_questions")
    assert "not a non-empty list" in failure.problem
    # Why: each of the three replies, as the model wrote it, beside what was wrong with it.
    tries = [r for r in replies(out) if (r["prompt"], r["item"]) == ("d2_questions", "1")]
    assert [r["attempt"] for r in tries] == [1, 2, 3]
    for r in tries:
        assert r["reply"] == '{"Depth-2_questions": "not a list"}' and r["parsed"] is None
        assert r["error"] == failure.problem and r["question"] == GRAM


def test_a_failed_call_is_reported_and_retried_on_resume(
    server: tuple[FakeOpenAI, ServerThread], questions: Path, tmp_path: Path
) -> None:
    fake, thread = server
    script_reply = fake.responder
    broken = {"on": True}

    def flaky(body: dict[str, Any]) -> str:
        if (
            broken["on"]
            and body["messages"][-1]["content"] == "Describe the equivalence principle."
        ):
            raise RuntimeError("the server breaks (HTTP 500)")
        return script_reply(body)

    fake.responder = flaky
    out = tmp_path / "graph"
    spec = spec_for(thread, questions, out, retry={"max_attempts": 1})
    summary = asyncio.run(run_decompose(spec))
    [error] = summary.errors
    assert error.startswith("answer of 2.2:") and "500" in error
    [failed] = [r for r in replies(out) if r["item"] == "2.2"]
    assert failed["prompt"] == "answer" and failed["reply"] is None and failed["parsed"] is None
    assert failed["error"].startswith("the call failed:") and "500" in failed["error"]
    graph = load_graph_dir(out)  # written, valid, without the unanswered question
    assert "Describe the equivalence principle." not in texts(graph, "2_d3")
    assert summary.questions["2"] == 6

    broken["on"] = False
    asyncio.run(run_decompose(spec.model_copy(update={"resume": True})))
    check_graph(out)


def test_d3_answer_prompt_uses_tutoreval_context() -> None:
    from hpt.orchestrator.decompose import PROMPTS, SourceQuestion, d3_answer_messages
    from hpt.prompts import PromptSet

    prompts = PromptSet.load(PROMPTS)
    full = SourceQuestion(qid="q", question="Why?", chapter="Text.", key_points=["a", "b"],
                          explanation="Needs analysis.")  # fmt: skip
    system, user = (m.content for m in d3_answer_messages(prompts, full))
    assert system.startswith("You are an excellent assistant") and "given a passage" in system
    assert user.startswith("## Chapter\nText.\n\n## Instruction")
    assert "## Key points to answer the question\n- a\n- b\n" in user
    assert "## Complexity of the question\nNeeds analysis.\n\n## Answer" in user
    plain = d3_answer_messages(prompts, SourceQuestion(qid="q", question="Why?"))
    assert "passage" not in plain[0].content and "Chapter" not in plain[1].content
    assert plain[1].content.endswith("## Question\nWhy?\n\n## Answer")


def test_cli_default_temperature_is_the_papers() -> None:
    from hpt.cli.decompose import DEFAULT_TEMPERATURE as shown
    from hpt.orchestrator.decompose import DEFAULT_TEMPERATURE

    assert shown == DEFAULT_TEMPERATURE == 0.7
    spec = DecomposeSpec.model_validate({"model": "local", "questions": "q", "out": "o",
                                         "params": {"max_tokens": 5}})  # fmt: skip
    assert (spec.params.temperature, spec.params.max_tokens) == (0.7, 5)


def test_cli_without_embeddings_merges_exact_text_only(
    server: tuple[FakeOpenAI, ServerThread], questions: Path, tmp_path: Path
) -> None:
    from hpt.cli import decompose as cli

    fake, thread = server
    parser = argparse.ArgumentParser(prog="hpt")
    cli.add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "exact"
    args = parser.parse_args(["decompose", "--questions", str(questions), "--model",
                              "openai:test-model", "--base-url", thread.base_url,
                              "--out", str(out), "--max-tokens", "300"])  # fmt: skip
    shown = io.StringIO()
    assert cli.command(args, Console(file=shown, width=200)) == 0
    text = shown.getvalue()
    assert "exact text" in text and "no --embedding-model" in text
    assert "1 retries" in text and "1 lists cut to 4" in text
    summary = DecomposeSummary.model_validate_json((out / SUMMARY_FILE).read_text())
    assert summary.dedup.method == "exact-text" and summary.dedup.note
    # Only the identical "What is a vector?" merged; near-duplicates were kept.
    assert summary.dedup.d1_shared_across_trees == 1
    assert summary.dedup.d1_merged_in_tree == summary.dedup.d2_removed_like_d1 == 0
    assert summary.augmented == {"2": 0, "1": 0}
    assert fake.embedding_requests == []
    assert all(r["max_tokens"] == 300 and r["temperature"] == 0.7 for r in fake.requests)
    load_graph_dir(out).validate()


def test_hpt_decompose_command(
    server: tuple[FakeOpenAI, ServerThread], questions: Path, tmp_path: Path
) -> None:
    from tests.test_cli import hpt

    fake, thread = server
    config = tmp_path / "hpt.toml"
    config.write_text(
        f'[models.embed]\nprovider = "openai"\nmodel = "embed-model"\n'
        f'endpoints = ["{thread.base_url}"]\n'
    )
    out = tmp_path / "graph"
    args = ["decompose", "--questions", str(questions), "--model", "openai:test-model",
            "--base-url", thread.base_url, "--embedding-model", "embed", "--config", str(config),
            "--out", str(out)]  # fmt: skip
    result = hpt(*args)
    assert result.returncode == 0, result.stderr
    check_graph(out)
    check_summary(DecomposeSummary.model_validate_json((out / SUMMARY_FILE).read_text()))
    assert len(fake.requests) == CALLS and len(fake.embedding_requests) == 1
    refused = hpt(*args)
    assert refused.returncode == 2 and "--resume" in refused.stderr
    again = hpt(*args, "--resume")
    assert again.returncode == 0, again.stderr
    assert len(fake.requests) == CALLS and "0 to the model" in again.stdout
    assert f"every reply and what was read from it: {out / REPLIES_FILE}\n" in result.stdout


# -- pieces ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"Depth-2_questions": ["A?", "B?"]}', ["A?", "B?"]),
        ("```json\n{'Depth-2_questions': ['A?']}\n```", ["A?"]),
        ('Here: {"Depth-2_questions": [" A? ", "B?"]} hope it helps', ["A?", "B?"]),
        ('{"Depth-2_questions": []}', "not a non-empty list"),
        ('{"Depth-2_questions": ["A?", ""]}', "not a non-empty list"),
        ('{"Depth-2_questions": ["A?", 3]}', "not a non-empty list"),
        ('{"questions": ["A?"]}', "no 'Depth-2_questions'"),
        ('["A?"]', "no JSON object"),
        ('{"Depth-2_questions": ["A?"', "no JSON object"),
        ('{"Depth-2_questions": ["A?"}', "not valid JSON"),
    ],
)  # fmt: skip
def test_parse_questions(reply: str, expected: list[str] | str) -> None:
    got = parse_questions(reply, ["Depth-2_questions"])
    if isinstance(expected, list):
        assert got == expected
    else:
        assert isinstance(got, str) and expected in got


def _items(depth: int, specs: list[tuple[str, str, str | None]]) -> list[Item]:
    return [Item(id=i, group=i.split(".")[0], depth=depth, text=t, parent=p) for i, t, p in specs]


def test_deduplicate_rules() -> None:
    d2 = _items(2, [("1.1", "P", "1"), ("1.2", "P'", "1"), ("1.3", "R", "1"),
                    ("2.1", "P''", "2"), ("2.2", "S", "2"), ("2.3", "T", "2")])  # fmt: skip
    d1 = _items(1, [("1.1.1", "a", "1.1"), ("1.1.2", "b", "1.1"), ("1.2.1", "c", "1.2"),
                    ("1.3.1", "a'", "1.3"), ("1.3.2", "r", "1.3"), ("2.1.1", "a''", "2.1"),
                    ("2.2.1", "s", "2.2"), ("2.3.1", "t", "2.3")])  # fmt: skip
    # unit vectors in a plane per family: P, P', P'' alike; a, a', a'' alike; s 0.95 like S
    # (S is depth-1 material); r 0.85 like R (r is depth-2 material)
    angle = {"P": 0.0, "P'": 0.2, "P''": 0.25, "a": 0.0, "a'": 0.3, "a''": 0.1,
             "S": 0.0, "s": math.acos(0.95), "R": 0.0, "r": math.acos(0.85)}  # fmt: skip
    family = {"P": 0, "P'": 0, "P''": 0, "a": 2, "a'": 2, "a''": 2, "S": 4, "s": 4, "R": 6,
              "r": 6, "b": 8, "c": 10, "T": 12, "t": 14}  # fmt: skip
    vectors = {}
    for item in [*d2, *d1]:
        v = np.zeros(16, dtype=np.float32)
        f, a = family[item.text], angle.get(item.text, 0.0)
        v[f], v[f + 1] = math.cos(a), math.sin(a)
        vectors[item.id] = v
    result = deduplicate(d2, d1, vector_similarity(vectors))
    assert result.removed == {
        "2.2": "d2 like d1",  # S ~ s at 0.95
        "2.2.1": "parent removed",
        "1.2": "duplicate",  # P' repeats its sibling P (cos 0.98)
        "1.2.1": "parent removed",
        "1.3.2": "d1 like d2",  # r ~ R at 0.85
    }
    assert result.canonical["1.1"] == "1.1" and result.canonical["2.1"] == "1.1"  # shared
    assert result.canonical["1.3.1"] == "1.1.1"  # same tree: one node, two successors
    assert result.canonical["2.1.1"] == "1.1.1"  # other tree: one question
    assert result.canonical["1.1.2"] == "1.1.2" and result.canonical["2.3.1"] == "2.3.1"

    exact = deduplicate(d2, _items(1, [("1.1.1", "What is X?", "1.1"),
                                       ("2.1.1", "what is  x", "2.1")]), exact_similarity)  # fmt: skip
    assert exact.removed == {} and exact.canonical["2.1.1"] == "1.1.1"


def test_load_depth3(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"qid": "a", "question": "A?"}\n{"qid": "b", "question": "B?"}\n')
    assert [(n, s.qid) for n, s in load_depth3(path)] == [(1, "a"), (2, "b")]  # no depth: all
    assert [s.qid for _, s in load_depth3(path, limit=1)] == ["a"]
    path.write_text('{"qid": "a", "question": "A?", "depth": 2}\n')
    with pytest.raises(DatasetError, match="no depth-3 rows"):
        load_depth3(path)
    path.write_text('{"qid": "a", "question": "A?"}\n{"qid": "a", "question": "B?"}\n')
    with pytest.raises(DatasetError, match="duplicate qid 'a'"):
        load_depth3(path)
    path.write_text('{"qid": "a", "question": "  "}\n')
    with pytest.raises(DatasetError, match=r"q\.jsonl:1: question"):
        load_depth3(path)
    with pytest.raises(DatasetError, match="no such file"):
        load_depth3(tmp_path / "missing.jsonl")


def test_prepare_out(tmp_path: Path) -> None:
    assert prepare_out(tmp_path / "new", resume=False) == "new"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x").write_text("")
    with pytest.raises(RunDirError, match="not a decompose folder"):
        prepare_out(tmp_path / "other", resume=True)
    (tmp_path / "other" / STATE_FILE).write_text("")
    assert prepare_out(tmp_path / "other", resume=False) == "continue"
    (tmp_path / "other" / SUMMARY_FILE).write_text("{}")
    with pytest.raises(RunDirError, match="finished graph"):
        prepare_out(tmp_path / "other", resume=False)
    assert prepare_out(tmp_path / "other", resume=True) == "resume"


def test_embeddings_client_caches_on_disk(
    server: tuple[FakeOpenAI, ServerThread], tmp_path: Path
) -> None:
    fake, thread = server
    settings = ModelSettings.model_validate(
        {"models": {"e": {"provider": "openai", "model": "m", "endpoints": [thread.base_url]}}}
    )
    config = settings.resolve("e").config
    path = tmp_path / "emb.sqlite3"

    async def embed(items: list[str]) -> np.ndarray:
        async with open_embeddings(config, label="e", cache_path=path) as client:
            client._batch = 2  # several requests
            return await client.embed(items)

    first = asyncio.run(embed(["x", "y", "x", "z"]))
    assert first.shape == (4, 128) and np.allclose(np.linalg.norm(first, axis=1), 1.0)
    assert np.allclose(first[0], first[2])
    assert [r["input"] for r in fake.embedding_requests] == [["x", "y"], ["z"]]
    second = asyncio.run(embed(["z", "x", "w"]))
    assert fake.embedding_requests[-1]["input"] == ["w"]  # only the new text
    assert np.allclose(second[0], first[3]) and np.allclose(second[1], first[0])
    assert EmbeddingCache(path).key("u|m", "x") != EmbeddingCache(path).key("u|m2", "x")


def test_embedding_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = ModelSettings()
    point = endpoint_for(settings.resolve("tgi:http://tei:8080").config)
    assert point.url == "http://tei:8080/v1/embeddings" and point.model is None
    monkeypatch.setenv("OPENAI_BASE_URL", "http://vllm:8000/v1/")
    point = endpoint_for(settings.resolve("openai:bge").config)
    assert (point.url, point.model, point.key) == ("http://vllm:8000/v1/embeddings", "bge",
                                                   "test-key")  # fmt: skip
    local = endpoint_for(settings.resolve("local").config)  # its server starts on demand
    assert local.url == "" and (local.stable_name or "").startswith("llama.cpp:")
    with pytest.raises(EmbeddingSpecError, match="OpenAI-compatible"):
        endpoint_for(settings.resolve("anthropic:claude-x").config)
