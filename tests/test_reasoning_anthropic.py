"""Claude's thinking through the official SDK against the local Messages API server: thinking
blocks read apart from the answer (redacted ones noted, omitted text kept signed), thinking
tokens, truncation inside the thinking and inside the answer, each generation's thinking form
(from the table by name, or from the Models API's capabilities when served), the settings a
model cannot take refused before any call, sampling parameters kept off thinking requests,
and earlier thinking blocks sent back unchanged in a multi-turn conversation."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

from hpt.backends import BackendError, FatalBackendError, GenerationParams, Message
from hpt.backends.anthropic_thinking import rules_for, table_rules, thinking_fields
from hpt.backends.errors import SettingRefused
from hpt.orchestrator import RunSpec, run_evaluation
from hpt.results.reader import read_records
from tests.backend_helpers import FAST_RETRY, backend, serving
from tests.servers import anthropic_api as api
from tests.servers.answer_key import KeyedResponder
from tests.servers.anthropic_api import Claude, FakeAnthropic
from tests.test_depthqa_runs import Scripted, write_graph

KEY = "test-anthropic-key"
ASK = [Message(role="system", content="Be brief."), Message(role="user", content="6 x 7?")]
# The thinking names a wrong answer, the answer the right one.
WRONG_THEN_RIGHT = "<think>Maybe 49. So the answer is 49. No: 6 x 7 is 42.</think>**42**"
GENERATIONS = {
    "claude-3-5-sonnet-20241022": api.SONNET_3_5,
    "claude-haiku-4-5-20251001": api.SONNET_4_5,
    "claude-haiku-4-5": api.SONNET_4_5,
    "claude-opus-4-5": api.OPUS_4_5,
    "claude-opus-4-6": api.OPUS_4_6,
    "claude-opus-4-7": api.OPUS_4_7,
    "claude-opus-5": api.OPUS_5,
    "claude-fable-5": api.FABLE_5,
    "claude-sonnet-5-5": api.SONNET_5_5,
}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def _fake(reply: str = WRONG_THEN_RIGHT, **extra: Any) -> FakeAnthropic:
    return FakeAnthropic(responder=lambda body: reply, claude=dict(GENERATIONS), **extra)


async def _complete(
    fake: FakeAnthropic, model: str, messages: list[Message] = ASK, **params: Any
) -> Any:
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model=model, endpoints=[srv.root_url]) as b:
            return await b.complete(messages, GenerationParams(**params))


def _body(fake: FakeAnthropic, i: int = -1) -> dict[str, Any]:
    return fake.requests[i][1]


# -- reading -----------------------------------------------------------------------------


async def test_thinking_is_read_apart_from_the_answer_with_its_tokens() -> None:
    fake = _fake()
    out = await _complete(fake, "claude-haiku-4-5-20251001", thinking_budget=2000,
                          max_tokens=4000)  # fmt: skip
    assert out.text == "**42**"  # the answer only: what readers read
    assert out.reasoning == "Maybe 49. So the answer is 49. No: 6 x 7 is 42."
    [block] = out.reasoning_blocks
    assert block["type"] == "thinking" and block["thinking"] == out.reasoning
    assert block["signature"]  # kept, to be sent back
    assert out.usage.reasoning_tokens == 13 and out.usage.completion_tokens == 14
    assert out.finish_reason == "end_turn" and not out.truncated
    assert out.params == {"max_tokens": 4000,
                          "thinking": {"type": "enabled", "budget_tokens": 2000, "display": "summarized"}}  # fmt: skip
    assert {k: _body(fake)[k] for k in out.params} == out.params  # what went on the wire


async def test_redacted_thinking_is_noted_and_kept() -> None:
    fake = _fake(redact=True)
    out = await _complete(fake, "claude-opus-4-6", reasoning_effort="high")
    assert out.text == "**42**"
    assert out.reasoning == "Maybe 49. So the answer is 49. No: 6 x 7 is 42.\n\n[redacted thinking]"
    assert [b["type"] for b in out.reasoning_blocks] == ["thinking", "redacted_thinking"]
    assert out.reasoning_blocks[1]["data"]


async def test_thinking_turned_on_is_asked_to_show_its_text() -> None:
    # Opus 4.7 and later return their thinking signed but empty unless asked to show it; hpt
    # asks, so the attempt records it.
    fake = _fake()
    out = await _complete(fake, "claude-opus-4-7", reasoning_effort="low")
    assert _body(fake)["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert (
        out.text == "**42**" and out.reasoning == "Maybe 49. So the answer is 49. No: 6 x 7 is 42."
    )
    assert out.usage.reasoning_tokens == 13


async def test_omitted_thinking_has_no_text_but_keeps_its_signed_block_and_tokens() -> None:
    # A model thinking unasked (hpt sends no thinking setting) omits the text by default.
    out = await _complete(_fake(), "claude-fable-5")
    assert out.text == "**42**" and out.reasoning is None
    assert out.reasoning_blocks[0]["thinking"] == "" and out.reasoning_blocks[0]["signature"]
    assert out.usage.reasoning_tokens == 13


async def test_a_model_thinking_unasked_is_read_the_same() -> None:
    out = await _complete(_fake(), "claude-fable-5")
    assert out.text == "**42**" and out.reasoning_blocks and out.usage.reasoning_tokens == 13
    assert "thinking" not in out.params and "temperature" not in out.params


async def test_no_thinking_asked_reads_as_before() -> None:
    fake = _fake("plain 42")
    out = await _complete(fake, "claude-haiku-4-5-20251001")
    assert (out.text, out.reasoning, out.reasoning_blocks) == ("plain 42", None, None)
    assert out.usage.reasoning_tokens is None
    assert not {"thinking", "output_config"} & set(_body(fake))


async def test_cut_off_inside_the_thinking_has_no_answer() -> None:
    fake = _fake("<think>" + "step " * 3000 + "</think>42")
    out = await _complete(fake, "claude-haiku-4-5-20251001", thinking_budget=1024,
                          max_tokens=2000)  # fmt: skip
    assert out.truncated and out.finish_reason == "max_tokens"
    assert out.text == "" and out.reasoning is not None and out.reasoning.count("step") == 2000
    assert out.usage.reasoning_tokens == out.usage.completion_tokens == 2000


async def test_cut_off_inside_the_answer_keeps_the_thinking() -> None:
    fake = _fake("<think>" + "ok " * 10 + "</think>" + "word " * 100)
    out = await _complete(fake, "claude-opus-4-7", reasoning_effort="medium", max_tokens=50)
    assert out.truncated and out.text == " ".join(["word"] * 40)
    assert out.usage.reasoning_tokens == 10 and out.usage.completion_tokens == 50


# -- what is sent, by generation ---------------------------------------------------------


SENT = [
    # budget form only: an effort becomes hpt's budget for it; "none" turns thinking off
    ("claude-haiku-4-5-20251001", {"reasoning_effort": "low", "max_tokens": 2048},
     {"thinking": {"type": "enabled", "budget_tokens": 1024, "display": "summarized"}}),
    ("claude-haiku-4-5-20251001", {"reasoning_effort": "none"}, {"thinking": {"type": "disabled"}}),
    ("claude-haiku-4-5-20251001", {"thinking_budget": 0}, {"thinking": {"type": "disabled"}}),
    # Opus 4.5: the budget form, and its effort beside it
    ("claude-opus-4-5", {"reasoning_effort": "high", "max_tokens": 20000},
     {"thinking": {"type": "enabled", "budget_tokens": 16384, "display": "summarized"}, "output_config": {"effort": "high"}}),
    # 4.6: both forms
    ("claude-opus-4-6", {"reasoning_effort": "max"},
     {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "max"}}),
    ("claude-opus-4-6", {"thinking_budget": 2048, "max_tokens": 4096},
     {"thinking": {"type": "enabled", "budget_tokens": 2048, "display": "summarized"}}),
    # Opus 4.7 and the 5 family: adaptive only
    ("claude-opus-4-7", {"reasoning_effort": "xhigh"},
     {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "xhigh"}}),
    ("claude-opus-4-7", {"reasoning_effort": "none"}, {"thinking": {"type": "disabled"}}),
    ("claude-opus-5", {"reasoning_effort": "high", "thinking_budget": 0},
     {"thinking": {"type": "disabled"}, "output_config": {"effort": "high"}}),
    ("claude-fable-5", {"reasoning_effort": "low"},
     {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "low"}}),
    ("claude-sonnet-5-5", {"reasoning_effort": "none"}, {"thinking": {"type": "between_tools"}}),
    # no thinking at all: nothing to turn off
    ("claude-3-5-sonnet-20241022", {"reasoning_effort": "none"}, {}),
]  # fmt: skip


@pytest.mark.parametrize(("model", "params", "thinking"), SENT)
async def test_each_generation_is_sent_its_own_thinking_form(
    model: str, params: dict[str, Any], thinking: dict[str, Any]
) -> None:
    fake = _fake()
    out = await _complete(fake, model, **params)  # the server enforces the same rules
    expected = {"max_tokens": params.get("max_tokens", 1024), **thinking}
    assert out.params == expected
    body = _body(fake)
    assert {k: body[k] for k in expected} == expected
    assert not {"thinking", "output_config"} - set(expected) & set(body)


REFUSED = [
    ("claude-haiku-4-5-20251001", {"reasoning_effort": "medium"},
     "--max-tokens 1024 is not above effort medium's 4096: raise it above the budget of each"),
    ("claude-haiku-4-5-20251001", {"reasoning_effort": "xhigh", "max_tokens": 40000},
     "takes --reasoning-effort none, low, medium, high, not xhigh"),
    ("claude-haiku-4-5-20251001", {"thinking_budget": 512, "max_tokens": 4000},
     "below the smallest thinking budget, 1024 tokens"),
    ("claude-haiku-4-5-20251001", {"thinking_budget": 2000},
     "--thinking-budget 2000 with --max-tokens 1024"),
    ("claude-haiku-4-5-20251001", {"thinking_budget": 2000, "reasoning_effort": "low",
                                    "max_tokens": 4000}, "not both"),
    ("claude-opus-4-6", {"reasoning_effort": "xhigh"}, "none, low, medium, high, max, not xhigh"),
    ("claude-opus-4-6", {"reasoning_effort": "minimal"}, "not minimal"),
    ("claude-opus-4-7", {"thinking_budget": 2048, "max_tokens": 4096},
     "takes adaptive thinking only"),
    ("claude-opus-5", {"reasoning_effort": "max", "thinking_budget": 0},
     "only at effort high or below"),
    ("claude-fable-5", {"reasoning_effort": "none"}, "always thinks"),
    ("claude-fable-5", {"thinking_budget": 0}, "always thinks"),
    ("claude-3-5-sonnet-20241022", {"reasoning_effort": "low"}, "has no extended thinking"),
    ("claude-opus-4-6", {"reasoning_effort": "none", "thinking_budget": 2048}, "give one of them"),
    ("claude-test-1", {"reasoning_effort": "high"}, "does not know which thinking form"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "params", "says"), REFUSED)
async def test_settings_a_model_cannot_take_are_refused_before_any_call(
    model: str, params: dict[str, Any], says: str
) -> None:
    fake = _fake()
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model=model, endpoints=[srv.root_url]) as b:
            with pytest.raises(SettingRefused, match=says.replace("-", r"\-")) as err:
                b.sent_params(GenerationParams(**params))
            with pytest.raises(FatalBackendError):  # stops the run
                await b.complete(ASK, GenerationParams(**params))
    assert fake.requests == []
    assert model in str(err.value) and "\n" not in str(err.value)


async def test_an_effort_refused_for_its_budget_names_every_effort_so_one_retry_serves() -> None:
    # A run asking three efforts checks each cell in turn: the first refusal must say what
    # max_tokens all of them need, not only the first's.
    fake = _fake()
    efforts = ("low", "medium", "high")
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model="claude-haiku-4-5",
                           endpoints=[srv.root_url]) as b:  # fmt: skip
            with pytest.raises(SettingRefused) as refused:
                for effort in efforts:
                    b.sent_params(GenerationParams(reasoning_effort=effort))
            for effort in efforts:  # the one retry the message asks for
                b.sent_params(GenerationParams(reasoning_effort=effort, max_tokens=16385))
    assert str(refused.value) == (
        "claude-haiku-4-5 thinks within a token budget, which hpt sets by effort (low 1024, "
        "medium 4096, high 16384 tokens) and which must be below max_tokens, as max_tokens "
        "counts the thinking too (https://platform.claude.com/docs/build-with-claude/thinking); "
        "--max-tokens 1024 is not above effort low's 1024: raise it above the budget of each "
        "effort you ask"
    )


THINKING = "(https://platform.claude.com/docs/build-with-claude/thinking)"


@pytest.mark.parametrize(
    ("budget", "max_tokens", "says"),
    [
        (8192, 4096, "claude-haiku-4-5: --thinking-budget 8192 with --max-tokens 4096: a "
         f"thinking budget must be below max_tokens, which counts the thinking too {THINKING}; "
         "raise --max-tokens above 8192 or lower the budget"),
        (512, 4096, "claude-haiku-4-5: --thinking-budget 512 is below the smallest thinking "
         f"budget, 1024 tokens {THINKING}; raise it to 1024 or more"),
        (512, 1024, "claude-haiku-4-5: --thinking-budget 512 is below the smallest thinking "
         f"budget, 1024 tokens {THINKING}; raise it to 1024 or more and --max-tokens above it"),
    ],
)  # fmt: skip
def test_a_budget_out_of_bounds_is_told_only_the_fix_that_applies(
    budget: int, max_tokens: int, says: str
) -> None:
    with pytest.raises(SettingRefused) as refused:
        thinking_fields(
            "claude-haiku-4-5",
            table_rules("claude-haiku-4-5"),
            GenerationParams(thinking_budget=budget, max_tokens=max_tokens),
        )
    assert str(refused.value) == says


def test_a_budget_for_adaptive_thinking_only_cites_the_adaptive_thinking_page() -> None:
    with pytest.raises(SettingRefused) as refused:
        thinking_fields(
            "claude-opus-4-7",
            table_rules("claude-opus-4-7"),
            GenerationParams(thinking_budget=2048, max_tokens=4096),
        )
    assert str(refused.value) == (
        "claude-opus-4-7 takes adaptive thinking only, which has no token budget "
        "(https://platform.claude.com/docs/de/build-with-claude/adaptive-thinking); use "
        "--reasoning-effort (none, low, medium, high, xhigh, max)"
    )


async def test_the_models_api_capabilities_win_over_the_table() -> None:
    # The table says Opus 4.6 takes the budget form; this endpoint says it does not, and
    # that an unknown name takes adaptive thinking at two efforts.
    served = {
        "claude-opus-4-6": Claude(enabled=False, adaptive=True, efforts=("low", "high"),
                                  capabilities=True),
        "claude-internal-x": Claude(enabled=False, adaptive=True, disabled=False,
                                    efforts=("low", "high"), capabilities=True),
    }  # fmt: skip
    fake = FakeAnthropic(responder=lambda body: WRONG_THEN_RIGHT, claude=served)
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model="claude-opus-4-6",
                           endpoints=[srv.root_url]) as b:  # fmt: skip
            with pytest.raises(SettingRefused, match="takes adaptive thinking only"):
                b.sent_params(GenerationParams(thinking_budget=2048, max_tokens=4096))
            with pytest.raises(SettingRefused, match="none, low, high, not max"):
                b.sent_params(GenerationParams(reasoning_effort="max"))
        async with backend(provider="anthropic", model="claude-internal-x",
                           endpoints=[srv.root_url]) as b:  # fmt: skip
            out = await b.complete(ASK, GenerationParams(reasoning_effort="high"))
            with pytest.raises(SettingRefused, match="low, high, not medium"):
                b.sent_params(GenerationParams(reasoning_effort="medium"))
            with pytest.raises(SettingRefused, match="always thinks"):
                b.sent_params(GenerationParams(reasoning_effort="none"))
    assert out.text == "**42**" and out.params["output_config"] == {"effort": "high"}
    # Whether it refuses sampling parameters the API does not say: adaptive only, so it does.
    assert rules_for("claude-internal-x", api.OPUS_4_7.capability_json()).fixed_sampling  # type: ignore[union-attr]


async def test_without_capabilities_the_table_stands() -> None:
    fake = _fake()  # no model here serves capabilities
    out = await _complete(fake, "claude-opus-4-6", thinking_budget=2048, max_tokens=4096)
    assert out.params["thinking"] == {
        "type": "enabled",
        "budget_tokens": 2048,
        "display": "summarized",
    }
    # what the table holds for names it has never seen served
    assert table_rules("us.anthropic.claude-opus-4-6-v1:0") == table_rules("claude-opus-4-6")
    assert table_rules("claude-opus-4-20250514") == table_rules("claude-opus-4-1-20250805")
    assert table_rules("claude-3-7-sonnet-20250219") == table_rules("claude-haiku-4-5")
    assert table_rules("claude-opus-4-8") == table_rules("claude-opus-4-7")
    assert table_rules("claude-fable-5-2") == table_rules("claude-opus-5-5")
    assert table_rules("claude-3-opus-20240229") == table_rules("claude-3-5-haiku-latest")
    assert table_rules("claude-opus-6") is None and table_rules("claude-test-1") is None
    with pytest.raises(SettingRefused):
        thinking_fields("claude-opus-6", None, GenerationParams(reasoning_effort="high"))


# -- sampling parameters -----------------------------------------------------------------


async def _legacy(fake: FakeAnthropic, model: str, **params: Any) -> tuple[Any, list[str]]:
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model=model, endpoints=[srv.root_url],
                           anthropic_version="2023-06-01") as b:  # fmt: skip
            given = GenerationParams(**params)
            return await b.complete(ASK, given), b.param_notes(given)


async def test_legacy_version_sends_no_temperature_with_thinking_and_says_so() -> None:
    fake = _fake()
    out, notes = await _legacy(fake, "claude-opus-4-6", reasoning_effort="high")
    assert "temperature" not in _body(fake) and "temperature" not in out.params
    assert notes == [
        "temperature 0.6 not sent: with thinking on, Claude takes no temperature "
        "(https://platform.claude.com/docs/build-with-claude/thinking)",
        "top_p 0.9 not sent: Claude models refuse temperature and top_p together",
    ]
    # Without thinking the same model takes the paper's temperature, as before.
    plain, notes = await _legacy(fake, "claude-opus-4-6")
    assert _body(fake)["temperature"] == plain.params["temperature"] == 0.6
    assert notes == ["top_p 0.9 not sent: Claude models refuse temperature and top_p together"]


async def test_legacy_version_sends_no_temperature_to_models_that_refuse_it() -> None:
    fake = _fake()
    for model in ("claude-opus-4-7", "claude-fable-5"):  # off unless asked; always thinking
        out, notes = await _legacy(fake, model, temperature=0.3, top_p=1.0)
        assert out.text == "**42**" and "temperature" not in _body(fake)
        assert notes == [f"temperature 0.3 not sent: {model} takes no sampling parameters other "
                         "than their defaults (https://platform.claude.com/docs/en/about-claude/"
                         "models/whats-new-claude-4-7#sampling-parameters-removed)"]  # fmt: skip


async def test_current_version_says_the_paper_sampling_is_not_sent() -> None:
    fake = _fake()
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model="claude-opus-4-6",
                           endpoints=[srv.root_url]) as b:  # fmt: skip
            [note] = b.param_notes(GenerationParams())
            assert b.param_notes(GenerationParams(temperature=1.0, top_p=1.0)) == []
            [high] = b.param_notes(GenerationParams(temperature=1.5, top_p=1.0))
    assert note.startswith("temperature 0.6 and top_p 0.9 not sent: Anthropic's API takes")
    assert "2023-06-01" in note and high.startswith("temperature 1.5 not sent")
    _, notes = await _legacy(fake, "claude-haiku-4-5", temperature=1.5, top_p=1.0)
    assert _body(fake)["temperature"] == 1.0
    assert notes == ["temperature 1.5 sent as 1: Anthropic's temperature runs from 0 to 1"]


async def test_current_version_does_not_point_a_model_refusing_sampling_to_the_legacy_one() -> None:
    fake = _fake()
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model="claude-opus-4-7",
                           endpoints=[srv.root_url]) as b:  # fmt: skip
            notes = b.param_notes(GenerationParams())
    assert notes == [
        "temperature 0.6 and top_p 0.9 not sent: claude-opus-4-7 takes no sampling parameters "
        "other than their defaults (https://platform.claude.com/docs/en/about-claude/models/"
        "whats-new-claude-4-7#sampling-parameters-removed)"
    ]


@pytest.mark.parametrize(
    ("model", "effort", "note"),
    [
        ("claude-haiku-4-5", "high", "reasoning effort high sent as a thinking budget of 16384 "
         "tokens: claude-haiku-4-5 takes no effort setting (hpt's mapping: low 1024, medium "
         "4096, high 16384 tokens)"),
        ("claude-opus-4-5", "low", "reasoning effort low sent as a thinking budget of 1024 "
         "tokens beside effort low: claude-opus-4-5 thinks within a token budget (hpt's "
         "mapping: low 1024, medium 4096, high 16384 tokens)"),
        ("claude-opus-4-6", "high", None),  # adaptive: Anthropic's own effort high
        ("claude-haiku-4-5", "none", None),  # thinking off
    ],
)  # fmt: skip
async def test_an_effort_sent_as_a_budget_is_said_at_the_start(
    model: str, effort: str, note: str | None
) -> None:
    fake = _fake()
    # The API's own sampling defaults: no sampling note beside the one looked for.
    asked = GenerationParams(reasoning_effort=effort, max_tokens=20000, temperature=1, top_p=1)
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model=model, endpoints=[srv.root_url]) as b:
            notes = b.param_notes(asked)
    assert notes == ([note] if note else [])


# -- the server's rules, through the SDK -------------------------------------------------


async def test_the_server_refuses_what_the_api_refuses() -> None:
    fake = _fake()
    with serving(fake.app()) as srv:
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url=srv.root_url, max_retries=0)
        legacy = anthropic.AsyncAnthropic(api_key=KEY, base_url=srv.root_url, max_retries=0,
                                          default_headers={"anthropic-version": "2023-06-01"})  # fmt: skip
        ask: Any = [{"role": "user", "content": "6 x 7?"}]

        async def refused(c: anthropic.AsyncAnthropic, model: str, **kw: Any) -> str:
            with pytest.raises(anthropic.BadRequestError) as err:
                await c.messages.create(model=model, max_tokens=kw.pop("max_tokens", 2000),
                                        messages=ask, **kw)  # fmt: skip
            return str(err.value.body["error"]["message"])  # type: ignore[index]

        enabled: Any = {"type": "enabled", "budget_tokens": 1024, "display": "summarized"}
        assert await refused(client, "claude-fable-5", thinking=enabled) == (
            '"thinking.type.enabled" is not supported for this model. Use '
            '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
        )
        assert "thinking.type.disabled" in await refused(client, "claude-fable-5",
                                                         thinking={"type": "disabled"})  # fmt: skip
        assert await refused(client, "claude-haiku-4-5", max_tokens=1024, thinking=enabled
                             ) == ("`max_tokens` must be greater than `thinking.budget_tokens`. "
                                   "Please consult our documentation at "
                                   f"{api.DOCS}#max-tokens-and-context-window-size")  # fmt: skip
        small: Any = {"type": "enabled", "budget_tokens": 1000, "display": "summarized"}
        assert "greater than or equal to 1024" in await refused(client, "claude-haiku-4-5",
                                                                thinking=small)  # fmt: skip
        assert (await refused(legacy, "claude-haiku-4-5", thinking=enabled,
                              extra_body={"temperature": 0.6})).startswith(
            "`temperature` may only be set to 1 when thinking is enabled")  # fmt: skip
        assert "deprecated" in await refused(legacy, "claude-opus-4-7",
                                             extra_body={"temperature": 0.6})  # fmt: skip
        assert "does not support the effort" in await refused(
            client, "claude-haiku-4-5", output_config={"effort": "low"})  # fmt: skip
        assert "when thinking is disabled" in await refused(
            client, "claude-opus-5", thinking={"type": "disabled"},
            output_config={"effort": "max"})  # fmt: skip
        # Capabilities are served only for the models that opt in.
        described = FakeAnthropic(claude={"claude-x": Claude(capabilities=True)})
        with serving(described.app()) as other:
            own = anthropic.AsyncAnthropic(api_key=KEY, base_url=other.root_url, max_retries=0)
            info = await own.models.retrieve("claude-x")
            plain = await own.models.retrieve("claude-test-1")
            await own.close()
        await client.close()
        await legacy.close()
    assert info.capabilities is not None and info.capabilities.thinking.types.enabled.supported
    assert not info.capabilities.thinking.types.adaptive.supported
    assert plain.capabilities is None


# -- multi-turn ----------------------------------------------------------------------------


async def test_earlier_thinking_blocks_go_back_unchanged_and_a_changed_one_is_refused() -> None:
    fake = _fake(redact=True)
    params = GenerationParams(reasoning_effort="high")
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model="claude-opus-4-6",
                           endpoints=[srv.root_url]) as b:  # fmt: skip
            first = await b.complete(ASK, params)
            turn = Message(role="assistant", content=first.text,
                           reasoning_blocks=first.reasoning_blocks)  # fmt: skip
            again = [*ASK, turn, Message(role="user", content="And 6 x 8?")]
            second = await b.complete(again, params)
            tampered = copy.deepcopy(first.reasoning_blocks)
            tampered[0]["thinking"] = "So the answer is 49."
            forged = turn.model_copy(update={"reasoning_blocks": tampered})
            with pytest.raises(BackendError) as err:
                await b.complete([*ASK, forged, again[-1]], params)
    assert second.text == "**42**"
    sent = _body(fake)["messages"][1]
    assert sent == {"role": "assistant",
                    "content": [*first.reasoning_blocks, {"type": "text", "text": "**42**"}]}  # fmt: skip
    assert "messages.1.content.0: Invalid `signature` in `thinking` block" in str(err.value)


class ThinkingScripted(Scripted):
    """DepthQA's scripted answers, each after a thought naming a wrong depth."""

    def __call__(self, body: dict[str, Any]) -> str:
        answer = super().__call__(body)
        return f"<think>Perhaps depth 9. No.</think>{answer}"


