"""The providers' Batch APIs as hpt's transports offer them (``batch_api()``), against the
loopback servers through the official SDKs: each request the exact body a direct call
sends, submit / status / results / cancel / find, answers read as a direct call's (usage by
token class too), and every failure classed: per request (transient or not) and of the
batch endpoints themselves (retry, wrong key, no Batch API at all)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

from hpt.backends import GenerationParams, ManagedBackend, Message, openai_batch
from hpt.backends.batch_api import BatchAPI, BatchStatus, RequestFailed
from hpt.backends.batch_errors import BatchGone, CannotTell, SubmitUnsure, never_sent
from hpt.backends.errors import BackendError, FatalBackendError, TransientError
from hpt.types import Completion
from tests.backend_helpers import backend, serving
from tests.servers.anthropic_api import FakeAnthropic
from tests.servers.batches import BatchTiming, Expire
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.servers.tgi import FakeTGI

FAST = BatchTiming(validating_s=0.02, in_progress_s=0.06, finalizing_s=0.02, cancelling_s=0.02)
# One of four requests answered every 0.5 s: a cancel 0.6 s in finds one or more answered
# (and, unless the machine stalls for over a second, not all).
SLOW = BatchTiming(validating_s=0.0, in_progress_s=2.0, cancelling_s=0.05)
PARAMS = GenerationParams(max_tokens=32)
CLAUDE = "claude-opus-5"


def echo(body: dict[str, Any]) -> str:
    last = body["messages"][-1]["content"]
    text = last if isinstance(last, str) else "".join(b["text"] for b in last)
    return f"echo: {text[-12:]}"


def ask(text: str) -> list[Message]:
    return [Message(role="system", content="Be brief."), Message(role="user", content=text)]


async def ended(api: BatchAPI, batch_id: str) -> tuple[BatchStatus, list[str]]:
    """Polls a batch until it ends: its last status and every state seen."""
    seen: list[str] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        status = await api.status(batch_id)
        if not seen or seen[-1] != status.state:
            seen.append(status.state)
        if status.phase != "in_progress":
            return status, seen
        await asyncio.sleep(0.01)
    raise AssertionError(f"batch {batch_id} did not end: {seen}")


def failures(results: dict[str, Completion | RequestFailed]) -> dict[str, tuple[str, bool]]:
    return {k: (r.message, r.transient) for k, r in results.items() if isinstance(r, RequestFailed)}


# -- OpenAI --------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def openai_batches(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, client: str = "aiohttp"
) -> AsyncIterator[tuple[ManagedBackend, BatchAPI]]:
    monkeypatch.setenv("OPENAI_API_KEY", fake.api_key)
    with serving(fake.app()) as srv:
        async with backend(provider="openai", model=fake.model_ids[0], endpoints=[srv.base_url],
                           client=client) as b:  # fmt: skip
            api = b.transport.batch_api()  # type: ignore[attr-defined]
            assert api is not None
            yield b, api


@pytest.mark.parametrize("client", ["sdk", "aiohttp"])
async def test_an_openai_batch_answers_as_direct_calls(
    monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    fake = FakeOpenAI(echo, batch_timing=FAST)
    prompts = {f"id{i}": ask(f"question {i}?") for i in range(3)}
    async with openai_batches(fake, monkeypatch, client) as (b, api):
        direct = {k: await b.complete(m, PARAMS, cache_seed=k) for k, m in prompts.items()}
        requests = [api.request(k, m, PARAMS) for k, m in prompts.items()]
        # Each line: the body the direct call sent, to the route it went to.
        assert [r["body"] for r in requests] == fake.requests
        assert {(r["method"], r["url"]) for r in requests} == {("POST", "/v1/chat/completions")}
        batch_id = await api.submit(requests, "local-1")
        status, seen = await ended(api, batch_id)
        assert (status.phase, status.state) == ("ended", "completed")
        assert seen[0] in ("validating", "in_progress") and "completed" not in seen[:-1]
        assert status.counts == {"total": 3, "completed": 3, "failed": 0}
        results = await api.results(batch_id)
        assert await api.find("local-1") == batch_id
        assert await api.find("local-2") is None
    assert fake.ledger.submitted == dict.fromkeys(prompts, 1)
    assert fake.direct_calls == 3  # the batch made none
    for k, out in results.items():
        assert isinstance(out, Completion)
        assert (out.text, out.finish_reason, out.usage) == (
            direct[k].text, direct[k].finish_reason, direct[k].usage)  # fmt: skip
        assert out.params is None  # filled by batch mode, which knows what it sent
    assert set(results) == set(prompts)


async def test_openai_batched_usage_has_its_token_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    # GPT-5 models read the prompt cache in batches: the direct call wrote the prefix.
    fake = FakeOpenAI(echo, model_ids=("gpt-5",), batch_timing=FAST, cache_min_tokens=64,
                      cache_step=1)  # fmt: skip
    head = " ".join(f"w{i}" for i in range(100))
    async with openai_batches(fake, monkeypatch) as (b, api):
        await b.complete([Message(role="user", content=head + " first?")], PARAMS)
        line = api.request("k", [Message(role="user", content=head + " second?")], PARAMS)
        batch_id = await api.submit([line], "local")
        await ended(api, batch_id)
        [out] = (await api.results(batch_id)).values()
    assert isinstance(out, Completion)
    assert (out.usage.prompt_tokens, out.usage.cache_read_tokens) == (101, 100)


async def test_openai_per_request_failures_are_classed(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeOpenAI(echo, batch_timing=FAST)
    codes = {"flaky": 500, "limited": 429, "broken": 400}
    fake.batch_faults.request_error = lambda custom_id, body: codes.get(custom_id)
    async with openai_batches(fake, monkeypatch) as (_, api):
        lines = [api.request(k, ask(k), PARAMS) for k in ("fine", *codes)]
        batch_id = await api.submit(lines, "local")
        status, _ = await ended(api, batch_id)
        results = await api.results(batch_id)
    assert status.counts == {"total": 4, "completed": 1, "failed": 3}
    assert isinstance(results["fine"], Completion) and results["fine"].text == "echo: fine"
    failed = failures(results)
    assert {k: transient for k, (_, transient) in failed.items()} == {
        "flaky": True, "limited": True, "broken": False}  # fmt: skip
    assert all(message.startswith(f"HTTP {codes[k]}") for k, (message, _) in failed.items())


async def test_an_expired_openai_batch_keeps_its_answers_and_the_rest_go_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeOpenAI(echo, batch_timing=FAST)
    fake.batch_faults.batch.append(Expire(answered=1))
    async with openai_batches(fake, monkeypatch) as (_, api):
        batch_id = await api.submit([api.request(f"r{i}", ask(f"{i}"), PARAMS) for i in range(3)],
                                    "local")  # fmt: skip
        status, _ = await ended(api, batch_id)
        results = await api.results(batch_id)
    assert (status.phase, status.state) == ("ended", "expired")
    assert isinstance(results["r0"], Completion)
    assert {k: t for k, (m, t) in failures(results).items() if "batch_expired" in m} == {
        "r1": True, "r2": True}  # fmt: skip


async def test_a_failed_openai_batch_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeOpenAI(echo, batch_timing=FAST)
    fake.batch_faults.batch.append("fail")
    async with openai_batches(fake, monkeypatch) as (_, api):
        batch_id = await api.submit([api.request("a", ask("a"), PARAMS)], "local")
        status, _ = await ended(api, batch_id)
        assert await api.results(batch_id) == {}
    assert (status.phase, status.state) == ("failed", "failed")
    assert status.error and "token" in status.error


async def test_a_cancelled_openai_batch_ends_with_what_it_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeOpenAI(echo, batch_timing=SLOW)
    async with openai_batches(fake, monkeypatch) as (_, api):
        batch_id = await api.submit([api.request(f"r{i}", ask(f"{i}"), PARAMS) for i in range(4)],
                                    "local")  # fmt: skip
        await asyncio.sleep(0.6)
        await api.cancel(batch_id)
        status, seen = await ended(api, batch_id)
        results = await api.results(batch_id)
    assert seen[0] == "cancelling" and (status.phase, status.state) == ("ended", "cancelled")
    answered = [k for k, r in results.items() if isinstance(r, Completion)]
    assert 1 <= len(answered) <= 3 and set(results) == {f"r{i}" for i in range(4)}
    assert {t for m, t in failures(results).values() if "batch_cancelled" in m} == {True}
    assert len(failures(results)) == 4 - len(answered)


async def test_find_reads_past_the_first_page(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeOpenAI(echo, batch_timing=FAST)
    async with openai_batches(fake, monkeypatch) as (_, api):
        first = await api.submit([api.request("a", ask("a"), PARAMS)], "the-first")
        for i in range(100):  # a page holds 100: the first is on the second page
            await api.submit([api.request("a", ask("a"), PARAMS)], f"later-{i}")
        assert await api.find("the-first") == first


async def test_find_searches_back_to_when_the_batch_was_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run resumed days after it was killed while submitting: its batch is found behind
    other old ones; where the list is too long to read back that far, find cannot tell."""
    fake = FakeOpenAI(echo, batch_timing=FAST)
    async with openai_batches(fake, monkeypatch) as (_, api):
        line = [api.request("a", ask("a"), PARAMS)]
        target = await api.submit(line, "killed-while-submitting")
        other = await api.submit(line, "a-later-run")
        for i in range(3):
            await api.submit(line, f"recent-{i}")
        now = time.time()
        fake._batches[target].work.created = now - 3 * 86400 - 60  # made three days ago
        fake._batches[other].work.created = now - 3 * 86400
        made = datetime.fromtimestamp(now - 3 * 86400 - 61, UTC)  # its journal entry's time
        an_hour_ago = datetime.fromtimestamp(now - 3600, UTC)
        assert await api.find("killed-while-submitting", made) == target
        assert await api.find("never-sent", None) is None  # the whole list read
        monkeypatch.setattr(openai_batch, "FIND_AT_MOST", 4)
        with pytest.raises(CannotTell) as cut:
            await api.find("killed-while-submitting", made)
        # Not submitted: the search ends at the first batch made before then (the fourth).
        assert await api.find("never-sent", an_hour_ago) is None
        with pytest.raises(CannotTell):
            await api.find("never-sent", None)
    assert str(cut.value) == (
        "the search of openai's batches for it stopped at the newest 4, made back to "
        f"{datetime.fromtimestamp(int(now - 3 * 86400), UTC):%Y-%m-%d %H:%M} UTC, before "
        "reaching its creation"
    )


