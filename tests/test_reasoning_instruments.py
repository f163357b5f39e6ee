"""The models that read other models' answers, when they are reasoning models themselves:
DepthQA's judge, the answer extractor (--extractor-model), adaptive HPF's prompt-selector and
DSPy's adapter. Each reads its model's answer, never its thinking, through the path a run
takes (a scripted loopback server, the OpenAI backend, ManagedBackend's inline ``<think>``
split), and a reply cut off at the token limit gives no reading."""

from __future__ import annotations

import asyncio
import importlib
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hpt.orchestrator import RunSpec, run_evaluation
from hpt.orchestrator.runner import RunResult
from tests.backend_helpers import serving
from tests.test_depthqa_runs import _depth_of_question, write_graph
from tests.test_reasoning_readers import (
    Reply,
    chosen,
    reasoner,
    reasoning_app,
    records,
    sample_of,
    thought,
)


def evaluate(out: Path, url: str, **spec: Any) -> RunResult:
    """A run on the scripted reasoning model ("reasoner" in every role that is not set)."""
    run_spec = RunSpec.model_validate({
        "model": "reasoner", "models": {"reasoner": reasoner(url)}, "out": out,
        "cache": False, **spec,
    })  # fmt: skip
    return asyncio.run(run_evaluation(run_spec))


# -- DepthQA's judge ------------------------------------------------------------------------------

JUDGE = "You are a fair judge"


