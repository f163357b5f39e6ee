"""Reasoning models over the chat-completions protocol, through the backend every run uses
(open_backend: the official SDK client and hpt's lean client) against a server that speaks
reasoning as vLLM, llama.cpp and api.openai.com do: thinking read apart in each form,
reasoning tokens, truncation, what is sent per model generation, and what is refused."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from hpt.backends import (
    BackendError,
    FatalBackendError,
    GenerationParams,
    ManagedBackend,
    Message,
    SettingRefused,
)
from hpt.backends.local import LOCAL_MODEL_NAME
from hpt.backends.openai_reasoning import PARAMETER_RULES, REASONING_GUIDE
from tests.backend_helpers import backend, serving
from tests.servers.openai_compat import OPENAI_MODELS, FakeOpenAI, Reply

OPENAI_CLIENTS = pytest.mark.parametrize("client", ["sdk", "aiohttp"])
ASK = [Message(role="user", content="What is 6 x 7?")]
THOUGHT = "Six sevens: I first thought 49 but 7 x 7 is 49, so 6 x 7 is 42"  # 18 words
ANSWER = "The answer is 42."  # 4 words


def _sent(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("model", "messages")}


def _thinker(body: dict[str, Any]) -> Reply:
    return Reply(ANSWER, THOUGHT)


@pytest.fixture
def openai_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback server stands for api.openai.com (OpenAI's rules by host, as "auto")."""
    from hpt.backends import openai_protocol

    monkeypatch.setattr(openai_protocol, "is_openai_host", lambda url: True)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


@contextlib.asynccontextmanager
async def _model(url: str, model: str, client: str, **config: Any) -> AsyncIterator[ManagedBackend]:
    async with backend(provider="openai", model=model, endpoints=[url], client=client,
                       **config) as b:  # fmt: skip
        yield b


# -- thinking read apart -----------------------------------------------------------------


@OPENAI_CLIENTS
@pytest.mark.parametrize(
    ("form", "counted"),
    [("reasoning", True), ("reasoning_content", False), ("inline", False)],
    ids=["vllm", "llama.cpp", "no-parser"],
)
async def test_the_thinking_comes_apart_from_the_answer_in_each_form(
    client: str, form: Any, counted: bool
) -> None:
    # vLLM's field (with its count), llama.cpp's field (no count), inline tags (no parser).
    fake = FakeOpenAI(_thinker, reasoning_format=form, counts_reasoning=counted)
    with serving(fake.app()) as srv:
        async with _model(srv.base_url, "test-model", client) as b:
            out = await b.complete(ASK, GenerationParams())
    assert (out.text, out.reasoning) == (ANSWER, THOUGHT)
    assert out.finish_reason == "stop" and not out.truncated
    assert out.usage.completion_tokens == 22
    assert out.usage.reasoning_tokens == (18 if form == "reasoning" else None)


@OPENAI_CLIENTS
@pytest.mark.parametrize("form", ["reasoning", "reasoning_content", "inline"])
@pytest.mark.parametrize(
    ("limit", "reasoning", "text"),
    [
        # Cut inside the thinking: no answer at all.
        (5, "Six sevens: I first thought", ""),
        # Cut inside the answer: the thinking whole, the answer begun.
        (20, THOUGHT, "The answer"),
    ],
    ids=["in-thinking", "in-answer"],
)
async def test_a_reply_cut_at_the_token_limit_is_truncated_where_it_was_cut(
    client: str, form: Any, limit: int, reasoning: str, text: str
) -> None:
    fake = FakeOpenAI(_thinker, reasoning_format=form)
    with serving(fake.app()) as srv:
        async with _model(srv.base_url, "test-model", client) as b:
            out = await b.complete(ASK, GenerationParams(max_tokens=limit))
    assert (out.text, out.reasoning) == (text, reasoning)
    assert out.finish_reason == "length" and out.truncated
    assert out.usage.completion_tokens == limit


async def test_a_cached_completion_keeps_its_reasoning_and_count(tmp_path: Path) -> None:
    from hpt.backends import ResponseCache

    fake = FakeOpenAI(_thinker)
    with serving(fake.app()) as srv:
        async with ResponseCache(tmp_path / "cache.sqlite3") as cache:
            for _ in range(2):
                async with backend(cache, provider="openai", model="test-model",
                                   endpoints=[srv.base_url]) as b:  # fmt: skip
                    out = await b.complete(ASK, GenerationParams())
    assert fake.served == 1 and out.cached
    assert (out.text, out.reasoning, out.usage.reasoning_tokens) == (ANSWER, THOUGHT, 18)