async def test_openai_batch_endpoint_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeOpenAI(echo, batch_timing=FAST)
    async with openai_batches(fake, monkeypatch) as (_, api):
        line = api.request("a", ask("a"), PARAMS)
        fake.batch_faults.create.extend([500, 429])
        for _ in range(2):
            with pytest.raises(TransientError):
                await api.submit([line], "local")
        batch_id = await api.submit([line], "local")
        fake.api_key = "another-key"
        with pytest.raises(FatalBackendError, match="OPENAI_API_KEY"):
            await api.status(batch_id)
    assert fake.ledger.create_calls == 3 and len(fake.ledger.batches) == 1


async def test_a_batch_endpoint_that_cannot_be_reached_is_transient(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    server = ServerThread(FakeOpenAI(echo).app()).start()
    async with backend(provider="openai", model="test-model", endpoints=[server.base_url]) as b:
        api = b.transport.batch_api()  # type: ignore[attr-defined]
        server.stop()
        with pytest.raises(TransientError, match=r"batch batch_1: (timed out|connection failed)"):
            await api.status("batch_1")


async def test_a_server_without_a_batch_api_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "any")
    tgi = FakeTGI()
    with serving(tgi.app()) as srv:
        async with backend(provider="openai", model="tgi", endpoints=[srv.root_url + "/v1"]) as b:
            api = b.transport.batch_api()  # type: ignore[attr-defined]
            with pytest.raises(FatalBackendError, match=r"has no Batch API .*run without --batch"):
                await api.submit([api.request("a", ask("a"), PARAMS)], "local")