def test_the_depthqa_judge_is_read_by_its_answer_not_its_thinking(tmp_path: Path) -> None:
    """The judge's ``[RESULT]`` is searched in its answer: thinking "[RESULT] 1", answering
    "[RESULT] 5" scores 5, and the reverse 1; a judge cut off while thinking (its thinking
    "[RESULT] 5") gave no score and is asked again. The judge is shown the evaluated model's
    answer, not its thinking."""
    judged: list[str] = []

    def script(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if not messages[0]["content"].startswith(JUDGE):
            depth = _depth_of_question(messages[-1]["content"])
            return Reply(f"<think>Maybe the response should say SECRET-{depth}.</think>"
                         f"answer at depth {depth}")  # fmt: skip
        user = messages[-1]["content"]
        judged.append(user)
        depth = int(user.split("answer at depth ")[1][0])
        if depth == 1:
            return Reply("<think>Feedback: wrong. [RESULT] 1</think>Feedback: good. [RESULT] 5")
        if depth == 3:
            return Reply("<think>Feedback: good. [RESULT] 5</think>Feedback: wrong. [RESULT] 1")
        if body["temperature"] == 0.0:  # the first try, cut off while thinking
            return Reply("<think>Feedback: fine. [RESULT] 5, or is it", cut=True)
        return Reply("<think>[RESULT] 5?</think>Feedback: partly right. [RESULT] 3")

    graph = write_graph(tmp_path / "graph")
    with serving(reasoning_app(script)) as server:
        evaluate(tmp_path / "run", server.base_url, dataset="depthqa", strategies=["role"],
                 task_args={"depthqa": {"graph": str(graph)}})  # fmt: skip
    recs = records(tmp_path / "run")
    assert judged and not any("SECRET" in prompt for prompt in judged)
    scores = {r["depth"]: r["judge_score"] for r in recs}
    assert scores == {1: 5, 2: 3, 3: 1}
    for r in recs:
        judge_calls = [c for c in r["attempts"][0]["calls"] if c["purpose"] == "judge"]
        assert all(c["reasoning"] for c in judge_calls)
        if r["depth"] == 2:
            cut, again = judge_calls
            assert (cut["finish_reason"], cut["completion"]) == ("length", "")
            assert again["params"]["temperature"] == 1.0 and again["finish_reason"] == "stop"
            assert r["judge_replies"] == ["", "Feedback: partly right. [RESULT] 3"]
        else:
            assert len(judge_calls) == 1
            assert "[RESULT]" not in r["feedback"]


def test_a_depthqa_answer_cut_off_scores_by_rule_without_a_judge(tmp_path: Path) -> None:
    """An answer cut off at the token limit resolves nothing, whatever a judge would say:
    like an empty one, it scores the rubric's lowest by rule and no judge is asked."""
    judged: list[str] = []

    def script(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if messages[0]["content"].startswith(JUDGE):
            judged.append(messages[-1]["content"])
            return Reply("Feedback: right. [RESULT] 5")
        depth = _depth_of_question(messages[-1]["content"])
        return Reply(f"<think>Short.</think>answer at depth {depth}, and", cut=depth == 2)

    graph = write_graph(tmp_path / "graph")
    with serving(reasoning_app(script)) as server:
        evaluate(tmp_path / "run", server.base_url, dataset="depthqa", strategies=["role"],
                 task_args={"depthqa": {"graph": str(graph)}})  # fmt: skip
    recs = {r["depth"]: r for r in records(tmp_path / "run")}
    assert {d: r["judge_score"] for d, r in recs.items()} == {1: 5, 2: 1, 3: 5}
    [cut] = recs[2]["attempts"]
    assert (cut["truncated"], cut["resolved"]) == ("answer", False)
    assert "score 1/5 by rule (the judge was not asked)" in cut["detail"]
    assert not any("answer at depth 2" in prompt for prompt in judged)


# -- the answer extractor -----------------------------------------------------------------------

ASKED = "What final answer does the response give?"


def test_a_reasoning_extractor_is_read_by_its_answer(data_dir: Path, tmp_path: Path) -> None:
    """--extractor-model on a reasoning model: its answer decides (not a number it thought
    about), "none" after thinking of the right number is no answer, and an extractor cut off
    at the token limit, while thinking or inside its short answer ("4" of "48"), gives no
    reading. The extractor is shown the evaluated model's answer, not its thinking."""
    _, samples = chosen("gsm8k", data_dir, 4)
    case_of = dict(zip((s.id for s in samples), ("forward", "reverse", "cut_thinking",
                                                  "cut_answer"), strict=True))  # fmt: skip
    shown: list[str] = []

    def script(body: dict[str, Any]) -> Reply:
        prompt = body["messages"][-1]["content"]
        sample = sample_of(body, samples)
        right, wrong = sample.target, str(int(sample.target) + 7)
        if ASKED not in prompt:  # the evaluated model: no number the rule reader can read
            return Reply(f"<think>SECRET {wrong}</think>Hmm, I cannot settle it.")
        shown.append(prompt)
        case = case_of[sample.id]
        if case == "forward":
            return Reply(f"<think>{thought(wrong)}</think>{right}")
        if case == "reverse":
            return Reply(f"<think>{thought(right)}</think>none")
        if case == "cut_thinking":
            return Reply(f"<think>It commits to {right} because", cut=True)
        return Reply(f"<think>{thought(wrong)}</think>{right[:1]}", cut=True)

    with serving(reasoning_app(script)) as server:
        evaluate(tmp_path / "run", server.base_url, dataset="gsm8k", data_dir=data_dir,
                 limit=4, strategies=["role"], extractor_model="reasoner")  # fmt: skip
    assert len(shown) == 4 and not any("SECRET" in prompt for prompt in shown)
    expected = {
        "forward": (True, "target", None),
        "reverse": (False, None, "the extractor found no answer"),
        "cut_thinking": (False, None, "the extractor was cut off at the token limit while "
                                      "thinking"),
        "cut_answer": (False, None, "the extractor was cut off at the token limit inside its "
                                    "answer"),
    }  # fmt: skip
    for r in records(tmp_path / "run"):
        [attempt] = r["attempts"]
        resolved, parsed, detail = expected[case_of[r["sample_id"]]]
        assert attempt["resolved"] is resolved, attempt["detail"]
        assert attempt["parsed"] == (r["target"] if parsed == "target" else None)
        assert attempt["detail"] == detail
        assert attempt["alternatives"]["rule"] == {"parsed": None, "resolved": False}
        extract = attempt["calls"][-1]
        assert extract["purpose"] == "extract" and extract["reasoning"]


# -- adaptive HPF's prompt-selector -------------------------------------------------------------

SELECT = "Select only the index"


def _selector_run(data_dir: Path, tmp_path: Path) -> tuple[RunResult, list[dict[str, Any]]]:
    """Two GSM8K climbs; every strategy answers right after thinking a wrong number. The first
    sample's selector thinks of levels three, four and five in words and answers "Level 2";
    the second's is first cut off while thinking "level 3 is the best", then answers
    "Level 1"."""
    _, samples = chosen("gsm8k", data_dir, 2)
    turns: Counter[str] = Counter()

    def script(body: dict[str, Any]) -> Reply:
        sample = sample_of(body, samples)
        if SELECT not in body["messages"][-1]["content"]:
            right, wrong = sample.target, str(int(sample.target) + 7)
            return Reply(f"<think>{thought(f'So the answer is {wrong}.')}</think>**{right}**")
        turns[sample.id] += 1
        if sample.id == samples[0].id:
            return Reply("<think>Level three could work; no, level four, or even the fifth "
                         "one.</think>Level 2")  # fmt: skip
        if turns[sample.id] == 1:
            return Reply("<think>I think level 3 is the best because", cut=True)
        return Reply("<think>Not three after all.</think>Level 1")

    with serving(reasoning_app(script)) as server:
        result = evaluate(tmp_path / "run", server.base_url, dataset="gsm8k", data_dir=data_dir,
                          limit=2, mode="adaptive")  # fmt: skip
    by_id = {r["sample_id"]: r for r in records(tmp_path / "run")}
    return result, [by_id[s.id] for s in samples]


def test_the_selector_is_read_by_its_answer_and_a_cut_off_turn_names_no_level(
    data_dir: Path, tmp_path: Path
) -> None:
    """A selector whose thinking names levels in words but whose answer names one picks that
    one. A selector cut off while thinking named no level: the level it only thought about
    (3) is not taken. The turn costs its iteration, as any turn that names no valid level
    (the selector was asked, within the run's token budget), and the climb asks again; its
    call keeps the thinking and the finish reason."""
    _, (first, second) = _selector_run(data_dir, tmp_path)
    [turn] = first["selections"]
    assert (turn["level"], turn["answer"]) == (2, "Level 2")
    assert "level four" in turn["call"]["reasoning"]
    assert (first["resolved_level"], first["iteration"], first["hpi_score"]) == (2, 1, 3.0)

    cut, chose = second["selections"]
    assert (cut["level"], cut["answer"]) == (None, "")
    assert cut["call"]["finish_reason"] == "length" and "level 3" in cut["call"]["reasoning"]
    assert chose["level"] == 1
    assert [a["level"] for a in second["attempts"]] == [1]
    assert (second["resolved_level"], second["iteration"], second["hpi_score"]) == (1, 2, 3.0)


def test_a_selector_cut_off_while_thinking_did_not_hallucinate(
    data_dir: Path, tmp_path: Path
) -> None:
    """A hallucination is a selector naming what is no level (HPT appendix E); a selector cut
    off while thinking named nothing: its turn is truncated, and the hallucination rate,
    which measures the selector's choices, does not count it (the run's --max-tokens does)."""
    result, _ = _selector_run(data_dir, tmp_path)
    assert result.summary.selector_turns == 3
    assert result.summary.hallucinations == 0
    assert result.summary.selector_truncated == 1


def test_a_selector_cut_off_after_naming_a_level_chose_it(data_dir: Path, tmp_path: Path) -> None:
    """A selector reply cut off at the token limit after it named a level chose that level:
    the turn is a choice, neither truncated nor a hallucination."""
    _, samples = chosen("gsm8k", data_dir, 1)

    def script(body: dict[str, Any]) -> Reply:
        sample = sample_of(body, samples)
        if SELECT not in body["messages"][-1]["content"]:
            return Reply(f"<think>{thought('So.')}</think>**{sample.target}**")
        return Reply("<think>The first will do.</think>Level 1, because it is", cut=True)

    with serving(reasoning_app(script)) as server:
        result = evaluate(tmp_path / "run", server.base_url, dataset="gsm8k", data_dir=data_dir,
                          limit=1, mode="adaptive")  # fmt: skip
    [record] = records(tmp_path / "run")
    assert [(t["level"], t.get("truncated", False)) for t in record["selections"]] == [(1, False)]
    assert record["resolved_level"] == 1
    assert (result.summary.selector_truncated, result.summary.hallucinations) == (0, 0)


# -- DSPy's adapter -----------------------------------------------------------------------------


@pytest.mark.dspy
def test_dspy_reads_the_answer_of_a_reasoning_model(tmp_path: Path) -> None:
    """A structured strategy (dspy_predict) on a reasoning model: DSPy's adapter is given the
    answer, whose ``[[ ## answer ## ]]`` field is the prediction, not the one in the thinking;
    a reply cut off while thinking (its thinking holding the right field) is no prediction."""
    from tests.test_dspy_methods import _json_request, output_fields, write_toy

    site = write_toy(tmp_path / "toy")
    sys.path.insert(0, str(site))
    importlib.import_module("dspytoy")  # registers the toy dataset, as the toy fixture does

    def script(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        n = int(re.findall(r"What is (\d+) plus one", messages[-1]["content"])[-1])
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        if _json_request(body):  # DSPy's JSON fallback, after an unparsed reply
            return Reply(f"<think>{n + 1}", cut=True)
        fields = "".join(f"[[ ## {f} ## ]]\n{{}}\n\n" for f in output_fields(system))
        said = (fields + "[[ ## completed ## ]]").format
        if n == 3:
            return Reply(f"<think>{said(n + 1)}", cut=True)
        return Reply(f"<think>{said(n + 2)}\nNo, that is one too many.</think>\n{said(n + 1)}")

    try:
        with serving(reasoning_app(script)) as server:
            evaluate(tmp_path / "run", server.base_url, dataset="plusone",
                     strategies=["dspy_predict"])  # fmt: skip
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("dspytoy", None)
    by_n = {int(r["sample_id"][1:]): r["attempts"][0] for r in records(tmp_path / "run")}
    for n in (0, 1, 2):
        assert (by_n[n]["resolved"], by_n[n]["completion"]) == (True, str(n + 1))
        [call] = by_n[n]["calls"]
        assert str(n + 2) in call["reasoning"] and str(n + 2) not in call["completion"]
    cut = by_n[3]
    assert (cut["resolved"], cut["parsed"], cut["completion"]) == (False, None, None)
    assert {c["finish_reason"] for c in cut["calls"]} == {"length"}
    assert cut["truncated"] == "thinking" and "truncated" in cut["detail"]