async def test_a_malformed_reasoning_field_is_a_transient_fault() -> None:
    from hpt.backends.errors import TransientError
    from hpt.backends.openai_protocol import parse_chat_completion

    raw = b'{"choices":[{"message":{"content":"42","reasoning":["a"]}}]}'
    with pytest.raises(TransientError):
        parse_chat_completion(raw)


# -- OpenAI's API: what is sent per model generation ---------------------------------------

CHAT = {"temperature": 0.6, "top_p": 0.9, "max_tokens": 1024}
SAMPLED = {"temperature": 0.6, "top_p": 0.9, "max_completion_tokens": 1024}
REASONING = {"max_completion_tokens": 1024}


@OPENAI_CLIENTS
@pytest.mark.parametrize(
    ("model", "asked", "sent"),
    [
        ("gpt-4o", {}, CHAT),
        ("gpt-5-chat-latest", {"logprobs": True}, {**CHAT, "logprobs": True}),
        ("o3-mini", {}, REASONING),
        ("o3-mini", {"reasoning_effort": "high"}, {**REASONING, "reasoning_effort": "high"}),
        ("gpt-5", {"reasoning_effort": "minimal"}, {**REASONING, "reasoning_effort": "minimal"}),
        ("gpt-5-pro", {"reasoning_effort": "high"}, {**REASONING, "reasoning_effort": "high"}),
        # gpt-5.1 and later take temperature, top_p and logprobs at effort "none" only.
        ("gpt-5.1", {"reasoning_effort": "none", "logprobs": True},
         {**SAMPLED, "logprobs": True, "reasoning_effort": "none"}),
        ("gpt-5.1", {"reasoning_effort": "low", "logprobs": True},
         {**REASONING, "reasoning_effort": "low"}),
        ("gpt-5.1", {}, REASONING),
        ("gpt-5.1-chat-latest", {"reasoning_effort": "medium"},
         {**REASONING, "reasoning_effort": "medium"}),
        ("gpt-5.6-sol", {"reasoning_effort": "max"}, {**REASONING, "reasoning_effort": "max"}),
        ("gpt-6-astra", {"reasoning_effort": "xhigh"}, {**REASONING, "reasoning_effort": "xhigh"}),
        # Newer than hpt's table: a reasoning model of gpt-5.1's rules, its effort sent as asked.
        ("gpt-7", {"reasoning_effort": "max"}, {**REASONING, "reasoning_effort": "max"}),
        ("gpt-7", {"reasoning_effort": "none"}, {**SAMPLED, "reasoning_effort": "none"}),
        # A dated snapshot is its model's.
        ("gpt-5-2025-08-07", {"reasoning_effort": "minimal"},
         {**REASONING, "reasoning_effort": "minimal"}),
    ],
)  # fmt: skip
async def test_each_openai_model_is_sent_what_it_takes_and_the_call_says_so(
    client: str, model: str, asked: dict[str, Any], sent: dict[str, Any], openai_host: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # The server answers as api.openai.com does: anything the model refuses is a 400.
    if model == "gpt-5-2025-08-07":
        monkeypatch.setitem(OPENAI_MODELS, model, OPENAI_MODELS["gpt-5"])
    fake = FakeOpenAI(_thinker, openai_rules=True, model_ids=(model,))
    params = GenerationParams(**asked)
    with serving(fake.app()) as srv:
        async with _model(srv.base_url, model, client) as b:
            out = await b.complete(ASK, params)
            predicted = b.sent_params(params)
    assert out.params == predicted == _sent(fake.requests[0]) == sent
    # OpenAI returns no thinking on this endpoint, only its count.
    thought = 18 if OPENAI_MODELS[model].default_effort is not None else 0
    assert (out.text, out.reasoning, out.usage.reasoning_tokens) == (ANSWER, None, thought)


@OPENAI_CLIENTS
@pytest.mark.parametrize(
    ("model", "asked", "says"),
    [
        ("gpt-4o", {"reasoning_effort": "high"},
         "gpt-4o is not an OpenAI reasoning model and takes no reasoning effort"),
        ("gpt-5-chat-latest", {"reasoning_effort": "low"},
         "gpt-5-chat-latest is not an OpenAI reasoning model"),
        ("gpt-5.1", {"reasoning_effort": "minimal"},
         "gpt-5.1 takes the reasoning efforts none, low, medium, high, not 'minimal'"),
        ("gpt-6-astra", {"reasoning_effort": "none"},
         "gpt-6-astra takes the reasoning efforts low, medium, high, xhigh, max, not 'none'"),
        ("gpt-5-pro", {"reasoning_effort": "low"}, "gpt-5-pro takes the reasoning efforts high,"),
        ("o1-mini", {"reasoning_effort": "low"}, "o1-mini takes no reasoning effort"),
        ("o3-mini", {"thinking_budget": 2048},
         "o3-mini: OpenAI's models take no thinking budget; use --reasoning-effort"),
        ("gpt-4o", {"thinking_budget": 0}, "OpenAI's models take no thinking budget"),
    ],
)  # fmt: skip
async def test_a_setting_the_model_cannot_take_is_refused_before_any_call(
    client: str, model: str, asked: dict[str, Any], says: str, openai_host: None
) -> None:
    fake = FakeOpenAI(_thinker, openai_rules=True, model_ids=(model,))
    params = GenerationParams(**asked)
    with serving(fake.app()) as srv:
        async with _model(srv.base_url, model, client) as b:
            with pytest.raises(SettingRefused) as refused:
                b.sent_params(params)
            with pytest.raises(FatalBackendError) as failed:
                await b.complete(ASK, params)
    message = str(refused.value)
    assert says in message and "\n" not in message and REASONING_GUIDE in message
    # It names the fix.
    assert "--reasoning-effort" in message
    assert message in str(failed.value)
    assert fake.requests == [] and fake.served == 0


async def test_the_server_refuses_what_openai_refuses_with_openais_own_words(
    openai_host: None,
) -> None:
    # Told that o3-mini is an open server's model, hpt sends the paper's sampling settings;
    # the server then answers as OpenAI does, a sample error.
    fake = FakeOpenAI(_thinker, openai_rules=True, model_ids=("o3-mini", "gpt-5.1"))
    with serving(fake.app()) as srv:
        async with _model(srv.base_url, "o3-mini", "aiohttp",
                          reasoning_control="reasoning_effort") as b:  # fmt: skip
            with pytest.raises(BackendError) as sampled:
                await b.complete(ASK, GenerationParams())
        async with _model(srv.base_url, "gpt-5.1", "sdk",
                          reasoning_control="reasoning_effort") as b:  # fmt: skip
            with pytest.raises(BackendError) as effort:
                await b.complete(ASK, GenerationParams(reasoning_effort="minimal"))
    assert not isinstance(sampled.value, FatalBackendError)
    assert ("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.") in str(sampled.value)  # fmt: skip
    assert ("Unsupported value: 'minimal' is not supported with the 'gpt-5.1' model. Supported "
            "values are: 'none', 'low', 'medium', and 'high'.") in str(effort.value)  # fmt: skip


async def test_the_server_refuses_sampling_settings_as_openai_does() -> None:
    import aiohttp

    fake = FakeOpenAI(_thinker, openai_rules=True, model_ids=("o3-mini", "gpt-4o", "gpt-5.1"))
    bodies: list[dict[str, Any]] = [
        {"model": "o3-mini", "temperature": 0.6},
        {"model": "o3-mini", "logprobs": True},
        {"model": "gpt-4o", "reasoning_effort": "low"},
        {"model": "gpt-5.1", "reasoning_effort": "none", "temperature": 0.6, "logprobs": True},
        {"model": "gpt-5.1", "reasoning_effort": "low", "top_p": 0.9},
        {"model": "gpt-4o", "chat_template_kwargs": {"enable_thinking": False}},
    ]
    answers = []
    with serving(fake.app()) as srv:
        async with aiohttp.ClientSession(headers={"Authorization": "Bearer test-key"}) as http:
            for body in bodies:
                body["messages"] = [{"role": "user", "content": "hi"}]
                async with http.post(f"{srv.base_url}/chat/completions", json=body) as resp:
                    answers.append((resp.status, (await resp.json()).get("error")))
    assert answers[0] == (
        400,
        {
            "message": "Unsupported value: 'temperature' does not support 0.6 with this model. "
            "Only the default (1) value is supported.",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "unsupported_value",
        },
    )
    assert answers[1][1]["message"] == (
        "Unsupported parameter: 'logprobs' is not supported with this model."
    )
    assert answers[2][1]["message"] == (
        "Unsupported parameter: 'reasoning_effort' is not supported with this model."
    )
    assert answers[3] == (200, None)
    assert answers[4][1]["param"] == "top_p"
    assert answers[5][1]["message"] == (
        "Unrecognized request argument supplied: chat_template_kwargs")  # fmt: skip


# -- open servers ----------------------------------------------------------------------------

OPEN = {"temperature": 0.6, "top_p": 0.9, "max_tokens": 1024, "repetition_penalty": 1.1}


@OPENAI_CLIENTS
@pytest.mark.parametrize(
    ("control", "asked", "added"),
    [
        ("auto", {"reasoning_effort": "high"}, {"reasoning_effort": "high"}),
        ("auto", {"thinking_budget": 512}, {"thinking_token_budget": 512}),
        ("reasoning_effort", {"reasoning_effort": "none", "thinking_budget": 0},
         {"reasoning_effort": "none", "thinking_token_budget": 0}),
        ("chat_template_kwargs", {"reasoning_effort": "none"},
         {"chat_template_kwargs": {"enable_thinking": False}}),
        ("chat_template_kwargs", {"reasoning_effort": "low"},
         {"chat_template_kwargs": {"enable_thinking": True}}),
        ("chat_template_kwargs", {"thinking_budget": 0},
         {"chat_template_kwargs": {"enable_thinking": False}}),
        ("chat_template_kwargs", {"thinking_budget": 300},
         {"chat_template_kwargs": {"enable_thinking": True}, "thinking_token_budget": 300}),
        ("auto", {}, {}),
        ("none", {}, {}),
    ],
)  # fmt: skip
async def test_an_open_server_is_told_effort_and_budget_as_its_reasoning_control_says(
    client: str, control: str, asked: dict[str, Any], added: dict[str, Any]
) -> None:
    fake = FakeOpenAI(_thinker)
    params = GenerationParams(**asked)
    with serving(fake.app()) as srv:
        async with _model(srv.base_url, "test-model", client, reasoning_control=control) as b:
            out = await b.complete(ASK, params)
    assert out.params == _sent(fake.requests[0]) == {**OPEN, **added}
    assert (out.text, out.reasoning) == (ANSWER, THOUGHT)


@OPENAI_CLIENTS
async def test_a_server_taking_no_reasoning_settings_refuses_them(client: str) -> None:
    fake = FakeOpenAI(_thinker)
    with serving(fake.app()) as srv:
        async with _model(srv.base_url, "test-model", client, reasoning_control="none") as b:
            with pytest.raises(SettingRefused) as refused:
                b.sent_params(GenerationParams(thinking_budget=100))
    assert str(refused.value) == (
        "test-model: its server takes no reasoning settings (reasoning_control is none); drop "
        "--reasoning-effort and --thinking-budget, or set the model's reasoning_control to how "
        "the server takes them"
    )


def test_reasoning_control_is_a_setting_of_openai_models_only() -> None:
    from hpt.backends import model_config_from

    config = model_config_from({"provider": "openai", "model": "qwen3",
                                "reasoning_control": "chat_template_kwargs"})  # fmt: skip
    assert config.reasoning_control == "chat_template_kwargs"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="reasoning_control"):
        model_config_from({"provider": "openai", "model": "m", "reasoning_control": "thinking"})
    with pytest.raises(ValueError, match="only of openai models"):
        model_config_from({"provider": "tgi", "endpoints": ["http://h"],
                           "reasoning_control": "none"})  # fmt: skip