# -- Anthropic ------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _anthropic_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")


@contextlib.asynccontextmanager
async def anthropic_batches(
    fake: FakeAnthropic, **config: Any
) -> AsyncIterator[tuple[ManagedBackend, BatchAPI]]:
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model=fake.model_ids[0],
                           endpoints=[srv.root_url], **config) as b:  # fmt: skip
            yield b, b.transport.batch_api()  # type: ignore[attr-defined]


def claude(**kw: Any) -> FakeAnthropic:
    return FakeAnthropic(responder=echo, model_ids=(CLAUDE,), batch_timing=FAST, **kw)


async def test_a_message_batch_answers_as_direct_calls_with_their_cache_marks() -> None:
    fake = claude()
    head = "Solve the problem step by step. " * 100  # 800 tokens (600 words): Opus 5 caches it
    prompts = {f"id{i}": [Message(role="user", content=f"{head}Q{i}?", shared_prefix=len(head))]
               for i in range(3)}  # fmt: skip
    async with anthropic_batches(fake) as (b, api):
        direct = await b.complete(prompts["id0"], PARAMS, cache_seed="d")
        requests = [api.request(k, m, PARAMS) for k, m in prompts.items()]
        # The direct call's body, prompt-cache marks included.
        assert requests[0] == {"custom_id": "id0", "params": fake.requests[-1][1]}
        assert requests[0]["params"]["messages"][0]["content"][0]["cache_control"]
        batch_id = await api.submit(requests, "local")
        status, seen = await ended(api, batch_id)
        results = await api.results(batch_id)
        assert await api.find("local") is None  # no metadata to find it by
    assert (status.phase, seen[0], seen[-1]) == ("ended", "in_progress", "ended")
    assert status.counts == {"processing": 0, "succeeded": 3, "errored": 0, "canceled": 0,
                             "expired": 0}  # fmt: skip
    assert fake.ledger.submitted == dict.fromkeys(prompts, 1)
    first = results["id0"]
    assert isinstance(first, Completion) and first.params is None
    assert (first.text, first.finish_reason) == (direct.text, direct.finish_reason)
    # The direct call wrote the shared prefix; every batched request read it.
    shared = len(head.split())
    assert (direct.usage.cache_write_tokens, direct.usage.cache_read_tokens) == (shared, 0)
    for out in results.values():
        assert isinstance(out, Completion)
        assert (out.usage.cache_read_tokens, out.usage.cache_write_tokens) == (shared, 0)
        assert out.usage.prompt_tokens == shared + 1 == direct.usage.prompt_tokens


