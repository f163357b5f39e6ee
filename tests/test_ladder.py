"""Graph routing with a scripted in-process backend (the Backend protocol, no HTTP)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpt.backends import Backend, BackendError, Completion, GenerationParams, Message, Usage
from hpt.graphs import STRATEGIES, LadderRuntime, build_ladder, recursion_limit, strategy
from hpt.tasks import get_task
from tests.servers.answer_key import LADDER, strategy_of


class Scripted:
    """Resolves from a chosen level on; can fail calls of one strategy."""

    def __init__(
        self,
        gold: str,
        resolve_from: str | None,
        fail_on: str | None = None,
        name: str = "scripted",
    ):
        self.gold, self.first, self.fail_on, self._name = gold, resolve_from, fail_on, name
        self.seen: list[list[Message]] = []

    @property
    def name(self) -> str:
        return self._name

    async def complete(
        self, messages: list[Message], params: GenerationParams, *, cache_seed: str = ""
    ) -> Completion:
        self.seen.append(messages)
        kind = strategy_of({"messages": [m.model_dump() for m in messages]})
        if kind == self.fail_on:
            raise BackendError("HTTP 500 after 6 attempts")
        resolved = (
            self.first is not None
            and kind in LADDER
            and LADDER.index(kind) >= LADDER.index(self.first)
        )
        text = f"The answer is {self.gold}." if resolved else "Hmm."
        return Completion(
            text=text, usage=Usage(prompt_tokens=10, completion_tokens=3), latency_s=0.01
        )

    async def check(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


async def climb(
    data_dir: Path, model: Backend, knowledge: Backend | None = None, strategies=LADDER
):
    task = get_task("boolq", data_dir)
    sample = task.load_samples()[0]
    runtime = LadderRuntime(
        task, model, knowledge or model, GenerationParams(), task.load_exemplar_pool()
    )
    graph = build_ladder(list(strategies), runtime)
    state = await graph.ainvoke(
        {"sample": sample, "attempts": []}, {"recursion_limit": recursion_limit(len(strategies))}
    )
    return sample, state["attempts"]


@pytest.mark.parametrize("level", [1, 2, 3, 4, 5])
async def test_stops_at_first_resolving_level(data_dir: Path, level: int) -> None:
    task = get_task("boolq", data_dir)
    gold = task.load_samples()[0].target
    _, attempts = await climb(data_dir, Scripted(gold, LADDER[level - 1]))
    assert [a.level for a in attempts] == list(range(1, level + 1))
    assert [a.strategy for a in attempts] == list(LADDER[:level])
    assert [a.resolved for a in attempts] == [False] * (level - 1) + [True]
    assert attempts[-1].parsed == gold
    assert all(a.calls and a.calls[-1].messages for a in attempts)


async def test_unresolved_climbs_every_level(data_dir: Path) -> None:
    _, attempts = await climb(data_dir, Scripted("True", None))
    assert [a.strategy for a in attempts] == list(LADDER)
    assert not any(a.resolved for a in attempts)
    assert all(a.parsed is None for a in attempts)
    # least-to-most makes four calls, generated knowledge two
    assert [len(a.calls) for a in attempts] == [1, 1, 1, 4, 4]
    assert attempts[0].prompt_tokens == 10 and attempts[3].completion_tokens == 12


async def test_least_to_most_passes_earlier_answers_forward(data_dir: Path) -> None:
    sample, attempts = await climb(data_dir, Scripted("True", None))
    ltm = attempts[3].calls
    for i, call in enumerate(ltm):
        assert len(call.messages) == 2 * i + 1  # every earlier step and answer
        assert [m.role for m in call.messages[1::2]] == ["assistant"] * i
    assert sample.fields["question"] in ltm[-1].messages[-1].content
    assert '"Hmm."' in ltm[-1].messages[-1].content  # {previous}


async def test_generated_knowledge_uses_the_knowledge_model(data_dir: Path) -> None:
    model, knower = Scripted("True", None, name="evaluated"), Scripted("True", None, name="knower")
    _, attempts = await climb(data_dir, model, knower)
    gk = attempts[-1].calls
    assert [(c.purpose, c.model) for c in gk] == [
        ("knowledge 1/3", "knower"), ("knowledge 2/3", "knower"), ("knowledge 3/3", "knower"),
        ("answer", "evaluated"),
    ]  # fmt: skip
    # The scripted backend gives no logprobs, so the first candidate is used, and said so.
    assert attempts[-1].notes["knowledge"] == "first candidate (the backend returned no logprobs)"
    assert (
        gk[3].messages[0].content.endswith(f'using knowledge of the passage:"{gk[0].completion}"')
    )


async def test_three_shot_excludes_exemplars_and_parses_only_completion(data_dir: Path) -> None:
    task = get_task("boolq", data_dir)
    ids = {s.id for s in task.load_samples()}
    assert not ids & set(task.exemplar_ids())
    _, attempts = await climb(data_dir, Scripted("True", None))
    prompt = attempts[2].calls[0].messages[0].content
    assert prompt.count('Answer: "') == 3  # exemplar answers are in the prompt ...
    assert attempts[2].parsed is None  # ... but never read as the model's answer


async def test_backend_error_stops_the_climb(data_dir: Path) -> None:
    _, attempts = await climb(data_dir, Scripted("True", None, fail_on="three_shot_cot"))
    assert [a.strategy for a in attempts] == list(LADDER[:3])
    assert attempts[-1].error == "HTTP 500 after 6 attempts" and not attempts[-1].resolved


async def test_a_registered_strategy_becomes_a_level(data_dir: Path) -> None:
    @strategy("echo_twice")
    async def echo_twice(ctx) -> str:  # type: ignore[no-untyped-def]
        first = await ctx.ask([Message(role="user", content=ctx.render("role", "user"))])
        return first + " " + first

    gold = get_task("boolq", data_dir).load_samples()[0].target
    try:
        _, attempts = await climb(
            data_dir, Scripted(gold, "role"), strategies=["echo_twice", "role"]
        )
        assert [a.strategy for a in attempts] == ["echo_twice"] and attempts[0].resolved
    finally:
        del STRATEGIES["echo_twice"]


def test_knowledge_candidate_by_mean_token_probability() -> None:
    import math

    from hpt.backends import Completion
    from hpt.graphs.hpf import choose_knowledge
    from hpt.results.records import mean_token_prob

    def c(*lps: float) -> Completion:
        return Completion(text="k", logprobs=list(lps))

    assert mean_token_prob([math.log(0.5), math.log(0.25)]) == pytest.approx(0.375)
    # The paper's rule is the mean of probabilities (here 0.50 beats 0.37), not of logprobs.
    index, rule = choose_knowledge([c(-2.0, -2.0), c(0.0, -9.0), c(-1.0, -1.0)])
    assert index == 1 and rule.startswith("candidate 2 of 3 by mean token probability")
    index, rule = choose_knowledge([c(-1.0), Completion(text="no logprobs"), c(-0.1)])
    assert index == 0 and rule == "first candidate (the backend returned no logprobs)"


class Voters:
    """Answers the self-consistency samples from a script, in order."""

    name = "voters"

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.seeds: list[str] = []

    async def complete(
        self, messages: list[Message], params: GenerationParams, *, cache_seed: str = ""
    ) -> Completion:
        self.seeds.append(cache_seed)
        text = self.answers.pop(0)
        if text.startswith("CUT:"):  # cut off at the token limit
            return Completion(text=text.removeprefix("CUT:"), finish_reason="length")
        return Completion(text=text)

    async def check(self) -> None: ...

    async def aclose(self) -> None: ...


@pytest.mark.parametrize(
    ("answers", "resolved", "votes"),
    [
        # G is the gold answer, O the other one.
        (["Answer: G", "O.", "I'd say G", "no idea", "G"], True, "'G': 3, 'O': 1; unreadable: 1"),
        (["O", "G", "G", "O", "hmm"], False, "'O': 2, 'G': 2; unreadable: 1"),  # tie: first drawn
        (["G", "G", "O", "O", "O"], False, "'O': 3, 'G': 2; unreadable: 0"),
        (["hmm"] * 5, False, "none; unreadable: 5"),
        # A draw cut off at the token limit does not vote, whatever it reads.
        (["CUT:O", "CUT:O", "G", "G", "O"], True, "'G': 2, 'O': 1; unreadable: 0; cut off: 2"),
        (["CUT:G"] * 5, False, "none; unreadable: 0; cut off: 5"),
        # The attempt is the winner's first draw, not a later cut one with the same text.
        (["G", "G", "CUT:G", "O", "O"], True, "'G': 2, 'O': 2; unreadable: 0; cut off: 1"),
    ],
)
async def test_self_consistency_votes(
    data_dir: Path, answers: list[str], resolved: bool, votes: str
) -> None:
    sample, _ = await climb(data_dir, Scripted("True", None), strategies=["role"])
    gold = sample.target
    other = "False" if gold == "True" else "True"

    def fill(text: str) -> str:
        return text.replace("G", gold).replace("O", other)

    voters = Voters([fill(a) if a not in ("no idea", "hmm") else a for a in answers])
    _, attempts = await climb(data_dir, voters, strategies=["self_consistency"])
    (attempt,) = attempts
    assert len(attempt.calls) == 5 and len(set(voters.seeds)) == 5  # five separate draws
    assert attempt.notes["votes"] == votes.replace("'G'", f"'{gold}'").replace("'O'", f"'{other}'")
    assert attempt.resolved is resolved
    # Every draw cut off: the attempt is the first draw's, cut inside its answer.
    assert attempt.truncated == ("answer" if all(a.startswith("CUT:") for a in answers) else None)
