"""Adaptive HPF: the selector's answers, the x + i scoring, and hallucinations."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpt.backends import Completion, GenerationParams, Message
from hpt.graphs import LadderRuntime
from hpt.graphs.adaptive import adaptive_recursion_limit, build_adaptive, parse_level
from hpt.graphs.strategies import DEFAULT_LADDER
from hpt.results.records import SampleRecord
from hpt.results.scoring import adaptive_score
from hpt.results.tally import summarize
from hpt.tasks import get_task
from tests.test_ladder import Scripted


class Selector:
    name = "selector"

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    async def complete(
        self, messages: list[Message], params: GenerationParams, *, cache_seed: str = ""
    ) -> Completion:
        self.prompts.append(messages[-1].content)
        return Completion(text=self.answers.pop(0))

    async def check(self) -> None: ...

    async def aclose(self) -> None: ...


@pytest.mark.parametrize(
    ("answer", "level"),
    [("3", 3), ("Level 2", 2), ("2. Zero-shot", 2), ("0", None), ("7", None), ("-1", None),
     ("I would pick the role one", None), ("", None)],
)  # fmt: skip
def test_parse_level(answer: str, level: int | None) -> None:
    assert parse_level(answer, 5) == level


async def run(data_dir: Path, resolve_from: str | None, answers: list[str]):  # type: ignore[no-untyped-def]
    task = get_task("boolq", data_dir)
    sample = task.load_samples()[0]
    model = Scripted(sample.target, resolve_from)
    selector = Selector(answers)
    runtime = LadderRuntime(task, model, model, GenerationParams(), task.load_exemplar_pool())
    graph = build_adaptive(list(DEFAULT_LADDER), runtime, selector)
    state = await graph.ainvoke(
        {"sample": sample, "attempts": []},
        {"recursion_limit": adaptive_recursion_limit(len(DEFAULT_LADDER))},
    )
    return sample, state, selector


async def test_hallucinations_cost_iterations_then_the_choice_resolves(data_dir: Path) -> None:
    _, state, selector = await run(data_dir, "zero_shot_cot", ["7", "banana", "2"])
    turns = state["selections"]
    assert [t.level for t in turns] == [None, None, 2]
    assert [t.hallucinated for t in turns] == [True, True, False]
    (attempt,) = state["attempts"]
    assert (attempt.level, attempt.iteration, attempt.resolved) == (2, 3, True)
    assert adaptive_score(attempt.level, attempt.iteration, 5, 1.71) == 5.0
    assert "Select only the index" in selector.prompts[0]
    assert "Already tried" not in selector.prompts[0]


async def test_failed_levels_come_back_as_feedback(data_dir: Path) -> None:
    _, state, selector = await run(data_dir, "three_shot_cot", ["1", "3"])
    assert [(a.level, a.iteration, a.resolved) for a in state["attempts"]] == [
        (1, 1, False), (3, 2, True)
    ]  # fmt: skip
    assert "Already tried without success: 1." in selector.prompts[1]


async def test_unresolved_after_m_iterations(data_dir: Path) -> None:
    _, state, _ = await run(data_dir, None, ["1", "x", "2", "5", "4"])
    assert len(state["selections"]) == 5  # the budget is m iterations, hallucinations included
    assert [a.level for a in state["attempts"]] == [1, 2, 5, 4]
    assert not any(a.resolved for a in state["attempts"])


def test_summary_scores_x_plus_i_and_counts_hallucinations() -> None:
    from hpt.results import Attempt, Selection

    def record(sid: str, level: int | None, iteration: int | None, turns: list[int | None]):  # type: ignore[no-untyped-def]
        return SampleRecord(
            sample_id=sid, dataset="boolq", model="m", mode="adaptive",
            strategies=list(DEFAULT_LADDER), m=5, penalty=1.71, target="True",
            resolved_level=level, iteration=iteration,
            hpi_score=adaptive_score(level, iteration, 5, 1.71),
            attempts=[Attempt(level=level or 1, strategy="role", resolved=level is not None,
                              iteration=iteration)],
            selections=[Selection(iteration=i + 1, answer=str(t), level=t)
                        for i, t in enumerate(turns)],
        )  # fmt: skip

    records = [record("a", 1, 1, [1]), record("b", 2, 3, [None, None, 2]),
               record("c", None, None, [1, 2, 3, 4, 5])]  # fmt: skip
    s = summarize(records, dataset="boolq", model="m", mode="adaptive", m=5, penalty=1.71)
    assert s.hpi == pytest.approx((2 + 5 + 6.71) / 3)
    assert (s.selector_turns, s.hallucinations) == (9, 2)
    assert s.hallucination_rate == pytest.approx(2 / 9)
    assert s.accuracy == pytest.approx(2 / 3) and s.level_counts[1] == 1


async def test_adaptive_run_end_to_end(
    data_dir: Path, tmp_path: Path, boolq_answers: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    import json

    from hpt.runs import RunSpec, run_evaluation
    from tests.backend_helpers import serving
    from tests.servers.answer_key import KeyedResponder
    from tests.servers.openai_compat import FakeOpenAI

    keyed = KeyedResponder(boolq_answers, "zero_shot_cot")
    turns: dict[str, int] = {}

    def responder(body: dict) -> str:  # type: ignore[type-arg]
        prompt = body["messages"][-1]["content"]
        if "Select only the index" in prompt:
            n = turns[prompt[-300:]] = turns.get(prompt[-300:], 0) + 1
            return "Strategy 9" if n == 1 and "Already tried" not in prompt else "2"
        return keyed(body)

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with serving(FakeOpenAI(responder).app()) as srv:
        spec = RunSpec(dataset="boolq", model="openai:test-model", base_url=srv.base_url,
                       limit=3, mode="adaptive", data_dir=data_dir, out=tmp_path / "run")  # fmt: skip
        result = await run_evaluation(spec)
    s = result.summary
    assert s.mode == "adaptive" and s.samples == 3 and s.errors == 0
    # Each sample: a hallucinated first turn, then level 2 resolves at iteration 2: 2 + 2.
    assert s.hpi == 4.0 and s.hallucinations == 3 and s.selector_turns == 6
    recs = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").open()]
    assert all(r["iteration"] == 2 and r["resolved_level"] == 2 for r in recs)
    assert recs[0]["selections"][0]["answer"] == "Strategy 9"