async def test_a_multi_turn_depthqa_run_sends_each_turns_thinking_back(tmp_path: Path) -> None:
    fake = FakeAnthropic(ThinkingScripted(), claude={"claude-fable-5": api.FABLE_5}, redact=True)
    with serving(fake.app()) as srv:
        spec = RunSpec.model_validate(
            {"dataset": "depthqa", "graph": write_graph(tmp_path / "graph"),
             "depth_mode": "multi-turn", "model": "anthropic:claude-fable-5",
             "base_url": srv.root_url, "out": tmp_path / "run", "cache": False}
        )  # fmt: skip
        await run_evaluation(spec)
    records = {r.node_id: r for r in read_records(tmp_path / "run")}
    assert len(records) == 6 and all(r.error is None for r in records.values())
    assert records["e"].prediction == "answer at depth 3"
    # e's conversation: c's and d's turns, each with the thinking blocks it came with.
    [turns] = [b["messages"] for _, b in fake.requests
               if len(b["messages"]) == 5 and "central limit" in json.dumps(b["messages"][-1])]  # fmt: skip
    for turn in (turns[1], turns[3]):
        kinds = [block["type"] for block in turn["content"]]
        assert kinds == ["thinking", "redacted_thinking", "text"]
        assert turn["content"][-1]["text"].startswith("answer at depth 2")