# -- what a run is told at its start -------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "asked", "notes"),
    [
        ("o3-mini", {}, [
            "temperature 0.6 and top_p 0.9 not sent: o3-mini, an OpenAI reasoning model, takes "
            f"only their defaults ({PARAMETER_RULES})",
            "repetition_penalty 1.1 not sent: OpenAI's API has no multiplicative repetition "
            "penalty",
        ]),
        ("gpt-5.1", {"reasoning_effort": "low", "top_p": 1.0, "logprobs": True,
                     "repetition_penalty": None}, [
            "temperature 0.6 not sent: gpt-5.1, an OpenAI reasoning model, takes only their "
            f"defaults; it takes them at --reasoning-effort none ({PARAMETER_RULES})",
            "logprobs not sent: gpt-5.1, an OpenAI reasoning model, returns none; it takes them "
            f"at --reasoning-effort none ({PARAMETER_RULES})",
        ]),
        # Sent as asked: nothing to say (max_completion_tokens is the same limit, renamed).
        ("gpt-5.1", {"reasoning_effort": "none", "repetition_penalty": 1.0}, []),
        ("o3-mini", {"temperature": 1.0, "top_p": 1.0, "repetition_penalty": None}, []),
        ("gpt-4o", {"repetition_penalty": None}, []),
    ],
)  # fmt: skip
async def test_what_is_not_sent_as_asked_is_said_in_one_sentence_each(
    model: str, asked: dict[str, Any], notes: list[str], openai_host: None
) -> None:
    fake = FakeOpenAI(_thinker, openai_rules=True, model_ids=(model,))
    with serving(fake.app()) as srv:
        async with _model(srv.base_url, model, "aiohttp") as b:
            assert b.param_notes(GenerationParams(**asked)) == notes


