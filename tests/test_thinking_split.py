"""Inline thinking set apart from the answer (hpt.backends.thinking), through the backend every
run uses: a loopback OpenAI-compatible server, the lean client, the response cache."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hpt.backends import GenerationParams, Message, ResponseCache
from hpt.backends.thinking import split_inline
from hpt.types import Completion
from tests.backend_helpers import backend, serving
from tests.servers.openai_compat import FakeOpenAI

TAGS = [("<think>", "</think>")]


@pytest.mark.parametrize(
    ("text", "reasoning", "answer"),
    [
        ("<think>So the answer is 49.</think>\n**42**", "So the answer is 49.", "**42**"),
        ("\n  <think>a</think>b", "a", "b"),
        ("<think>a</think>  \n\n  b\n", "a", "  b"),
        # The answer's own indentation stays: a code body continuing the prompt.
        ("<think>a</think>\n    return x\n", "a", "    return x"),
        # Cut off while thinking: all of it is thinking, there is no answer.
        ("<think>Let me see: the answer is 42 because", "Let me see: the answer is 42 because", ""),
        # The chat template opened the block (DeepSeek-R1): the completion starts inside it.
        ("weighing 49 and 42</think>The answer is 42.", "weighing 49 and 42", "The answer is 42."),
        ("The answer is 42.", None, "The answer is 42."),
        # A tag later in an answer is part of the answer.
        (
            "The answer is 42. I did not <think> long.",
            None,
            "The answer is 42. I did not <think> long.",
        ),
    ],
)
def test_inline_thinking_is_read_apart(text: str, reasoning: str | None, answer: str) -> None:
    assert split_inline(text, TAGS) == (reasoning, answer)


def test_other_tags_are_settable() -> None:
    tags = [("<reasoning>", "</reasoning>")]
    assert split_inline("<reasoning>49?</reasoning>42", tags) == ("49?", "42")
    assert split_inline("<think>49?</think>42", tags) == (None, "<think>49?</think>42")


def _server(replies: dict[str, str]) -> FakeOpenAI:
    return FakeOpenAI(lambda body: replies[body["messages"][-1]["content"]])


async def _ask(cache: ResponseCache | None, url: str, prompt: str, **config: Any) -> Completion:
    async with backend(cache, provider="openai", model="test-model", endpoints=[url],
                       api_key_env="HPT_TEST_KEY", **config) as b:  # fmt: skip
        return await b.complete([Message(role="user", content=prompt)], GenerationParams())


def test_the_backend_sets_thinking_apart_and_the_cache_keeps_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPT_TEST_KEY", "test-key")
    server = _server({"q": "<think>So the answer is 49.</think>**42**"})

    async def main(url: str) -> tuple[Completion, Completion, Completion]:
        async with ResponseCache(tmp_path / "cache.sqlite3") as cache:
            fresh = await _ask(cache, url, "q")
            cached = await _ask(cache, url, "q")
            # Another tag setting reads the same cached completion anew, without a call.
            whole = await _ask(cache, url, "q", think_tags=[])
        return fresh, cached, whole

    with serving(server.app()) as s:
        fresh, cached, whole = asyncio.run(main(s.base_url))
    assert server.served == 1
    assert (fresh.text, fresh.reasoning) == ("**42**", "So the answer is 49.")
    assert (cached.text, cached.reasoning, cached.cached) == (
        "**42**",
        "So the answer is 49.",
        True,
    )
    assert (whole.text, whole.reasoning) == ("<think>So the answer is 49.</think>**42**", None)


def test_think_tags_are_checked_in_a_models_config() -> None:
    from pydantic import ValidationError

    from hpt.backends import model_config_from

    with pytest.raises(ValidationError, match="two non-empty tags"):
        model_config_from({"provider": "openai", "model": "m", "think_tags": [["<t>", " "]]})
    config = model_config_from({"provider": "openai", "model": "m",
                                "think_tags": [["<reasoning>", "</reasoning>"]]})  # fmt: skip
    assert config.think_tags == [("<reasoning>", "</reasoning>")]


def test_unused_reasoning_fields_change_no_cache_key() -> None:
    from hpt.backends.cache import cache_key

    def key(params: GenerationParams, messages: list[Message]) -> str:
        return cache_key(provider="openai", model="m", endpoint="e", params=params,
                         messages=messages, seed="s")  # fmt: skip

    plain = [Message(role="user", content="q")]
    # The key of a request without reasoning settings is the one hpt computed before them.
    assert key(GenerationParams(), plain) == (
        "091dfa0615e8d02758a6334dcb3b3a017799d5d03f7840fc241c400300cf3c37"
    )
    assert key(GenerationParams(reasoning_effort="high"), plain) != key(GenerationParams(), plain)
    turn = [*plain, Message(role="assistant", content="a", reasoning_blocks=[{"type": "x"}])]
    bare = [*plain, Message(role="assistant", content="a")]
    assert key(GenerationParams(), turn) != key(GenerationParams(), bare)


def test_logprobs_of_a_completion_with_inline_thinking_are_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """They cover the thinking too, and which are the answer's is not known: scored as the
    answer's (generated knowledge's choice, Min-K%) they would score the thinking."""
    monkeypatch.setenv("HPT_TEST_KEY", "test-key")
    server = _server({"q": "<think>So 49.</think>42", "p": "42"})

    async def main(url: str) -> list[Completion]:
        async with backend(None, provider="openai", model="test-model", endpoints=[url],
                           api_key_env="HPT_TEST_KEY") as b:  # fmt: skip
            params = GenerationParams(logprobs=True)
            return [await b.complete([Message(role="user", content=q)], params) for q in "qp"]

    with serving(server.app()) as s:
        thought, plain = asyncio.run(main(s.base_url))
    assert (thought.text, thought.logprobs) == ("42", None)
    assert plain.logprobs == [-0.5]


def test_a_summary_without_cuts_writes_no_truncation_fields() -> None:
    from hpt.results.tally import Tally

    summary = Tally(dataset="boolq", model="m", mode="adaptive", m=5, penalty=1.0).summary()
    written = summary.model_dump(mode="json")
    assert not {"truncated", "selector_truncated", "reasoning_tokens"} & set(written)
    assert written["attempts"] == 0


def test_generated_knowledge_says_why_it_had_no_logprobs() -> None:
    from hpt.graphs.hpf import choose_knowledge

    plain = [Completion(text="a"), Completion(text="b")]
    thought = [Completion(text="a", reasoning="r"), Completion(text="b", reasoning="r")]
    assert choose_knowledge(plain)[1] == "first candidate (the backend returned no logprobs)"
    assert choose_knowledge(thought)[1] == (
        "first candidate (no logprobs of the answer apart from the thinking)"
    )