async def test_a_legacy_versions_temperature_goes_in_the_batch_params() -> None:
    fake = FakeAnthropic(responder=echo, batch_timing=FAST)  # claude-test-1 takes sampling
    async with anthropic_batches(fake, anthropic_version="2023-06-01") as (b, api):
        await b.complete(ask("hot?"), GenerationParams(max_tokens=8, temperature=0.3))
        line = api.request("a", ask("hot?"), GenerationParams(max_tokens=8, temperature=0.3))
        assert line["params"] == fake.requests[-1][1] and line["params"]["temperature"] == 0.3
        batch_id = await api.submit([line], "local")
        await ended(api, batch_id)
        [out] = (await api.results(batch_id)).values()
    assert isinstance(out, Completion) and out.text == "echo: hot?"


async def test_message_batch_failures_are_classed() -> None:
    fake = claude()
    codes = {"flaky": 500, "busy": 529, "broken": 400}
    fake.batch_faults.request_error = lambda custom_id, params: codes.get(custom_id)
    async with anthropic_batches(fake) as (_, api):
        batch_id = await api.submit([api.request(k, ask(k), PARAMS) for k in ("fine", *codes)],
                                    "local")  # fmt: skip
        await ended(api, batch_id)
        results = await api.results(batch_id)
        fake.batch_faults.batch.append(Expire(answered=1))
        expired_id = await api.submit([api.request(f"r{i}", ask(f"{i}"), PARAMS)
                                       for i in range(3)], "local-2")  # fmt: skip
        await ended(api, expired_id)
        expired = await api.results(expired_id)
    assert isinstance(results["fine"], Completion)
    failed = failures(results)
    assert {k: t for k, (_, t) in failed.items()} == {"flaky": True, "busy": True,
                                                      "broken": False}  # fmt: skip
    assert failed["flaky"][0].startswith("api_error") and failed["busy"][0].startswith(
        "overloaded_error") and failed["broken"][0].startswith("invalid_request_error")  # fmt: skip
    assert sum(isinstance(r, Completion) for r in expired.values()) == 1
    assert sorted(failures(expired).values()) == [("expired", True)] * 2


