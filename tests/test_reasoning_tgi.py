"""Reasoning models behind Text Generation Inference, through the backend every run uses
(open_backend): TGI has no reasoning parser, so the thinking comes back inline on its chat
and /generate routes and the backend sets it apart; a cut at the token limit is a
truncation; TGI's API has no reasoning controls, so an effort or budget is refused."""

from __future__ import annotations

from typing import Any

import pytest

from hpt.backends import FatalBackendError, GenerationParams, Message, SettingRefused
from tests.backend_helpers import backend, serving
from tests.servers.hf_router import hf_app
from tests.servers.openai_compat import FakeOpenAI, Reply
from tests.servers.tgi import FakeTGI

ASK = [Message(role="user", content="What is 6 x 7?")]
THOUGHT = "Six sevens: I first thought 49 but 7 x 7 is 49, so 6 x 7 is 42"  # 18 words
ANSWER = "The answer is 42."


def _thinker(body: dict[str, Any]) -> str:
    return f"<think>\n{THOUGHT}\n</think>\n\n{ANSWER}"


ROUTES = pytest.mark.parametrize("template", [True, False], ids=["chat", "generate"])


@ROUTES
@pytest.mark.parametrize(
    ("limit", "reasoning", "text", "finish"),
    [
        (1024, THOUGHT, ANSWER, "stop"),
        # Cut inside the thinking ("<think>" is a word): no answer at all.
        (5, "Six sevens: I first", "", "length"),
        # Cut inside the answer: the thinking whole, the answer begun.
        (22, THOUGHT, "The answer", "length"),
    ],
    ids=["whole", "cut-in-thinking", "cut-in-answer"],
)
async def test_inline_thinking_is_set_apart_and_a_cut_is_a_truncation(
    template: bool, limit: int, reasoning: str, text: str, finish: str
) -> None:
    fake = FakeTGI(responder=_thinker, chat_template=template, cuts_at_limit=True)
    with serving(fake.app()) as srv:
        async with backend(provider="tgi", endpoints=[srv.root_url]) as b:
            out = await b.complete(ASK, GenerationParams(max_tokens=limit))
    assert (out.text, out.reasoning) == (text, reasoning)
    assert out.finish_reason == finish and out.truncated == (finish == "length")
    assert out.usage.reasoning_tokens is None  # TGI does not count them
    assert fake.violations == []
    assert fake.requests[-1][0] == ("/v1/chat/completions" if template else "/")


@ROUTES
@pytest.mark.parametrize(
    "asked", [{"reasoning_effort": "high"}, {"thinking_budget": 0}], ids=["effort", "budget"]
)
async def test_tgi_refuses_reasoning_settings_before_any_call(
    template: bool, asked: dict[str, Any]
) -> None:
    fake = FakeTGI(responder=_thinker, chat_template=template)
    params = GenerationParams(**asked)
    with serving(fake.app()) as srv:
        async with backend(provider="tgi", endpoints=[srv.root_url]) as b:
            if not template:  # the transport learns the server has no template
                await b.complete(ASK, GenerationParams())
            fake.requests.clear()
            with pytest.raises(SettingRefused) as refused:
                b.sent_params(params)
            with pytest.raises(FatalBackendError) as failed:
                await b.complete(ASK, params)
    message = str(refused.value)
    assert message == (
        "test-org/test-model-awq: TGI's API has no reasoning controls (no reasoning effort or "
        "thinking budget); drop --reasoning-effort and --thinking-budget, or serve the model "
        "with vLLM or llama.cpp and evaluate it as openai:MODEL with --base-url"
    )
    assert message in str(failed.value)
    assert fake.requests == []


async def test_a_pool_of_tgi_replicas_refuses_them_too() -> None:
    fakes = [FakeTGI(responder=_thinker), FakeTGI(responder=_thinker)]
    with serving(fakes[0].app()) as a, serving(fakes[1].app()) as b_srv:
        async with backend(provider="tgi", endpoints=[a.root_url, b_srv.root_url]) as b:
            with pytest.raises(SettingRefused):
                b.sent_params(GenerationParams(reasoning_effort="low"))
            out = await b.complete(ASK, GenerationParams())
    assert (out.text, out.reasoning) == (ANSWER, THOUGHT)


async def test_tgi_says_what_it_does_not_send_as_asked() -> None:
    fake = FakeTGI(responder=_thinker, max_total_tokens=4096)
    with serving(fake.app()) as srv:
        async with backend(provider="tgi", endpoints=[srv.root_url]) as b:
            chat = b.param_notes(GenerationParams(max_tokens=5000))
            quiet = b.param_notes(GenerationParams(repetition_penalty=1.0))
    assert chat == [
        "repetition_penalty 1.1 not sent: the chat API of TGI and the Hugging Face router has "
        "no repetition penalty (TGI's /generate has)",
        "max_tokens 5000 sent as 4095: the server's max_total_tokens is 4096",
    ]
    assert quiet == []

    plain = FakeTGI(responder=_thinker, chat_template=False)
    with serving(plain.app()) as srv:
        async with backend(provider="tgi", endpoints=[srv.root_url]) as b:
            await b.complete(ASK, GenerationParams())
            # /generate takes the repetition penalty: nothing to say.
            assert b.param_notes(GenerationParams()) == []


@pytest.mark.parametrize(
    ("form", "counted"),
    [("reasoning", True), ("reasoning_content", False), ("inline", False)],
    ids=["vllm", "llama.cpp", "no-parser"],
)
async def test_the_hf_routers_providers_thinking_is_read_apart(
    monkeypatch: pytest.MonkeyPatch, form: Any, counted: bool
) -> None:
    # The router passes on its provider's answer: a vLLM provider's reasoning field (which
    # huggingface_hub parses), llama.cpp's reasoning_content, or inline tags.
    import huggingface_hub.constants as hub

    token = "hf_router_test_token"
    fake = FakeOpenAI(lambda body: Reply(ANSWER, THOUGHT), api_key=token,
                      model_ids=("org/model",), reasoning_format=form,
                      counts_reasoning=counted)  # fmt: skip
    with serving(hf_app(fake)) as srv:
        monkeypatch.setattr(hub, "ENDPOINT", srv.root_url)
        monkeypatch.setattr(hub, "INFERENCE_PROXY_TEMPLATE", srv.root_url + "/{provider}")
        monkeypatch.setenv("HF_TOKEN", token)
        async with backend(provider="hf", model="org/model", hf_provider="hf-inference") as b:
            out = await b.complete(ASK, GenerationParams())
            cut = await b.complete(ASK, GenerationParams(max_tokens=5))
    assert (out.text, out.reasoning) == (ANSWER, THOUGHT)
    assert out.usage.reasoning_tokens == (18 if counted else None)
    assert (cut.text, cut.reasoning, cut.truncated) == ("", "Six sevens: I first thought", True)