async def test_an_open_server_says_what_its_control_cannot_pass_on() -> None:
    fake = FakeOpenAI(_thinker)
    with serving(fake.app()) as srv:
        async with _model(srv.base_url, "qwen3", "aiohttp", repetition_penalty_field=None,
                          reasoning_control="chat_template_kwargs") as b:  # fmt: skip
            notes = b.param_notes(GenerationParams(reasoning_effort="high"))
            quiet = b.param_notes(GenerationParams(reasoning_effort="none", repetition_penalty=1))
    assert notes == [
        "reasoning effort high sent as enable_thinking true: qwen3's chat template switches "
        "thinking on or off only (reasoning_control chat_template_kwargs)",
        "repetition_penalty 1.1 not sent: this model's repetition_penalty_field is unset (its "
        "server takes none)",
    ]
    assert quiet == []


BUDGET_NOTE = (
    "thinking budget {} sent as thinking_token_budget: honoured only by vLLM started with "
    "--reasoning-config and ignored by llama.cpp (which takes a budget at launch only, "
    "--reasoning-budget), so on llama.cpp cells that differ only in their budget are the "
    "same run"
)


@pytest.mark.parametrize(
    ("control", "budget", "noted"),
    [
        ("reasoning_effort", 2048, True),
        ("reasoning_effort", 0, True),  # sent as thinking_token_budget 0 too
        ("chat_template_kwargs", 2048, True),
        ("chat_template_kwargs", 0, False),  # sent as enable_thinking false, which both take
    ],
)
async def test_a_thinking_budget_on_an_open_server_says_who_honours_it(
    control: str, budget: int, noted: bool
) -> None:
    fake = FakeOpenAI(_thinker, model_ids=("qwen3",))
    with serving(fake.app()) as srv:
        async with _model(srv.base_url, "qwen3", "aiohttp", reasoning_control=control) as b:
            asked = GenerationParams(thinking_budget=budget)
            notes = b.param_notes(asked)
            await b.complete(ASK, asked)
    assert notes == ([BUDGET_NOTE.format(budget)] if noted else [])
    assert ("thinking_token_budget" in fake.requests[-1]) == noted