async def test_a_canceled_message_batch_ends_with_what_it_answered() -> None:
    fake = claude()
    fake.batch_timing = SLOW
    async with anthropic_batches(fake) as (_, api):
        batch_id = await api.submit([api.request(f"r{i}", ask(f"{i}"), PARAMS)
                                     for i in range(4)], "local")  # fmt: skip
        await asyncio.sleep(0.6)
        await api.cancel(batch_id)
        status, seen = await ended(api, batch_id)
        results = await api.results(batch_id)
    assert seen == ["canceling", "ended"]
    answered = sum(isinstance(r, Completion) for r in results.values())
    assert 1 <= answered <= 3 and status.counts["succeeded"] == answered
    assert set(failures(results).values()) == {("canceled", True)}


async def test_message_batch_endpoint_errors() -> None:
    fake = claude()
    async with anthropic_batches(fake) as (_, api):
        line = api.request("a", ask("a"), PARAMS)
        fake.batch_faults.create.extend([500, 529])
        for _ in range(2):
            with pytest.raises(TransientError):
                await api.submit([line], "local")
        batch_id = await api.submit([line], "local")
        with pytest.raises(TransientError, match="finished processing"):
            await api.results(batch_id)  # asked too early
        fake.api_key = "another-key"
        with pytest.raises(FatalBackendError, match="ANTHROPIC_API_KEY"):
            await api.status(batch_id)
    assert fake.ledger.create_calls == 3


async def test_an_anthropic_endpoint_without_message_batches_says_so() -> None:
    # A proxy speaking the Messages API only (here the OpenAI-compatible server, which
    # serves no /v1/messages/batches).
    fake = FakeOpenAI(echo, api_key="test-anthropic-key")
    with serving(fake.app()) as srv:
        async with backend(provider="anthropic", model=CLAUDE, endpoints=[srv.root_url]) as b:
            api = b.transport.batch_api()  # type: ignore[attr-defined]
            with pytest.raises(FatalBackendError, match=r"has no Batch API .*run without --batch"):
                await api.submit([api.request("a", ask("a"), PARAMS)], "local")


# -- what a failure means for the batch ----------------------------------------------------


