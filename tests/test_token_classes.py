"""Usage by token class from each provider's own fields, read through the transports from the
loopback servers, and Anthropic's prompt-cache breakpoints: where they go (the shared
prefixes, the model's minimum, at most four, the latest), the prompt text unchanged, "off"
sending exactly the body of before, and the response cache key untouched."""

from __future__ import annotations

from typing import Any

import pytest

from hpt.backends import GenerationParams, Message, ResponseCache, Usage
from hpt.backends.cache import cache_key
from hpt.backends.prompt_cache import breakpoints, min_cacheable_tokens
from tests.backend_helpers import backend, serving
from tests.servers.anthropic_api import FakeAnthropic
from tests.servers.hf_router import hf_app
from tests.servers.openai_compat import FakeOpenAI

KEY = "test-anthropic-key"
SONNET = "claude-sonnet-4-6"  # caches prefixes of 1,024 tokens and more: 4,096 characters
HAIKU = "claude-haiku-4-5"  # 4,096 tokens: 16,384 characters
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def template(n: int, seed: str = "Solve the problem step by step. ") -> str:
    """``n`` characters of instructions, the same for every sample."""
    return (seed * (n // len(seed) + 1))[:n]


def shared(role: str, text: str) -> Message:
    """A message wholly made of template text."""
    return Message(role=role, content=text, shared_prefix=len(text))  # type: ignore[arg-type]


def asking(head: str, question: str) -> Message:
    """A user turn: template text, then the sample's own question."""
    return Message(role="user", content=head + question, shared_prefix=len(head))


def plain(messages: list[Message]) -> list[Message]:
    """The same messages with no shared prefixes: what a prompt renderer gave before."""
    return [m.model_copy(update={"shared_prefix": None}) for m in messages]


async def sent_bodies(
    model: str, *conversations: list[Message], prompt_cache: str = "auto", **config: Any
) -> list[dict[str, Any]]:
    """The request bodies the Anthropic server received for ``conversations``."""
    fake = FakeAnthropic(responder=lambda body: "42", model_ids=(SONNET, HAIKU))
    with serving(fake.app()) as srv:
        async with backend(
            provider="anthropic", model=model, endpoints=[srv.root_url],
            prompt_cache=prompt_cache, **config,
        ) as b:  # fmt: skip
            for i, messages in enumerate(conversations):
                await b.complete(messages, GenerationParams(max_tokens=16), cache_seed=str(i))
    return [body for _, body in fake.requests if "messages" in body]


def joined(content: str | list[dict[str, Any]]) -> str:
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


def marks(body: dict[str, Any]) -> list[str]:
    """The text of every marked block, system first."""
    blocks = body["system"] if isinstance(body.get("system"), list) else []
    for m in body["messages"]:
        blocks = blocks + (m["content"] if isinstance(m["content"], list) else [])
    return [b["text"] for b in blocks if b.get("cache_control") == EPHEMERAL]


def words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n)) + " "


# -- usage by token class ------------------------------------------------------------------


async def openai_usages(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, route: str, prompts: list[str]
) -> list[Usage]:
    """The usage of each prompt asked in turn, through the SDK transport, the lean one, or the
    Hugging Face router (which passes on its provider's usage)."""
    import huggingface_hub.constants as hub

    monkeypatch.setenv("OPENAI_API_KEY", fake.api_key)
    monkeypatch.setenv("HF_TOKEN", fake.api_key)
    with serving(hf_app(fake)) as srv:
        monkeypatch.setattr(hub, "ENDPOINT", srv.root_url)
        monkeypatch.setattr(hub, "INFERENCE_PROXY_TEMPLATE", srv.root_url + "/{provider}")
        if route == "hf":
            config: dict[str, Any] = {"provider": "hf", "hf_provider": "hf-inference"}
        else:
            config = {"provider": "openai", "endpoints": [srv.base_url], "client": route}
        async with backend(model=fake.model_ids[0], **config) as b:
            return [
                (await b.complete([Message(role="user", content=p)], GenerationParams())).usage
                for p in prompts
            ]