# -- the embedded llama.cpp server -----------------------------------------------------------


@pytest.fixture
def embedded_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """The embedded model's server stood in for by a loopback server that speaks as llama.cpp's
    does without a reasoning parser: a thinking model's tags come back in the content. It is
    handed to hpt the way a running server is (HPT_LOCAL_SERVER)."""
    from hpt.backends import local

    fake = FakeOpenAI(lambda body: f"<think>\n{THOUGHT}\n</think>\n\n{ANSWER}",
                      api_key="no-key", model_ids=(LOCAL_MODEL_NAME,))  # fmt: skip
    with serving(fake.app()) as srv:
        monkeypatch.setenv(local.SERVER_ENV, srv.base_url)
        monkeypatch.setattr(local, "find_gguf", lambda: Path("smollm2.gguf"))
        yield fake


async def test_the_embedded_servers_inline_thinking_reaches_the_backend_and_is_set_apart(
    embedded_on: FakeOpenAI,
) -> None:
    async with backend(provider="local") as b:
        out = await b.complete(ASK, GenerationParams())
        with pytest.raises(SettingRefused) as refused:
            b.sent_params(GenerationParams(reasoning_effort="low"))
    assert (out.text, out.reasoning) == (ANSWER, THOUGHT)
    assert len(embedded_on.requests) == 1
    # The same refusal as TGI's and the HF router's (errors.refuse_reasoning), its own reason.
    assert str(refused.value) == (
        f"the embedded model ({LOCAL_MODEL_NAME}) does not reason and takes no reasoning effort "
        "or thinking budget; drop --reasoning-effort and --thinking-budget, or evaluate a "
        "reasoning model"
    )
