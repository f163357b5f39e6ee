"""Contract tests: each provider against a local server that speaks its protocol."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest

from hpt.backends import BackendError, FatalBackendError, GenerationParams, Message
from tests.backend_helpers import backend, serving
from tests.servers.anthropic_api import FakeAnthropic
from tests.servers.openai_compat import FakeOpenAI
from tests.servers.tgi import FakeTGI

SYS_USER = [Message(role="system", content="You are terse."), Message(role="user", content="Hi?")]


def echo_last(body: dict) -> str:  # type: ignore[type-arg]
    return "echo: " + str(body["messages"][-1]["content"])


# -- OpenAI ------------------------------------------------------------------------------


OPENAI_CLIENTS = pytest.mark.parametrize("client", ["sdk", "aiohttp"])


@OPENAI_CLIENTS
async def test_openai_request_and_response(client: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=echo_last)
    with serving(fake.app()) as srv:
        async with backend(provider="openai", model="test-model", endpoints=[srv.base_url],
                           client=client) as b:  # fmt: skip
            out = await b.complete(SYS_USER, GenerationParams(seed=3, stop=["\n\n"], logprobs=True))
    assert out.text == "echo: Hi?" and out.finish_reason == "stop" and not out.cached
    assert out.usage.completion_tokens == 2 and out.logprobs == [-0.5, -0.5]
    body = fake.requests[0]
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (
        0.6,
        0.9,
        1024,
        3,
    )
    assert body["repetition_penalty"] == 1.1 and body["stop"] == ["\n\n"]
    assert b.stats.calls == 1 and b.stats.retries == 0


@OPENAI_CLIENTS
async def test_openai_bad_key_stops_the_run(client: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-123456")
    with serving(FakeOpenAI(responder=echo_last).app()) as srv:
        with pytest.raises(FatalBackendError) as err:
            async with backend(provider="openai", model="test-model", endpoints=[srv.base_url],
                               client=client):  # fmt: skip
                pass
    assert "OPENAI_API_KEY" in str(err.value) and "sk-wrong-key-123456" not in str(err.value)


async def test_openai_bad_request_is_a_sample_error_without_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=echo_last)
    with serving(fake.app()) as srv:
        async with backend(provider="openai", model="test-model", endpoints=[srv.base_url]) as b:
            with pytest.raises(BackendError) as err:
                await b.complete(
                    SYS_USER,
                    GenerationParams(temperature=2.0, top_p=1.0, max_tokens=1).model_copy(
                        update={"temperature": 2.5}
                    ),
                )
    assert "HTTP 400" in str(err.value) and not isinstance(err.value, FatalBackendError)
    assert b.stats.retries == 0 and b.stats.errors == 1


# -- Anthropic ---------------------------------------------------------------------------


async def test_anthropic_maps_system_and_omits_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")
    fake = FakeAnthropic(responder=echo_last)
    with serving(fake.app()) as srv:
        async with backend(
            provider="anthropic", model="claude-test-1", endpoints=[srv.root_url]
        ) as b:
            out = await b.complete(SYS_USER, GenerationParams(stop=["STOP"]))
    assert out.text == "echo: Hi?" and out.finish_reason == "end_turn"
    assert out.usage.prompt_tokens == 4 and out.usage.completion_tokens == 2
    headers, body = fake.requests[0]
    assert body["system"] == "You are terse." and body["messages"] == [
        {"role": "user", "content": "Hi?"}
    ]
    assert body["stop_sequences"] == ["STOP"] and body["max_tokens"] == 1024
    assert not {"temperature", "top_p", "top_k", "repetition_penalty"} & set(body)
    assert headers["anthropic-version"] == "2026-10-21"


async def test_anthropic_legacy_version_sends_clamped_temperature(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")
    fake = FakeAnthropic(responder=echo_last)
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model="claude-test-1", endpoints=[srv.root_url],
                           anthropic_version="2023-06-01") as b:  # fmt: skip
            await b.complete(SYS_USER, GenerationParams(temperature=1.5))
            await b.complete(SYS_USER, GenerationParams(temperature=0.6, seed=1))
    assert [body["temperature"] for _, body in fake.requests] == [1.0, 0.6]
    assert all("top_p" not in body for _, body in fake.requests)
    assert fake.requests[0][0]["anthropic-version"] == "2023-06-01"


async def test_anthropic_rate_limit_and_overload_are_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")
    fake = FakeAnthropic(responder=echo_last, faults=[429, 529, 500])
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model="claude-test-1", endpoints=[srv.root_url],
                           max_concurrency=8) as b:  # fmt: skip
            started = time.monotonic()
            out = await b.complete(SYS_USER, GenerationParams())
            waited = time.monotonic() - started
    assert out.text == "echo: Hi?"
    assert b.stats.retries == 3 and b.stats.rate_limited == 2
    # The 429 said the request budget resets in about a second.
    assert waited >= 0.5
    assert b.stats.concurrency is not None and b.stats.concurrency < 8


async def test_anthropic_missing_key_is_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with serving(FakeAnthropic().app()) as srv:
        with pytest.raises(FatalBackendError) as err:
            async with backend(
                provider="anthropic", model="claude-test-1", endpoints=[srv.root_url]
            ) as b:
                await b.complete(SYS_USER, GenerationParams())
    assert "ANTHROPIC_API_KEY" in str(err.value)


# -- TGI ---------------------------------------------------------------------------------


async def test_tgi_reads_info_and_speaks_chat() -> None:
    fake = FakeTGI(responder=echo_last, max_concurrent_requests=7)
    with serving(fake.app()) as srv:
        async with backend(provider="tgi", endpoints=[srv.root_url]) as b:
            out = await b.complete(SYS_USER, GenerationParams(temperature=0.0, top_p=1.0, seed=5))
            assert b.transport.model == "test-org/test-model-awq"
            assert b.stats.concurrency == 7  # max_concurrent_requests from /info
    assert out.text == "echo: Hi?" and out.usage.prompt_tokens == 4
    assert fake.violations == []
    path, body = fake.requests[-1]
    assert path == "/v1/chat/completions"
    assert body["temperature"] == 0.0 and "top_p" not in body and body["seed"] == 5


async def test_tgi_without_template_uses_generate_within_the_rules() -> None:
    fake = FakeTGI(responder=lambda body: "yes STOP5 more", chat_template=False)
    stops = ["STOP1", "STOP2", "STOP3", "STOP4", "STOP5", "STOP6"]
    with serving(fake.app()) as srv:
        async with backend(provider="tgi", endpoints=[srv.root_url]) as b:
            greedy = await b.complete(
                SYS_USER, GenerationParams(temperature=0.0, seed=0, stop=stops)
            )
            sampled = await b.complete(SYS_USER, GenerationParams(temperature=0.7, top_p=0.9))
    assert fake.violations == []
    generate = [body for path, body in fake.requests if path != "/v1/chat/completions"]
    assert len(generate) == 2
    g = generate[0]["parameters"]
    assert g["do_sample"] is False and "temperature" not in g and "seed" not in g
    assert g["stop"] == stops[:4] and g["max_new_tokens"] == 1024
    assert generate[0]["inputs"].startswith("System: You are terse.\n\nUser: Hi?")
    # The fifth stop string is applied here, since the server takes only four.
    assert greedy.text == "yes " and greedy.finish_reason == "stop"
    s = generate[1]["parameters"]
    assert s["do_sample"] is True and s["temperature"] == 0.7 and s["top_p"] == 0.9
    assert s["repetition_penalty"] == 1.1
    assert sampled.usage.prompt_tokens == 7 and sampled.usage.completion_tokens == 3


async def test_tgi_without_template_answers_requests_sent_before_it_knew() -> None:
    # Sent at once, all go to the chat route; each refusal sends its request to /generate.
    fake = FakeTGI(responder=lambda body: "yes", chat_template=False, delay_s=0.05)
    with serving(fake.app()) as srv:
        async with backend(provider="tgi", endpoints=[srv.root_url]) as b:
            outs = await asyncio.gather(
                *(b.complete(SYS_USER, GenerationParams(), cache_seed=str(i)) for i in range(4))
            )
    assert [o.text for o in outs] == ["yes"] * 4
    assert sorted(path for path, _ in fake.requests) == ["/"] * 4 + ["/v1/chat/completions"] * 4


async def test_tgi_long_prompts() -> None:
    fake = FakeTGI(responder=echo_last, max_input_tokens=50, max_total_tokens=60)
    with serving(fake.app()) as srv:
        async with backend(provider="tgi", endpoints=[srv.root_url]) as b:
            # Fits only with a smaller max_new_tokens: shrunk to the room left, once.
            fitted = await b.complete([Message(role="user", content="w " * 40)], GenerationParams())
            assert fitted.text.startswith("echo:")
            with pytest.raises(BackendError) as err:
                await b.complete([Message(role="user", content="w " * 80)], GenerationParams())
    assert "80 tokens" in str(err.value) and "max_input_tokens" in str(err.value)
    assert fake.violations == []
    assert [body["max_tokens"] for _, body in fake.requests] == [59, 20, 59]


@pytest.mark.parametrize(
    ("status", "retried"),
    [(424, True), (429, True), (500, True), ("drop", True), ("malformed", True), (None, False)],
)
async def test_tgi_error_statuses(status: int | str | None, retried: bool) -> None:
    fake = FakeTGI(responder=echo_last)
    if status is not None:
        fake.faults.extend([status])
    with serving(fake.app()) as srv:
        async with backend(provider="tgi", endpoints=[srv.root_url]) as b:
            out = await b.complete(SYS_USER, GenerationParams())
    assert out.text == "echo: Hi?"
    assert b.stats.retries == (1 if retried else 0)
    assert b.stats.rate_limited == (1 if status == 429 else 0)
    assert fake.violations == []


async def test_tgi_validation_error_is_not_retried() -> None:
    fake = FakeTGI(responder=echo_last)
    fake.faults.extend([422])
    with serving(fake.app()) as srv:
        async with backend(provider="tgi", endpoints=[srv.root_url]) as b:
            with pytest.raises(BackendError) as err:
                await b.complete(SYS_USER, GenerationParams())
    assert "422" in str(err.value) and b.stats.retries == 0


async def test_tgi_unreachable_is_fatal() -> None:
    with pytest.raises(FatalBackendError) as err:
        async with backend(provider="tgi", endpoints=["http://127.0.0.1:9"]):
            pass
    assert "cannot reach the TGI server" in str(err.value)


# -- replica pools -----------------------------------------------------------------------


async def test_pool_routes_by_outstanding_requests_and_survives_a_dead_replica() -> None:
    a, b_ = FakeTGI(responder=echo_last, delay_s=0.05), FakeTGI(responder=echo_last, delay_s=0.05)
    with serving(a.app()) as sa:
        sb = serving(b_.app())
        srv_b = sb.__enter__()
        port_b = srv_b.port
        async with backend(provider="tgi", endpoints=[sa.root_url, srv_b.root_url],
                           health_interval_s=0.1) as pool:  # fmt: skip
            assert pool.stats.concurrency == 256  # both replicas' max_concurrent_requests
            msgs = [Message(role="user", content=f"q{i}") for i in range(40)]
            outs = await asyncio.gather(*(pool.complete([m], GenerationParams()) for m in msgs))
            assert [o.text for o in outs] == [f"echo: q{i}" for i in range(40)]
            assert len(a.requests) == len(b_.requests) == 20  # least outstanding: an even split

            sb.__exit__(None, None, None)  # replica b dies mid-run
            outs = await asyncio.gather(
                *(pool.complete([m], GenerationParams()) for m in msgs[:20])
            )
            assert all(o.text.startswith("echo:") for o in outs)
            states = pool.transport.states  # type: ignore[attr-defined]
            assert [s.healthy for s in states] == [True, False]

            b2 = FakeTGI(responder=echo_last)
            with serving(b2.app(), port=port_b):  # and comes back on the same address
                for _ in range(50):
                    if all(s.healthy for s in states):
                        break
                    await asyncio.sleep(0.05)
                assert all(s.healthy for s in states)
                await asyncio.gather(*(pool.complete([m], GenerationParams()) for m in msgs[:10]))
                assert len(b2.requests) > 0


async def test_pool_takes_an_unhealthy_replica_out_of_rotation() -> None:
    a, b_ = FakeTGI(responder=echo_last), FakeTGI(responder=echo_last)
    with serving(a.app()) as sa, serving(b_.app()) as sb:
        async with backend(provider="tgi", endpoints=[sa.root_url, sb.root_url],
                           health_interval_s=0.05) as pool:  # fmt: skip
            b_.healthy = False
            await asyncio.sleep(0.3)
            before = len(b_.requests)
            for i in range(6):
                await pool.complete([Message(role="user", content=f"x{i}")], GenerationParams())
            assert len(b_.requests) == before


async def test_pool_replica_down_at_start_joins_when_it_comes_up() -> None:
    import socket

    with socket.socket() as s:  # a free port nobody listens on yet
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    a = FakeTGI(responder=echo_last)
    with serving(a.app()) as sa:
        async with backend(provider="tgi", endpoints=[sa.root_url, f"http://127.0.0.1:{port}"],
                           health_interval_s=0.05) as pool:  # fmt: skip
            states = pool.transport.states  # type: ignore[attr-defined]
            assert [s.healthy for s in states] == [True, False]
            late = FakeTGI(responder=echo_last)
            with serving(late.app(), port=port):
                for _ in range(60):
                    if states[1].healthy:
                        break
                    await asyncio.sleep(0.05)
                assert states[1].healthy and states[1].replica.model == a.model_id
                msgs = [Message(role="user", content=f"q{i}") for i in range(8)]
                await asyncio.gather(*(pool.complete([m], GenerationParams()) for m in msgs))
            assert late.requests


async def test_pool_refuses_replicas_of_different_models() -> None:
    a, b_ = FakeTGI(), FakeTGI(model_id="other/model")
    with serving(a.app()) as sa, serving(b_.app()) as sb:
        with pytest.raises(FatalBackendError) as err:
            async with backend(provider="tgi", endpoints=[sa.root_url, sb.root_url]):
                pass
    assert "different models" in str(err.value)


# -- Hugging Face inference providers ----------------------------------------------------


async def test_hf_inference_through_the_router(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants as hub

    from tests.servers.hf_router import hf_app

    token = "hf_router_test_token"
    fake = FakeOpenAI(responder=echo_last, api_key=token, model_ids=("org/model",))
    with serving(hf_app(fake)) as srv:
        monkeypatch.setattr(hub, "ENDPOINT", srv.root_url)
        monkeypatch.setattr(hub, "INFERENCE_PROXY_TEMPLATE", srv.root_url + "/{provider}")
        monkeypatch.setenv("HF_TOKEN", token)
        async with backend(provider="hf", model="org/model", hf_provider="hf-inference") as b:
            out = await b.complete(SYS_USER, GenerationParams(max_tokens=32, seed=2))
    assert out.text == "echo: Hi?" and out.usage.completion_tokens == 2
    body = fake.requests[0]
    assert body["max_tokens"] == 32 and body["seed"] == 2 and body["temperature"] == 0.6
    assert "repetition_penalty" not in body and "frequency_penalty" not in body


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (b'{"choices": [{"message": {"content": "caf\\u00e9 \\ud83d\\ude00"}}]}', "café 😀"),
        # A lone surrogate escape: pydantic-core's parser refuses it, Python's json reads it.
        (b'{"choices": [{"message": {"content": "x\\ud800"}}]}', "x\ud800"),
    ],
)
def test_chat_completions_read_what_json_reads(body: bytes, text: str) -> None:
    from hpt.backends.openai_protocol import parse_chat_completion

    completion = parse_chat_completion(body)
    assert completion.text == text and completion.usage.total_tokens == 0


def test_a_malformed_chat_completion_is_a_transient_fault() -> None:
    from hpt.backends.errors import TransientError
    from hpt.backends.openai_protocol import parse_chat_completion

    for body in (b"{", b'{"choices": []}', b'{"choices": [{"message": {"content": 3}}]}'):
        with pytest.raises(TransientError, match="malformed chat completion"):
            parse_chat_completion(body)


@OPENAI_CLIENTS
async def test_a_lone_surrogate_in_a_reply_becomes_a_replacement_character(
    client: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The fake server writes JSON as Python does: the lone half as the escape "\ud800".
    # Kept as it came, the completion could be neither cached nor recorded (not UTF-8).
    from hpt.backends import ResponseCache

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=lambda body: "caf\u00e9 \ud800 The answer is True.")
    async with ResponseCache(tmp_path / "cache.sqlite3") as cache:
        with serving(fake.app()) as srv:
            async with backend(cache=cache, provider="openai", model="test-model",
                               endpoints=[srv.base_url], client=client) as b:  # fmt: skip
                out = await b.complete(SYS_USER, GenerationParams())
                again = await b.complete(SYS_USER, GenerationParams())
    assert out.text == "caf\u00e9 \ufffd The answer is True."
    assert again.cached and again.text == out.text and fake.served == 1


# -- what was sent -------------------------------------------------------------------------


def _generation_fields(body: dict, drop: tuple[str, ...]) -> dict:  # type: ignore[type-arg]
    return {k: v for k, v in body.items() if k not in drop}


@OPENAI_CLIENTS
async def test_openai_completions_report_the_parameters_on_the_wire(
    client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=echo_last)
    params = GenerationParams(seed=3, stop=["\n\n"], logprobs=True)
    with serving(fake.app()) as srv:
        async with backend(provider="openai", model="test-model", endpoints=[srv.base_url],
                           client=client) as b:  # fmt: skip
            out = await b.complete(SYS_USER, params)
            predicted = b.sent_params(params)
    sent = _generation_fields(fake.requests[0], ("model", "messages"))
    assert out.params == predicted == sent
    assert sent == {"temperature": 0.6, "top_p": 0.9, "max_tokens": 1024, "seed": 3,
                    "stop": ["\n\n"], "logprobs": True, "repetition_penalty": 1.1}  # fmt: skip


@OPENAI_CLIENTS
async def test_parameters_a_provider_does_not_take_are_not_reported_as_sent(
    client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server configured without a repetition penalty (api.openai.com's rule), and an OpenAI
    # reasoning model, which takes neither temperature nor top_p, and max_completion_tokens.
    from hpt.backends import openai_protocol

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=echo_last, model_ids=("test-model", "o3-mini"))
    with serving(fake.app()) as srv:
        async with backend(provider="openai", model="test-model", endpoints=[srv.base_url],
                           client=client, repetition_penalty_field=None) as b:  # fmt: skip
            plain = await b.complete(SYS_USER, GenerationParams())
        monkeypatch.setattr(openai_protocol, "is_openai_host", lambda url: True)
        async with backend(provider="openai", model="o3-mini", endpoints=[srv.base_url],
                           client=client) as b:  # fmt: skip
            reasoning = await b.complete(SYS_USER, GenerationParams(seed=1))
    first, second = (_generation_fields(r, ("model", "messages")) for r in fake.requests)
    assert plain.params == first == {"temperature": 0.6, "top_p": 0.9, "max_tokens": 1024}
    assert reasoning.params == second == {"max_completion_tokens": 1024, "seed": 1}


async def test_anthropic_completions_report_the_parameters_on_the_wire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")
    fake = FakeAnthropic(responder=echo_last)
    with serving(fake.app()) as srv:
        async with backend(
            provider="anthropic", model="claude-test-1", endpoints=[srv.root_url]
        ) as b:
            out = await b.complete(SYS_USER, GenerationParams(stop=["STOP"], seed=4))
        async with backend(provider="anthropic", model="claude-test-1", endpoints=[srv.root_url],
                           anthropic_version="2023-06-01") as b:  # fmt: skip
            legacy = await b.complete(SYS_USER, GenerationParams(temperature=1.5))
    drop = ("model", "messages", "system")
    assert out.params == _generation_fields(fake.requests[0][1], drop)
    assert out.params == {"max_tokens": 1024, "stop_sequences": ["STOP"]}
    assert legacy.params == _generation_fields(fake.requests[1][1], drop)
    assert legacy.params == {"max_tokens": 1024, "temperature": 1.0}


async def test_tgi_completions_report_the_parameters_of_the_request_that_answered() -> None:
    chat = FakeTGI(responder=echo_last, max_input_tokens=50, max_total_tokens=60)
    plain = FakeTGI(responder=lambda body: "yes", chat_template=False)
    with serving(chat.app()) as srv:
        async with backend(provider="tgi", endpoints=[srv.root_url]) as b:
            # Sent once with 59 new tokens, refused, sent again with the 20 that fit.
            fitted = await b.complete([Message(role="user", content="w " * 40)], GenerationParams())
    with serving(plain.app()) as srv:
        async with backend(provider="tgi", endpoints=[srv.root_url]) as b:
            assert b.sent_params(GenerationParams())["max_tokens"] == 1024  # chat, until told
            generated = await b.complete(SYS_USER, GenerationParams(temperature=0.0))
            assert b.sent_params(GenerationParams()) == {
                "max_new_tokens": 1024, "do_sample": True, "temperature": 0.6, "top_p": 0.9,
                "repetition_penalty": 1.1,
            }  # fmt: skip
    assert fitted.params == {"max_tokens": 20, "temperature": 0.6, "top_p": 0.9}
    assert chat.requests[-1][1]["max_tokens"] == 20
    assert generated.params == {"max_new_tokens": 1024, "do_sample": False,
                                "repetition_penalty": 1.1}  # fmt: skip
    sent = plain.requests[-1][1]["parameters"]
    assert all(sent[k] == v for k, v in generated.params.items())
    assert not {"temperature", "top_p", "seed"} & set(sent)


async def test_a_cached_completion_says_what_was_sent_when_it_was_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from hpt.backends import Completion, ResponseCache

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=echo_last)
    path = tmp_path / "cache.sqlite3"
    with serving(fake.app()) as srv:
        config = {"provider": "openai", "model": "test-model", "endpoints": [srv.base_url]}
        async with ResponseCache(path) as cache, backend(cache=cache, **config) as b:
            made = await b.complete(SYS_USER, GenerationParams())
            key = b._key(SYS_USER, GenerationParams(), "old")
            # An entry written before completions said what was sent.
            await cache.put(key, "openai", "test-model", Completion(text="old"))
        async with ResponseCache(path) as cache, backend(cache=cache, **config) as b:
            again = await b.complete(SYS_USER, GenerationParams())
            old = await b.complete(SYS_USER, GenerationParams(), cache_seed="old")
    assert again.cached and fake.served == 1
    assert again.params == made.params == {"temperature": 0.6, "top_p": 0.9,
                                           "max_tokens": 1024, "repetition_penalty": 1.1}  # fmt: skip
    assert old.cached and old.text == "old" and old.params is None


# -- one request in flight -----------------------------------------------------------------


async def test_identical_requests_in_flight_are_sent_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from hpt.backends import ResponseCache

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    counter = iter(range(1000))
    fake = FakeOpenAI(responder=lambda body: f"reply {next(counter)}", delay_s=0.2)
    params = GenerationParams()
    with serving(fake.app()) as srv:
        for cache in (None, ResponseCache(tmp_path / "cache.sqlite3")):
            fake.requests.clear()
            async with contextlib.AsyncExitStack() as stack:
                if cache is not None:
                    await stack.enter_async_context(cache)
                b = await stack.enter_async_context(backend(
                    cache=cache, provider="openai", model="test-model", endpoints=[srv.base_url]
                ))  # fmt: skip
                same = [b.complete(SYS_USER, params, cache_seed="s1") for _ in range(3)]
                other = b.complete(SYS_USER, params, cache_seed="s2")
                *outs, apart = await asyncio.gather(*same, other)
            assert len(fake.requests) == 2  # s1 once, s2 once
            assert len({o.text for o in outs}) == 1 and apart.text != outs[0].text
            assert [(o.cached, o.shared) for o in outs] == [(False, False), (True, True),
                                                             (True, True)]  # fmt: skip
            assert outs[1].params == outs[0].params is not None
            assert b.stats.shared == 2 and b.stats.calls == 2 and b.stats.cache_hits == 0
            if cache is not None:  # asked again, answered by the cache: nobody's call
                cache = ResponseCache(tmp_path / "cache.sqlite3")
                async with cache, backend(cache=cache, provider="openai", model="test-model",
                                          endpoints=[srv.base_url]) as b:  # fmt: skip
                    again = await asyncio.gather(*(b.complete(SYS_USER, params, cache_seed="s1")
                                                   for _ in range(2)))  # fmt: skip
                # Saved by the cache, both: a report counts neither as paid.
                assert [(o.cached, o.shared) for o in again] == [(True, False)] * 2
                assert len(fake.requests) == 2


async def test_a_failure_in_flight_reaches_every_asker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=echo_last, delay_s=0.1, faults=[400])
    with serving(fake.app()) as srv:
        async with backend(provider="openai", model="test-model", endpoints=[srv.base_url]) as b:
            outcomes = await asyncio.gather(
                *(b.complete(SYS_USER, GenerationParams()) for _ in range(3)),
                return_exceptions=True,
            )
            # A failure is no answer: the next asker sends the request again.
            after = await b.complete(SYS_USER, GenerationParams())
    assert all(isinstance(o, BackendError) and "400" in str(o) for o in outcomes)
    assert len(fake.requests) == 2 and after.text == "echo: Hi?" and not after.cached


async def test_a_cancelled_asker_leaves_the_call_to_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=echo_last, delay_s=0.3)
    with serving(fake.app()) as srv:
        async with backend(provider="openai", model="test-model", endpoints=[srv.base_url]) as b:
            for leaving in (0, 1):  # the asker that sent the request, then one that shared it
                fake.requests.clear()
                askers = [asyncio.create_task(b.complete(SYS_USER, GenerationParams(),
                                                         cache_seed=f"s{leaving}"))
                          for _ in range(2)]  # fmt: skip
                await asyncio.sleep(0.1)
                askers[leaving].cancel()
                stayed = await askers[1 - leaving]
                assert askers[leaving].cancelled()
                assert stayed.text == "echo: Hi?" and len(fake.requests) == 1
            # When every asker leaves, the request is dropped; the next asker sends it again.
            lone = asyncio.create_task(b.complete(SYS_USER, GenerationParams(), cache_seed="x"))
            await asyncio.sleep(0.1)
            lone.cancel()
            await asyncio.sleep(0)
            assert not b._flights
            again = await b.complete(SYS_USER, GenerationParams(), cache_seed="x")
    assert again.text == "echo: Hi?" and not again.shared and fake.served >= 3
