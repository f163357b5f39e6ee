"""Adaptive HPF reads the level the selector chooses (never the list numbering it echoes), and
every attempt is a fresh sample: a level chosen twice, and the two modes, do not share
completions through the cache unless asked to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hpt.backends import GenerationParams, ResponseCache
from hpt.graphs import LadderRuntime
from hpt.graphs.adaptive import (
    adaptive_recursion_limit,
    build_adaptive,
    parse_level,
    strategy_labels,
)
from hpt.graphs.ladder import build_ladder, recursion_limit
from hpt.graphs.strategies import DEFAULT_LADDER
from hpt.prompts import PromptSet
from hpt.tasks import get_task
from tests.backend_helpers import backend, serving
from tests.servers.openai_compat import FakeOpenAI
from tests.test_adaptive import Selector

ECHOED_LIST = """1. Role Prompting: Defines a role for the model in solving the task.
2. Zero-shot Chain of Thought prompting: Stimulates reasoning and problem-solving by including the phrase 'Let's think step by step' without offering previous examples related to the task.
3. Three-shot Chain of Thought prompting: Offers three examples related to the task to guide the model's reasoning process.
4. Least-to-most prompting: Uses a sequential method to derive essential insights from the task to solve it.
5. Generated Knowledge Prompting: Integration and application of external knowledge to accomplish the task."""


@pytest.mark.parametrize(
    ("reply", "level"),
    [
        # a lone number, however dressed
        ("3", 3), ("**3**", 3), ("3.", 3), ("(2)", 2), (" 4 \n", 4),
        # a stated choice
        ("I choose 3", 3), ("I choose strategy 3.", 3), ("Strategy: 3", 3), ("Index: 4", 4),
        ("The most effective prompting strategy is **2**.", 2),
        ("I would select index 5 because the task needs external knowledge.", 5),
        ("Answer: 1", 1), ("Level 2", 2),
        ("I choose strategy 3 since strategy 1 was already tried.", 3),
        # a single numbered line is the chosen item
        ("2. Zero-shot", 2), ("4. Least-to-most prompting", 4),
        # the echoed strategy list is numbering, not a choice
        (ECHOED_LIST, None),
        ("For a given task, the prompting strategies are:\n" + ECHOED_LIST, None),
        (ECHOED_LIST + "\n\nI choose 3.", 3),
        ("Selected strategy: 2\n\n" + ECHOED_LIST, 2),
        # prose naming no level, or several
        ("Role Prompting is the best choice for this task.", None),
        ("The answer is C. \"pet shop\"", None),
        ("Strategy 2 or strategy 4 would both work.", None),
        ("I choose 2, or maybe I choose 3.", None),
        ("To answer this we need 12 apples and 3 oranges.", None),
        # out of range
        ("0", None), ("7", None), ("-1", None), ("Strategy 9", None), ("", None),
    ],
)  # fmt: skip
def test_selector_replies(reply: str, level: int | None) -> None:
    assert parse_level(reply, 5, LABELS) == level


LABELS = strategy_labels(PromptSet.load("adaptive"), DEFAULT_LADDER)

# Every selector reply of a 3-sample CSQA adaptive run on the embedded SmolLM2 model
# (`hpt run --dataset csqa --limit 3 --mode adaptive --max-tokens 256`): none names a level.
EMBEDDED_REPLIES = [
    "When selecting the most effective prompting strategy, I would suggest using the Zero-shot "
    "Chain of Thought (SHT) as a sequential method to derive essential insights from the task.",
    "The most effective prompting strategy is:\n\n1. Zero-shot Chain of Thought: The task can be "
    'solved in the order of "2, 3, 4, 5" by using a zero-shot chain of thought and applying the '
    "given prompt.",
    "This task requires a critical thinker to solve it step-by-step. The most effective prompting "
    'strategy is "Choose the answer: "Dan fell off a bar stool."',
    'A. "kitchen"',
    'You chose: "A. "kitchen"\nThe most effective prompting strategy is indeed A. "Kitchen". This '
    "is the only one that meets all criteria, as it is a zero-shot chain of thought.",
    "This task requires a critical thinking approach, and the most effective prompt strategy "
    'would be:\n1. Zero-shot Chain of Thought: "let\'s think step by step" is one of several '
    "prompts that can help to generate ideas.",
    'The most effective prompting strategy for this task is "A. "Health" and C."',
    '3. "The Teens Were Trying to Hide That They Get Drink"\n\nThis prompt is an example of a '
    "Zero-shot Chain of Thought prompting strategy.",
    'The most effective prompting strategy is:\nD. "stagger"',
]


@pytest.mark.parametrize("reply", EMBEDDED_REPLIES)
def test_embedded_selector_replies_name_no_level(reply: str) -> None:
    assert parse_level(reply, 5, LABELS) is None


def test_a_number_beside_another_strategys_name_is_a_conflict() -> None:
    assert LABELS == ["Role Prompting", "Zero-shot Chain of Thought", "Three-shot Chain of Thought",
                      "Least-to-most", "Generated Knowledge"]  # fmt: skip
    assert parse_level("2. Zero-shot Chain of Thought prompting", 5, LABELS) == 2
    assert parse_level("1. Zero-shot Chain of Thought prompting", 5, LABELS) is None
    assert parse_level("I choose 3: Least-to-most prompting", 5, LABELS) is None
    assert parse_level("I choose 4: Least-to-most prompting", 5, LABELS) == 4


def _wrong(body: dict[str, Any]) -> str:
    return "I am not sure."


async def _adaptive(data_dir: Path, model: Any, answers: list[str], share: bool = False) -> Any:
    task = get_task("boolq", data_dir)
    sample = task.load_samples()[0]
    runtime = LadderRuntime(
        task, model, model, GenerationParams(), task.load_exemplar_pool(),
        share_completions=share,
    )  # fmt: skip
    graph = build_adaptive(list(DEFAULT_LADDER), runtime, Selector(answers))
    limit = adaptive_recursion_limit(len(DEFAULT_LADDER))
    return await graph.ainvoke({"sample": sample, "attempts": []}, {"recursion_limit": limit})


async def _standard(data_dir: Path, model: Any) -> Any:
    task = get_task("boolq", data_dir)
    sample = task.load_samples()[0]
    runtime = LadderRuntime(task, model, model, GenerationParams(), task.load_exemplar_pool())
    graph = build_ladder(["role", "zero_shot_cot"], runtime)
    return await graph.ainvoke(
        {"sample": sample, "attempts": []}, {"recursion_limit": recursion_limit(2)}
    )


async def test_a_level_chosen_twice_is_asked_twice(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(_wrong)
    with serving(fake.app()) as srv:
        async with ResponseCache(tmp_path / "c.sqlite3") as cache:
            async with backend(
                cache, provider="openai", model="test-model", endpoints=[srv.base_url]
            ) as model:
                state = await _adaptive(data_dir, model, ["1", "1", "2", "1", "1"])
    attempts = state["attempts"]
    assert [a.level for a in attempts] == [1, 1, 2, 1, 1]
    assert [a.iteration for a in attempts] == [1, 2, 3, 4, 5]
    # Four role prompts, identical messages: four model calls, none served from the cache.
    role_calls = [c for a in attempts if a.level == 1 for c in a.calls]
    assert len({c.messages[0].content for c in role_calls}) == 1
    assert fake.served == 5 and not any(c.cached for c in role_calls)


async def test_modes_do_not_share_completions_unless_asked(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(_wrong)
    with serving(fake.app()) as srv:
        async with ResponseCache(tmp_path / "c.sqlite3") as cache:
            async with backend(
                cache, provider="openai", model="test-model", endpoints=[srv.base_url]
            ) as model:
                await _standard(data_dir, model)  # role and zero-shot CoT, two calls
                assert fake.served == 2
                apart = await _adaptive(data_dir, model, ["1", "2", "x", "x", "x"])
                assert fake.served == 4  # the adaptive attempts asked the model afresh
                assert not any(c.cached for a in apart["attempts"] for c in a.calls)
                shared = await _adaptive(data_dir, model, ["1", "2", "1", "x", "x"], share=True)
    # Shared: the first choice of each level replays the standard climb; a repeat does not.
    cached = [c.cached for a in shared["attempts"] for c in a.calls]
    assert cached == [True, True, False]
    assert fake.served == 5


async def test_a_cached_answer_without_logprobs_is_asked_again_when_they_are_wanted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Knowledge candidates cached by a server that returned no logprobs (the embedded
    server before it had a logprob server) would leave GKP on its first-candidate rule."""
    from hpt.backends import Completion, Message

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(lambda body: "Some knowledge.")
    ask = [Message(role="user", content="Generate Knowledge about the passage.")]
    params = GenerationParams(logprobs=True)
    with serving(fake.app()) as srv:
        async with ResponseCache(tmp_path / "c.sqlite3") as cache:
            async with backend(
                cache, provider="openai", model="test-model", endpoints=[srv.base_url]
            ) as model:
                key = model._key(ask, params, "s#0")
                await cache.put(key, "openai", "test-model", Completion(text="Stale."))
                fresh = await model.complete(ask, params, cache_seed="s#0")
                again = await model.complete(ask, params, cache_seed="s#0")
    assert fresh.logprobs and not fresh.cached and fresh.text == "Some knowledge."
    assert again.cached and again.logprobs == fresh.logprobs
    assert fake.served == 1