@pytest.mark.parametrize("route", ["sdk", "aiohttp", "hf"])
async def test_openai_cached_tokens_are_cache_reads_within_the_prompt(
    monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    fake = FakeOpenAI(lambda body: "42 is the answer", model_ids=("org/model",),
                      cache_min_tokens=64, cache_step=1)  # fmt: skip
    head = words(100, "exemplar")
    first, second, short = await openai_usages(
        fake, monkeypatch, route, [head + "Q: 6 x 7?", head + "Q: 5 x 8?", "Q: 6 x 7?"]
    )
    # The server reports prompt_tokens_details.cached_tokens: 0 the first time (reported,
    # so 0, not None), the shared 100 words (and "Q:") the second; a prompt under its
    # minimum gets no details at all: not reported.
    assert (first.prompt_tokens, first.cache_read_tokens, first.cache_write_tokens) == (
        104,
        0,
        None,
    )
    assert (second.prompt_tokens, second.cache_read_tokens) == (104, 101)
    assert second.fresh_input_tokens == 3 and second.completion_tokens == 4
    assert (short.prompt_tokens, short.cache_read_tokens) == (4, None)


async def test_openai_reports_nothing_of_a_cache_it_does_not_have(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeOpenAI(lambda body: "42", model_ids=("m",), prompt_cache=False)
    head = words(2000, "exemplar")
    usages = await openai_usages(fake, monkeypatch, "aiohttp", [head + "A", head + "B"])
    assert [(u.prompt_tokens, u.cache_read_tokens) for u in usages] == [(2001, None)] * 2


async def test_anthropic_prompt_tokens_add_the_cache_reads_and_writes() -> None:
    model = "claude-opus-5"  # caches 512 tokens and more (the server counts words)
    head = template(3000) + " "
    one, two = asking(head, "Q: 6 x 7?"), asking(head, "Q: 5 x 8?")
    fake = FakeAnthropic(responder=lambda body: "The answer is 42", model_ids=(model,))
    usages = []
    with serving(fake.app()) as srv:
        for setting, messages in (("auto", one), ("auto", two), ("off", two)):
            async with backend(provider="anthropic", model=model, endpoints=[srv.root_url],
                               prompt_cache=setting) as b:  # fmt: skip
                out = await b.complete([messages], GenerationParams(max_tokens=64))
                usages.append(out.usage)
    shared_words, asked = len(head.split()), 4
    assert shared_words >= 512
    # Anthropic's input_tokens excludes what was read from or written to the cache: the
    # prompt is the three together, the same each time.
    written, read, unmarked = usages
    assert [u.prompt_tokens for u in usages] == [shared_words + asked] * 3
    assert (written.cache_write_tokens, written.cache_read_tokens) == (shared_words, 0)
    assert (read.cache_write_tokens, read.cache_read_tokens) == (0, shared_words)
    assert (unmarked.cache_write_tokens, unmarked.cache_read_tokens) == (0, 0)
    assert read.fresh_input_tokens == asked and unmarked.fresh_input_tokens == shared_words + asked
    assert all(u.completion_tokens == 4 for u in usages)


# -- prompt-cache breakpoints ----------------------------------------------------------------


async def test_a_shared_prefix_long_enough_is_marked_and_the_text_is_unchanged() -> None:
    system, head = template(3000, "Be brief. "), template(2000)
    ask = [shared("system", system), asking(head, "Q: 6 x 7?")]
    [body] = await sent_bodies(SONNET, ask)
    # The system prompt alone (about 750 tokens) is under Sonnet 4.6's 1,024: no mark there;
    # up to the end of the user turn's template (about 1,250) it is long enough.
    assert body["system"] == system
    [turn] = body["messages"]
    assert turn["content"] == [
        {"type": "text", "text": head, "cache_control": EPHEMERAL},
        {"type": "text", "text": "Q: 6 x 7?"},
    ]
    assert joined(turn["content"]) == ask[1].content


async def test_a_wholly_shared_system_prompt_becomes_one_marked_block() -> None:
    system = template(5000, "You are a careful grader. ")
    ask = [shared("system", system), asking("Grade: ", "the answer 42")]
    [body] = await sent_bodies(SONNET, ask)
    assert body["system"] == [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    # The user turn's template text ends a longer shared prefix: marked too.
    assert marks(body) == [system, "Grade: "]
    assert body["messages"][0]["content"][1] == {"type": "text", "text": "the answer 42"}


async def test_the_minimum_is_the_models_own() -> None:
    ask = [shared("system", template(6000)), asking(template(2000), "Q?")]
    sonnet, haiku = await sent_bodies(SONNET, ask), await sent_bodies(HAIKU, ask)
    assert marks(sonnet[0]) == [template(6000), template(2000)]
    # Haiku 4.5 caches 4,096 tokens and more: 8,000 characters are about 2,000.
    assert marks(haiku[0]) == []
    [off] = await sent_bodies(HAIKU, ask, prompt_cache="off")
    assert haiku == [off]
    assert min_cacheable_tokens("claude-haiku-4-5-20251001") == 4096
    assert min_cacheable_tokens("claude-3-5-haiku-20241022") == 2048
    assert min_cacheable_tokens("claude-opus-4-7") == 2048
    assert min_cacheable_tokens("claude-3-7-sonnet-20250219") == 1024
    assert min_cacheable_tokens("claude-opus-5") == 512


async def test_at_most_four_breakpoints_the_latest() -> None:
    # Three-shot exemplars as turns, each wholly template text, then the question.
    turns = [shared("system", template(4500))]
    for i in range(3):
        turns += [shared("user", template(500, f"Example {i}. ")),
                  shared("assistant", template(300, f"Answer {i}. "))]  # fmt: skip
    turns.append(asking(template(400, "Now you. "), "Q: 6 x 7?"))
    [body] = await sent_bodies(SONNET, turns)
    marked = marks(body)
    assert len(marked) == 4
    # Eight ends are long enough (the system's and every later one): the last four marked.
    assert marked == [m.content[: m.shared_prefix] for m in turns[-4:]]
    texts = [body["system"] if isinstance(body["system"], str) else joined(body["system"])]
    texts += [joined(m["content"]) for m in body["messages"]]
    assert texts == [m.content for m in turns]


async def test_no_mark_follows_a_samples_own_text() -> None:
    # A conversation: the first turn holds the question; later template text is not a
    # prefix every sample shares.
    turns = [asking(template(5000), "Q: 6 x 7?"), Message(role="assistant", content="42"),
             shared("user", template(5000, "Check your answer. "))]  # fmt: skip
    [body] = await sent_bodies(SONNET, turns)
    assert marks(body) == [template(5000)]
    assert body["messages"][2]["content"] == turns[2].content


async def test_several_system_messages_are_joined_and_split_at_their_shared_parts() -> None:
    one, two = template(2500, "Rule one. "), template(2500, "Rule two. ")
    ask = [shared("system", one), Message(role="system", content=two + " Today: Monday.",
           shared_prefix=len(two)), Message(role="user", content="Q?")]  # fmt: skip
    [body] = await sent_bodies(SONNET, ask)
    # Up to the end of the first (about 625 tokens) is too short; the second's shared part
    # ends past the minimum.
    assert body["system"] == [
        {"type": "text", "text": one + "\n\n" + two, "cache_control": EPHEMERAL},
        {"type": "text", "text": " Today: Monday."},
    ]
    assert joined(body["system"]) == "\n\n".join(m.content for m in ask[:2])


async def test_off_and_unshared_prompts_send_the_body_of_before() -> None:
    ask = [shared("system", template(6000)), asking(template(2000), "Q: 6 x 7?")]
    off, unshared, auto = (await sent_bodies(SONNET, ask, prompt_cache="off"),
                           await sent_bodies(SONNET, plain(ask)),
                           await sent_bodies(SONNET, ask))  # fmt: skip
    before = {"model": SONNET, "max_tokens": 16, "system": ask[0].content,
              "messages": [{"role": "user", "content": ask[1].content}]}  # fmt: skip
    assert off == unshared == [before]
    assert auto != off


async def test_marks_leave_the_response_cache_key_alone(tmp_path: Any) -> None:
    ask = [shared("system", template(6000)), asking(template(2000), "Q: 6 x 7?")]
    params = GenerationParams(max_tokens=16)
    key = dict(provider="anthropic", model=SONNET, endpoint="e", params=params, seed="s")
    assert cache_key(messages=ask, **key) == cache_key(messages=plain(ask), **key)
    fake = FakeAnthropic(responder=lambda body: "42", model_ids=(SONNET, HAIKU))
    with serving(fake.app()) as srv:
        async with ResponseCache(tmp_path / "cache.sqlite") as cache:
            for setting, messages in (("auto", ask), ("off", plain(ask))):
                async with backend(cache, provider="anthropic", model=SONNET,
                                   endpoints=[srv.root_url], prompt_cache=setting) as b:  # fmt: skip
                    out = await b.complete(messages, params, cache_seed="s")
                    # The second run, without marks, is answered from the first's entry.
                    assert out.cached == (setting == "off")
    assert len([body for _, body in fake.requests if "messages" in body]) == 1


async def test_a_thinking_turn_ends_the_shared_prefix() -> None:
    block = {"type": "thinking", "thinking": "t", "signature": "s"}
    turns = [asking(template(5000), "Q?"),
             Message(role="assistant", content=template(5000), shared_prefix=5000,
                     reasoning_blocks=[block])]  # fmt: skip
    # Thinking blocks cannot be marked, and come before the turn's text.
    assert breakpoints(turns, SONNET) == {0}