# -- runs ----------------------------------------------------------------------------------


def _boolq(srv: Any, data_dir: Path, out: Path, model: str, **extra: Any) -> RunSpec:
    return RunSpec.model_validate(
        {"dataset": "boolq", "model": f"anthropic:{model}", "limit": 4, "data_dir": data_dir,
         "out": out, "base_url": srv.root_url, "retry": FAST_RETRY, "cache": False, **extra}
    )  # fmt: skip


async def test_efforts_are_cells_and_each_attempt_keeps_its_thinking(
    data_dir: Path, boolq_answers: dict[str, str], tmp_path: Path
) -> None:
    keyed = KeyedResponder(boolq_answers, "role")

    def responder(body: dict[str, Any]) -> str:  # the thinking weighs the wrong verdict
        answer = keyed(body)
        return f"<think>At first sight: {'False' if 'True' in answer else 'True'}.</think>{answer}"

    fake = FakeAnthropic(responder, claude={"claude-opus-4-6": api.OPUS_4_6})
    with serving(fake.app()) as srv:
        await run_evaluation(_boolq(srv, data_dir, tmp_path / "run", "claude-opus-4-6",
                                    reasoning_effort=["low", "high"]))  # fmt: skip
    records = list(read_records(tmp_path / "run"))
    assert sorted(r.reasoning_effort or "" for r in records) == ["high"] * 4 + ["low"] * 4
    assert all(r.resolved_level == 1 for r in records)  # read from the answer alone
    for r in records:
        [call] = r.attempts[0].calls
        assert call.reasoning is not None and call.reasoning.startswith("At first sight")
        assert call.params == {"max_tokens": 1024, "thinking": {"type": "adaptive", "display": "summarized"},
                               "output_config": {"effort": r.reasoning_effort}}  # fmt: skip
        assert r.reasoning_tokens == 4
    assert sorted(b["output_config"]["effort"] for _, b in fake.requests) == ["high"] * 4 + [
        "low"] * 4  # fmt: skip