async def test_further_draws_under_a_fixed_seed_get_their_own_seed(data_dir: Path) -> None:
    """Self-consistency's five samples (and GKP's three candidates) under --gen-seed."""
    from hpt.backends import Completion, Message
    from hpt.graphs.strategies import STRATEGIES, StrategyContext

    seeds: list[int | None] = []

    class Recording:
        name = "recording"

        async def complete(
            self, messages: list[Message], params: GenerationParams, *, cache_seed: str = ""
        ) -> Completion:
            seeds.append(params.seed)
            return Completion(text="The answer is True.")

    task = get_task("boolq", data_dir)
    sample = task.load_samples()[0]
    for seed, expected in ((7, [7, 8, 9, 10, 11]), (None, [None] * 5)):
        seeds.clear()
        ctx = StrategyContext(sample=sample, task=task, level=6, model=Recording(),  # type: ignore[arg-type]
                              knowledge_model=Recording(), params=GenerationParams(seed=seed),  # type: ignore[arg-type]
                              exemplar_pool=[], previous=[], cache_seed="s#0")  # fmt: skip
        await STRATEGIES["self_consistency"](ctx)
        assert seeds == expected


def test_cache_keys_stay_what_earlier_versions_wrote() -> None:
    # A changed key silently turns every user's cache cold: these were computed by the
    # release before the key's serialisation was made faster.
    from hpt.backends import Message
    from hpt.backends.cache import cache_key

    messages = [
        Message(role="user", content='héllo "x" \u2028'),
        Message(role="assistant", content=""),
    ]
    params = [
        GenerationParams(),
        GenerationParams(
            temperature=0,
            top_p=1,
            max_tokens=5,
            repetition_penalty=None,
            seed=3,
            stop=["\n", 'é"'],
            logprobs=True,
        ),
        GenerationParams(temperature=1.25, repetition_penalty=1.0),
    ]
    keys = [
        cache_key(
            provider="openai", model="m", endpoint="e", params=p, messages=messages, seed="s#1"
        )
        for p in params
    ]
    assert keys == [
        "322396e3e72aaa6b287c2f0c1f23041c99c98cc3da5d904dbdb7a4f0232e8bc4",
        "07e9fc20c52d6a06c8ed7a3cd3ffe8d364e8f9e8bc1f42496e0bfac4005f8fae",
        "8a54709bbd1afea3650a4be27fe55acfce424a595706f4146bbe67f901dbbb24",
    ]