async def test_a_create_that_may_have_made_the_batch_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 5xx or a connection dropped after sending: the batch may exist (hpt looks for it
    before submitting again); overloaded, rate-limited, refused: nothing was made."""
    fake = FakeOpenAI(echo, batch_timing=FAST)
    async with openai_batches(fake, monkeypatch) as (_, api):
        line = api.request("a", ask("a"), PARAMS)
        fake.batch_faults.create.extend([502, "drop", 500, 503, 429])
        kinds = []
        for _ in range(5):
            with pytest.raises(TransientError) as failed:
                await api.submit([line], "local")
            kinds.append(type(failed.value))
    assert kinds == [SubmitUnsure] * 3 + [TransientError] * 2


async def test_a_message_batch_create_that_may_have_made_it_says_so() -> None:
    fake = claude()
    srv = ServerThread(fake.app()).start()
    async with backend(provider="anthropic", model=CLAUDE, endpoints=[srv.root_url]) as b:
        api = b.transport.batch_api()  # type: ignore[attr-defined]
        line = api.request("a", ask("a"), PARAMS)
        fake.batch_faults.create.extend([500, "drop", 529, 429])
        kinds = []
        for _ in range(4):
            with pytest.raises(TransientError) as failed:
                await api.submit([line], "local")
            kinds.append(type(failed.value))
        srv.stop()  # refused: nothing can have been made
        # (The first try may go out on a kept-alive connection the server closed: unsure.)
        for _ in range(2):
            with pytest.raises(TransientError) as refused:
                await api.submit([line], "local")
    assert kinds == [SubmitUnsure, SubmitUnsure, TransientError, TransientError]
    assert type(refused.value) is TransientError and never_sent(refused.value.__cause__)


async def test_an_openai_batch_the_provider_no_longer_has_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeOpenAI(echo, batch_timing=FAST)
    async with openai_batches(fake, monkeypatch) as (_, api):
        batch_id = await api.submit([api.request("a", ask("a"), PARAMS)], "local")
        await ended(api, batch_id)
        output = fake._batches[batch_id].output_file_id
        assert output is not None
        del fake._files[output]  # output files are deleted 30 days after completion
        with pytest.raises(BackendError) as failed:
            await api.results(batch_id)
        del fake._batches[batch_id]
        with pytest.raises(BackendError) as failed_too:
            await api.status(batch_id)
    for error in (failed.value, failed_too.value):
        assert isinstance(error, BatchGone)  # its requests are asked again
        assert str(error).startswith(f"batch {batch_id} is gone at openai (HTTP 404: ")


async def test_a_message_batch_the_provider_no_longer_has_is_gone() -> None:
    fake = claude()
    async with anthropic_batches(fake) as (b, api):
        batch_id = await api.submit([api.request("a", ask("a"), PARAMS)], "local")
        await ended(api, batch_id)
        await b.transport.client.messages.batches.delete(batch_id)  # type: ignore[attr-defined]
        errors = []
        for call in (api.status, api.results):
            with pytest.raises(BackendError) as failed:
                await call(batch_id)
            errors.append(failed.value)
    for error in errors:
        assert isinstance(error, BatchGone)  # its requests are asked again
        assert str(error).startswith(f"batch {batch_id} is gone at anthropic (HTTP 404: ")


async def test_message_batch_results_cut_off_midway_are_asked_again() -> None:
    fake = claude()
    cut = [True]

    @web.middleware
    async def cut_off(request: web.Request, handler: Any) -> web.StreamResponse:
        answer = await handler(request)
        if not (cut[0] and request.path.endswith("/results") and answer.status == 200):
            return answer
        cut[0] = False
        body = answer.body
        assert isinstance(body, bytes)
        stream = web.StreamResponse(headers={"Content-Type": "application/binary",
                                             "Content-Length": str(len(body))})  # fmt: skip
        await stream.prepare(request)
        await stream.write(body[: len(body) // 2])
        await asyncio.sleep(0.05)
        assert request.transport is not None
        request.transport.abort()  # the connection drops halfway through the results
        return stream

    app = fake.app()
    app.middlewares.append(cut_off)
    with serving(app) as srv:
        async with backend(provider="anthropic", model=CLAUDE, endpoints=[srv.root_url]) as b:
            api = b.transport.batch_api()  # type: ignore[attr-defined]
            batch_id = await api.submit([api.request(f"r{i}", ask("x" * 2000 + str(i)), PARAMS)
                                         for i in range(40)], "local")  # fmt: skip
            await ended(api, batch_id)
            with pytest.raises(TransientError, match=f"the results of message batch {batch_id}"):
                await api.results(batch_id)
            results = await api.results(batch_id)  # the next poll's try
    assert len(results) == 40 and all(isinstance(r, Completion) for r in results.values())