async def test_a_run_cut_off_while_thinking_says_so(data_dir: Path, tmp_path: Path) -> None:
    fake = FakeAnthropic(lambda body: "<think>" + "hmm " * 100 + "</think>True",
                         claude={"claude-opus-4-7": api.OPUS_4_7})  # fmt: skip
    with serving(fake.app()) as srv:
        await run_evaluation(_boolq(srv, data_dir, tmp_path / "run", "claude-opus-4-7",
                                    reasoning_effort=["low"], params={"max_tokens": 50}))  # fmt: skip
    records = list(read_records(tmp_path / "run"))
    assert records and all(r.resolved_level is None for r in records)
    assert {a.truncated for r in records for a in r.attempts} == {"thinking"}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())["cells"][0]
    assert sum(summary["truncated"].values()) == sum(len(r.attempts) for r in records)


async def test_a_setting_the_model_cannot_take_stops_the_run_before_any_call(
    data_dir: Path, tmp_path: Path
) -> None:
    fake = FakeAnthropic(claude={"claude-opus-4-6": api.OPUS_4_6})
    with serving(fake.app()) as srv:
        with pytest.raises(FatalBackendError, match="not xhigh"):
            await run_evaluation(_boolq(srv, data_dir, tmp_path / "run", "claude-opus-4-6",
                                        reasoning_effort=["xhigh"]))  # fmt: skip
    assert fake.requests == []
