"""The test servers' batch APIs and prompt caching, driven through the official SDKs:
OpenAI's Files + Batches (FakeOpenAI) and Anthropic's Message Batches (FakeAnthropic)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest

from tests.backend_helpers import serving
from tests.servers.anthropic_api import FakeAnthropic
from tests.servers.batches import BatchTiming, Expire
from tests.servers.openai_compat import FakeOpenAI

FAST = BatchTiming(validating_s=0.02, in_progress_s=0.06, finalizing_s=0.02, cancelling_s=0.02)
ENDED = {"completed", "failed", "expired", "cancelled"}


def counts(batch: Any) -> dict[str, int]:
    return dict(batch.request_counts.model_dump())


def echo(body: dict[str, Any]) -> str:
    return f"echo: {body['messages'][-1]['content']}"


def chat(text: str, model: str = "test-model", **params: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **params}


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def lines_of(requests: dict[str, dict[str, Any]], url: str = "/v1/chat/completions") -> bytes:
    return jsonl([{"custom_id": c, "method": "POST", "url": url, "body": b}
                  for c, b in requests.items()])  # fmt: skip


# ---- OpenAI: Files + Batches


@contextlib.asynccontextmanager
async def openai_client(fake: FakeOpenAI, **kw: Any) -> AsyncIterator[openai.AsyncOpenAI]:
    with serving(fake.app()) as server:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key=fake.api_key,
                                      max_retries=kw.pop("max_retries", 0), **kw) as client:  # fmt: skip
            yield client


@pytest.fixture
def fake() -> FakeOpenAI:
    return FakeOpenAI(echo, batch_timing=FAST)


@pytest.fixture
async def client(fake: FakeOpenAI) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai_client(fake) as c:
        yield c


async def submit(client: openai.AsyncOpenAI, data: bytes, **kw: Any) -> Any:
    file = await client.files.create(file=("in.jsonl", data), purpose="batch")
    return await client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                       completion_window="24h", **kw)  # fmt: skip


async def settle(client: openai.AsyncOpenAI, batch_id: str) -> tuple[Any, list[str]]:
    """Polls a batch until it ends: its last state and every status seen."""
    seen: list[str] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        batch = await client.batches.retrieve(batch_id)
        if not seen or seen[-1] != batch.status:
            seen.append(batch.status)
        if batch.status in ENDED:
            return batch, seen
        await asyncio.sleep(0.005)
    raise AssertionError(f"batch {batch_id} did not end: {seen}")


async def file_lines(client: openai.AsyncOpenAI, file_id: str | None) -> dict[str, Any]:
    if file_id is None:
        return {}
    text = (await client.files.content(file_id)).text
    return {line["custom_id"]: line for line in map(json.loads, text.splitlines())}


async def test_a_batch_goes_through_every_phase_and_answers_as_the_direct_route(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    requests = {f"r{i}": chat(f"question {i}", max_tokens=5) for i in range(4)}
    created = await submit(client, lines_of(requests), metadata={"run": "x"})
    assert (created.status, counts(created)["total"]) == ("validating", 0)
    assert created.output_file_id is None and created.metadata == {"run": "x"}

    batch, seen = await settle(client, created.id)
    assert seen[0] == "validating" and seen[-1] == "completed"
    assert fake.ledger.batches[created.id].statuses == [
        "validating", "in_progress", "finalizing", "completed"]  # fmt: skip
    assert counts(batch) == {"total": 4, "completed": 4, "failed": 0}
    assert batch.error_file_id is None and batch.model == "test-model"
    assert batch.in_progress_at and batch.finalizing_at and batch.completed_at
    out = await file_lines(client, batch.output_file_id)
    assert set(out) == set(requests)
    direct = await client.chat.completions.create(**requests["r2"])
    line = out["r2"]
    assert line["id"].startswith("batch_req_") and line["error"] is None
    assert line["response"]["status_code"] == 200 and line["response"]["request_id"]
    body = line["response"]["body"]
    assert body["object"] == "chat.completion"
    assert body["choices"] == [c.model_dump(exclude_none=True) | {"logprobs": None}
                               for c in direct.choices]  # fmt: skip
    assert body["usage"] == direct.usage.model_dump(exclude_none=True)
    assert batch.usage is not None and batch.usage.input_tokens == 4 * 2
    output = await client.files.retrieve(batch.output_file_id)
    assert output.purpose == "batch_output" and output.filename.endswith("_output.jsonl")
    # Batched answers are not direct calls: only the one direct request counted.
    assert fake.direct_calls == 1 and fake.served == 1


async def test_requests_are_answered_across_the_in_progress_phase(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake.batch_timing = BatchTiming(validating_s=0.0, in_progress_s=0.6, finalizing_s=0.0)
    created = await submit(client, lines_of({f"r{i}": chat(str(i)) for i in range(4)}))
    await asyncio.sleep(0.2)  # requests are due at 0.15, 0.3, 0.45 and 0.6 s
    mid = await client.batches.retrieve(created.id)
    assert mid.status == "in_progress" and counts(mid)["total"] == 4
    assert 1 <= counts(mid)["completed"] <= 3
    batch, _ = await settle(client, created.id)
    assert counts(batch)["completed"] == 4


@pytest.mark.parametrize(
    ("rows", "code", "line"),
    [
        ([("a", "/v1/chat/completions", chat("x")), ("a", "/v1/chat/completions", chat("y"))],
         "duplicate_custom_id", 2),
        ([("a", "/v1/embeddings", chat("x"))], "url_mismatch", 1),
        ([("a", "/v1/chat/completions", chat("x")),
          ("b", "/v1/chat/completions", chat("y", model="other-model"))], "model_mismatch", 2),
        ([("a", "/v1/chat/completions", chat("x", model="no-such-model"))],
         "model_not_found", 1),
        ([], "empty_file", None),
    ],
)  # fmt: skip
async def test_a_file_that_fails_validation_fails_the_batch(
    client: openai.AsyncOpenAI, rows: list[tuple[str, str, dict[str, Any]]], code: str,
    line: int | None,
) -> None:  # fmt: skip
    data = jsonl([{"custom_id": c, "method": "POST", "url": u, "body": b} for c, u, b in rows])
    batch, seen = await settle(client, (await submit(client, data)).id)
    assert seen == ["validating", "failed"] and batch.failed_at
    assert batch.errors is not None and batch.errors.data is not None
    assert [(e.code, e.line) for e in batch.errors.data] == [(code, line)]
    assert batch.output_file_id is None and batch.error_file_id is None
    assert counts(batch)["total"] == 0


async def test_lines_that_are_not_requests_fail_validation(client: openai.AsyncOpenAI) -> None:
    data = b'{"custom_id": "a", "method": "POST"\n' + jsonl(
        [{"custom_id": "b", "method": "GET", "url": "/v1/chat/completions", "body": chat("x")},
         {"method": "POST", "url": "/v1/chat/completions", "body": chat("x")}])  # fmt: skip
    batch, _ = await settle(client, (await submit(client, data)).id)
    assert batch.status == "failed" and batch.errors is not None
    assert [(e.code, e.line, e.param) for e in batch.errors.data or []] == [
        ("invalid_json_line", 1, None), ("invalid_method", 2, "method"),
        ("missing_required_parameter", 3, "custom_id")]  # fmt: skip


async def test_a_failure_fault_fails_a_valid_batch_once(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake.batch_faults.batch.append("fail")
    data = lines_of({"a": chat("x")})
    failed, _ = await settle(client, (await submit(client, data)).id)
    assert failed.status == "failed" and failed.errors is not None
    assert [e.code for e in failed.errors.data or []] == ["token_limit_exceeded"]
    again, _ = await settle(client, (await submit(client, data)).id)
    assert again.status == "completed"
    assert fake.ledger.submitted["a"] == 2


async def test_a_body_the_direct_route_refuses_fails_alone_with_the_same_error(
    client: openai.AsyncOpenAI,
) -> None:
    bad = chat("x", temperature=3.0)
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(**bad)
    batch, _ = await settle(client, (await submit(client, lines_of({"ok": chat("y"), "bad": bad}))).id)  # fmt: skip
    assert batch.status == "completed"
    assert counts(batch) == {"total": 2, "completed": 1, "failed": 1}
    errors = await file_lines(client, batch.error_file_id)
    assert list(errors) == ["bad"] and errors["bad"]["error"] is None
    response = errors["bad"]["response"]
    assert response["status_code"] == 400 and response["body"]["error"] == refused.value.body
    assert response["body"]["error"]["message"] == "temperature must be a number in [0.0, 2.0]"
    assert list(await file_lines(client, batch.output_file_id)) == ["ok"]


async def test_per_request_errors_chosen_by_a_predicate(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    statuses = {"transient": 500, "permanent": 400}
    seen: list[tuple[str, int]] = []

    def fail(custom_id: str, body: dict[str, Any]) -> int | None:
        seen.append((custom_id, fake.ledger.submitted[custom_id]))
        # Each fails the first time it is submitted only.
        return statuses.get(custom_id) if fake.ledger.submitted[custom_id] == 1 else None

    fake.batch_faults.request_error = fail
    data = lines_of({c: chat(c) for c in ("fine", "transient", "permanent")})
    batch, _ = await settle(client, (await submit(client, data)).id)
    assert batch.status == "completed"
    assert counts(batch) == {"total": 3, "completed": 1, "failed": 2}
    errors = await file_lines(client, batch.error_file_id)
    got = {c: (line["response"]["status_code"], line["response"]["body"]["error"]["type"])
           for c, line in errors.items()}  # fmt: skip
    assert got == {"transient": (500, "server_error"), "permanent": (400, "invalid_request_error")}
    retried, _ = await settle(client, (await submit(client, data)).id)
    assert counts(retried)["completed"] == 3 and retried.error_file_id is None
    assert seen[-3:] == [("fine", 2), ("transient", 2), ("permanent", 2)]


async def test_a_batch_whose_every_request_failed_completes_without_an_output_file(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake.batch_faults.request_error = lambda custom_id, body: 500
    batch, _ = await settle(client, (await submit(client, lines_of({"a": chat("x")}))).id)
    assert batch.status == "completed" and batch.output_file_id is None
    assert counts(batch)["failed"] == 1 and batch.error_file_id is not None


async def test_a_batch_that_expires_keeps_what_it_answered(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake.batch_faults.batch.append(Expire(answered=2))
    requests = {f"r{i}": chat(str(i)) for i in range(5)}
    batch, seen = await settle(client, (await submit(client, lines_of(requests))).id)
    assert seen[-1] == "expired" and batch.expired_at and batch.completed_at is None
    assert fake.ledger.batches[batch.id].statuses == ["validating", "in_progress", "expired"]
    assert counts(batch) == {"total": 5, "completed": 2, "failed": 0}
    out = await file_lines(client, batch.output_file_id)
    errors = await file_lines(client, batch.error_file_id)
    assert set(out) == {"r0", "r1"} and set(errors) == {"r2", "r3", "r4"}
    assert errors["r3"]["response"] is None
    assert errors["r3"]["error"] == {
        "code": "batch_expired",
        "message": "This request could not be executed before the completion window expired.",
    }


async def test_the_completion_window_expires_a_slow_batch(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake.batch_timing = BatchTiming(validating_s=0.0, in_progress_s=0.4, window_s=0.25)
    batch, _ = await settle(client, (await submit(client, lines_of({"a": chat("a"), "b": chat("b")}))).id)  # fmt: skip
    assert batch.status == "expired" and counts(batch)["completed"] == 1


async def test_a_cancelled_batch_keeps_the_answers_it_had(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake.batch_timing = BatchTiming(validating_s=0.0, in_progress_s=0.6, cancelling_s=0.05)
    requests = {f"r{i}": chat(str(i)) for i in range(4)}
    created = await submit(client, lines_of(requests))
    await asyncio.sleep(0.2)
    cancelling = await client.batches.cancel(created.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at
    answered = counts(cancelling)["completed"]
    assert 1 <= answered <= 3
    batch, _ = await settle(client, created.id)
    assert batch.status == "cancelled" and counts(batch)["completed"] == answered
    out = await file_lines(client, batch.output_file_id)
    errors = await file_lines(client, batch.error_file_id)
    assert len(out) == answered and set(out) | set(errors) == set(requests)
    assert {e["error"]["code"] for e in errors.values()} == {"batch_cancelled"}
    with pytest.raises(openai.ConflictError):
        await client.batches.cancel(
            (await settle(client, (await submit(client, lines_of({"a": chat("a")}))).id))[0].id
        )


async def test_a_create_that_fails_once_is_retried_by_the_sdk_or_raised(
    fake: FakeOpenAI,
) -> None:
    fake.batch_faults.create.extend([500, 429])
    async with openai_client(fake) as client:
        with pytest.raises(openai.InternalServerError):
            await submit(client, lines_of({"a": chat("x")}))
    async with openai_client(fake, max_retries=2) as client:
        created = await submit(client, lines_of({"a": chat("x")}))  # 429, then created
        assert (await settle(client, created.id))[0].status == "completed"
    assert fake.ledger.create_calls == 3 and list(fake.ledger.batches) == [created.id]
    assert fake.ledger.submitted["a"] == 1


async def test_batches_are_listed_newest_first_in_pages(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    ids = [(await submit(client, lines_of({"a": chat(str(i))}))).id for i in range(5)]
    page = await client.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[::-1][:2] and page.has_more
    assert [b.id async for b in client.batches.list(limit=2)] == ids[::-1]
    assert list(fake.ledger.batches) == ids


async def test_the_files_api(client: openai.AsyncOpenAI) -> None:
    made = await client.files.create(file=("in.jsonl", b'{"x": 1}\n'), purpose="batch")
    assert (made.purpose, made.bytes, made.filename) == ("batch", 9, "in.jsonl")
    assert (await client.files.retrieve(made.id)).id == made.id
    assert (await client.files.content(made.id)).content == b'{"x": 1}\n'
    with pytest.raises(openai.BadRequestError, match=r"Must be \.jsonl"):
        await client.files.create(file=("in.txt", b"x"), purpose="batch")
    other = await client.files.create(file=("in.jsonl", b"x"), purpose="user_data")
    with pytest.raises(openai.BadRequestError, match="purpose 'batch'"):
        await client.batches.create(input_file_id=other.id, endpoint="/v1/chat/completions",
                                    completion_window="24h")  # fmt: skip
    assert (await client.files.delete(made.id)).deleted
    with pytest.raises(openai.NotFoundError):
        await client.files.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        await client.batches.retrieve("batch_nope")


# ---- OpenAI: automatic prompt caching


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


async def cached(client: openai.AsyncOpenAI, text: str, model: str = "test-model") -> int | None:
    usage = (await client.chat.completions.create(**chat(text, model=model))).usage
    assert usage is not None and usage.prompt_tokens == len(text.split())
    details = usage.prompt_tokens_details
    return None if details is None else details.cached_tokens


async def test_cached_tokens_are_the_longest_prefix_seen_in_128_token_steps(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake.model_ids = ("test-model", "other-model")
    shared = words(1100)
    assert await cached(client, f"{shared} {words(200, 'a')}") == 0  # first seen
    assert await cached(client, f"{shared} {words(200, 'a')}") == 1280  # 1300 seen
    assert await cached(client, f"{shared} {words(200, 'b')}") == 1024  # 1100 shared
    # 1000 shared: a 896-token prefix, under the 1024 minimum.
    assert await cached(client, f"{words(1000)} {words(300, 'c')}") == 0
    assert await cached(client, f"{shared} {words(200, 'a')}", "other-model") == 0
    assert await cached(client, words(1023)) is None  # too short to cache: not reported


async def test_the_same_words_in_another_message_are_another_prefix(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake.cache_min_tokens, fake.cache_step = 8, 1
    text = words(20)
    assert await cached(client, text) == 0
    system = [{"role": "system", "content": text}, {"role": "user", "content": "go"}]
    usage = (await client.chat.completions.create(model="test-model", messages=system)).usage  # type: ignore[arg-type]
    assert usage is not None and usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 0
    assert await cached(client, f"{words(12)} other") == 12  # step 1: the exact prefix


async def test_batched_requests_read_and_write_the_same_prompt_cache(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake.model_ids = ("test-model", "gpt-4o")
    long, fresh = words(1200), words(1200, "n")
    assert await cached(client, long) == 0
    batch, _ = await settle(client, (await submit(client, lines_of(
        {"seen": chat(f"{long} more"), "fresh": chat(fresh)}))).id)  # fmt: skip
    out = await file_lines(client, batch.output_file_id)

    def read(line: dict[str, Any]) -> int:
        return int(line["response"]["body"]["usage"]["prompt_tokens_details"]["cached_tokens"])

    assert (read(out["seen"]), read(out["fresh"])) == (1152, 0)
    assert batch.usage is not None and batch.usage.input_tokens_details.cached_tokens == 1152
    assert await cached(client, fresh) == 1152  # the batch's request was seen
    # Before GPT-5, batched requests get no cache hits.
    assert await cached(client, long, "gpt-4o") == 0
    batch, _ = await settle(client, (await submit(client, lines_of({"x": chat(long, "gpt-4o")}))).id)  # fmt: skip
    assert read((await file_lines(client, batch.output_file_id))["x"]) == 0


async def test_caching_off_reports_no_details() -> None:
    fake = FakeOpenAI(echo, prompt_cache=False)
    async with openai_client(fake) as client:
        assert await cached(client, words(1500)) is None
        assert await cached(client, words(1500)) is None


# ---- Anthropic: Message Batches


def ask(text: str, system: Any = None, **params: Any) -> dict[str, Any]:
    body = {"model": "claude-test-1", "max_tokens": 64,
            "messages": [{"role": "user", "content": text}], **params}  # fmt: skip
    return body | ({"system": system} if system is not None else {})


def claude_echo(body: dict[str, Any]) -> str:
    return f"echo: {body['messages'][-1]['content']}"


@contextlib.asynccontextmanager
async def anthropic_client(fake: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    with serving(fake.app()) as server:
        async with anthropic.AsyncAnthropic(base_url=server.root_url, api_key=fake.api_key,
                                            max_retries=0) as client:  # fmt: skip
            yield client


@pytest.fixture
def claude() -> FakeAnthropic:
    return FakeAnthropic(claude_echo, batch_timing=FAST)


@pytest.fixture
async def aclient(claude: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic_client(claude) as c:
        yield c


async def batch_of(client: anthropic.AsyncAnthropic, requests: dict[str, dict[str, Any]]) -> Any:
    return await client.messages.batches.create(
        requests=[{"custom_id": c, "params": p} for c, p in requests.items()]  # type: ignore[typeddict-item]
    )


async def ended(client: anthropic.AsyncAnthropic, batch_id: str) -> tuple[Any, list[str]]:
    seen: list[str] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        batch = await client.messages.batches.retrieve(batch_id)
        if not seen or seen[-1] != batch.processing_status:
            seen.append(batch.processing_status)
        if batch.processing_status == "ended":
            return batch, seen
        await asyncio.sleep(0.005)
    raise AssertionError(f"batch {batch_id} did not end: {seen}")


async def results(client: anthropic.AsyncAnthropic, batch_id: str) -> dict[str, Any]:
    return {r.custom_id: r.result async for r in await client.messages.batches.results(batch_id)}


def tally(batch: Any) -> dict[str, int]:
    return dict(batch.request_counts.model_dump())


async def test_a_message_batch_ends_with_the_messages_the_direct_route_gives(
    claude: FakeAnthropic, aclient: anthropic.AsyncAnthropic
) -> None:
    requests = {f"q-{i}": ask(f"question {i}") for i in range(4)}
    created = await batch_of(aclient, requests)
    assert created.id.startswith("msgbatch_") and created.processing_status == "in_progress"
    assert tally(created) == {"processing": 4, "succeeded": 0, "errored": 0, "canceled": 0,
                              "expired": 0}  # fmt: skip
    assert created.results_url is None and created.ended_at is None
    batch, seen = await ended(aclient, created.id)
    assert seen[-1] == "ended" and claude.ledger.batches[batch.id].statuses == [
        "in_progress", "ended"]  # fmt: skip
    assert tally(batch)["succeeded"] == 4 and batch.ended_at is not None
    assert batch.results_url is not None and batch.results_url.startswith("http://127.0.0.1")
    got = await results(aclient, batch.id)
    direct = await aclient.messages.create(**requests["q-1"])
    assert set(got) == set(requests) and got["q-1"].type == "succeeded"
    message = got["q-1"].message
    assert message.content == direct.content and message.usage == direct.usage
    assert message.usage.cache_read_input_tokens == 0  # no breakpoint: reported as 0
    assert claude.direct_calls == 1 and claude.ledger.submitted["q-1"] == 1


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        ([{"custom_id": "has space", "params": ask("x")}], "String should match pattern"),
        ([{"custom_id": "x" * 65, "params": ask("x")}], "String should match pattern"),
        ([{"custom_id": "a", "params": ask("x")}, {"custom_id": "a", "params": ask("y")}],
         "Duplicate custom_id"),
        ([], "at least 1 item"),
    ],
)  # fmt: skip
async def test_a_batch_the_api_refuses_at_create(
    claude: FakeAnthropic, aclient: anthropic.AsyncAnthropic, requests: list[Any], message: str
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=message):
        await aclient.messages.batches.create(requests=requests)
    assert not claude.ledger.batches


async def test_params_are_checked_per_request_and_errored_as_the_direct_route_refuses(
    aclient: anthropic.AsyncAnthropic,
) -> None:
    bad = ask("x", stop_sequences="not a list")
    with pytest.raises(anthropic.BadRequestError) as refused:
        await aclient.messages.create(**bad)
    batch, _ = await ended(aclient, (await batch_of(aclient, {"ok": ask("y"), "bad": bad})).id)
    assert (tally(batch)["succeeded"], tally(batch)["errored"]) == (1, 1)
    error = (await results(aclient, batch.id))["bad"]
    assert error.type == "errored" and error.error.error.type == "invalid_request_error"
    assert error.error.error.message == refused.value.body["error"]["message"]  # type: ignore[index]


async def test_per_request_errors_are_transient_or_permanent(
    claude: FakeAnthropic, aclient: anthropic.AsyncAnthropic
) -> None:
    codes = {"flaky": 500, "broken": 400}
    claude.batch_faults.request_error = lambda custom_id, params: codes.get(custom_id)
    requests = {c: ask(c) for c in ("fine", "flaky", "broken")}
    batch, _ = await ended(aclient, (await batch_of(aclient, requests)).id)
    assert tally(batch) == {"processing": 0, "succeeded": 1, "errored": 2, "canceled": 0,
                            "expired": 0}  # fmt: skip
    got = await results(aclient, batch.id)
    assert {c: r.error.error.type for c, r in got.items() if r.type == "errored"} == {
        "flaky": "api_error", "broken": "invalid_request_error"}  # fmt: skip


async def test_a_message_batch_that_expires_keeps_what_it_answered(
    claude: FakeAnthropic, aclient: anthropic.AsyncAnthropic
) -> None:
    claude.batch_faults.batch.append(Expire(answered=1))
    requests = {f"r{i}": ask(str(i)) for i in range(3)}
    batch, _ = await ended(aclient, (await batch_of(aclient, requests)).id)
    assert (tally(batch)["succeeded"], tally(batch)["expired"]) == (1, 2)
    got = await results(aclient, batch.id)
    assert got["r0"].type == "succeeded"
    assert {got["r1"].type, got["r2"].type} == {"expired"}


async def test_a_canceled_message_batch_ends_with_what_it_answered(
    claude: FakeAnthropic, aclient: anthropic.AsyncAnthropic
) -> None:
    claude.batch_timing = BatchTiming(validating_s=0.0, in_progress_s=0.6, cancelling_s=0.05)
    created = await batch_of(aclient, {f"r{i}": ask(str(i)) for i in range(4)})
    await asyncio.sleep(0.2)
    canceling = await aclient.messages.batches.cancel(created.id)
    assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at
    assert tally(canceling)["processing"] == 4  # counted only once it ends
    batch, _ = await ended(aclient, created.id)
    counts = tally(batch)
    assert 1 <= counts["succeeded"] <= 3 and counts["succeeded"] + counts["canceled"] == 4
    kinds = [r.type for r in (await results(aclient, batch.id)).values()]
    assert sorted(kinds) == sorted(["succeeded"] * counts["succeeded"] + ["canceled"] * counts["canceled"])  # fmt: skip
    again = await aclient.messages.batches.cancel(created.id)  # ended: returned as it is
    assert again.processing_status == "ended" and tally(again) == counts
    assert claude.ledger.batches[created.id].statuses == ["in_progress", "canceling", "ended"]


async def test_message_batches_are_listed_newest_first_and_deleted_once_ended(
    claude: FakeAnthropic, aclient: anthropic.AsyncAnthropic
) -> None:
    claude.batch_faults.create.append(529)
    with pytest.raises(anthropic.APIStatusError) as overloaded:
        await batch_of(aclient, {"a": ask("x")})
    assert overloaded.value.status_code == 529
    ids = [(await batch_of(aclient, {"a": ask(str(i))})).id for i in range(3)]
    page = await aclient.messages.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[::-1][:2] and page.has_more
    assert [b.id async for b in aclient.messages.batches.list(limit=2)] == ids[::-1]
    assert claude.ledger.create_calls == 4 and claude.ledger.submitted["a"] == 3
    with pytest.raises(anthropic.BadRequestError):
        await aclient.messages.batches.delete(ids[0])  # still processing
    await ended(aclient, ids[0])
    assert (await aclient.messages.batches.delete(ids[0])).type == "message_batch_deleted"
    with pytest.raises(anthropic.NotFoundError):
        await aclient.messages.batches.retrieve(ids[0])


# ---- Anthropic: prompt caching at cache_control breakpoints


def marked(text: str, ttl: str | None = None) -> dict[str, Any]:
    mark = {"type": "ephemeral"} | ({"ttl": ttl} if ttl else {})
    return {"type": "text", "text": text, "cache_control": mark}


async def usage_of(client: anthropic.AsyncAnthropic, body: dict[str, Any]) -> dict[str, Any]:
    usage = (await client.messages.create(**body)).usage
    got = usage.model_dump(include={"input_tokens", "cache_read_input_tokens",
                                    "cache_creation_input_tokens"})  # fmt: skip
    assert usage.cache_creation is not None
    got["5m"] = usage.cache_creation.ephemeral_5m_input_tokens
    got["1h"] = usage.cache_creation.ephemeral_1h_input_tokens
    return dict(got)


def tokens(read: int, write: int, fresh: int, w5m: int | None = None) -> dict[str, int]:
    return {"cache_read_input_tokens": read, "cache_creation_input_tokens": write,
            "input_tokens": fresh, "5m": write if w5m is None else w5m,
            "1h": 0 if w5m is None else write - w5m}  # fmt: skip


async def test_a_marked_prefix_is_written_then_read(aclient: anthropic.AsyncAnthropic) -> None:
    system = [marked(words(1100))]
    assert await usage_of(aclient, ask("first question", system)) == tokens(0, 1100, 2)
    assert await usage_of(aclient, ask("another one here", system)) == tokens(1100, 0, 3)
    # Under the model's minimum (1024 by default): neither written nor read.
    short = [marked(words(1000, "s"))]
    assert await usage_of(aclient, ask("q", short)) == tokens(0, 0, 1001)
    assert await usage_of(aclient, ask("q", short)) == tokens(0, 0, 1001)
    # No breakpoint: nothing cached, the fields are 0.
    assert await usage_of(aclient, ask("q", words(1100))) == tokens(0, 0, 1101)


async def test_breakpoints_write_each_segment_at_its_ttl_and_look_back_for_reads(
    claude: FakeAnthropic, aclient: anthropic.AsyncAnthropic
) -> None:
    claude.cache_minimums["claude-test-1"] = 8
    system = [marked(words(10), "1h")]
    turn = [marked(words(6, "u")), {"type": "text", "text": "tail words"}]
    body = ask("", system) | {"messages": [{"role": "user", "content": turn}]}
    assert await usage_of(aclient, body) == tokens(0, 16, 2, w5m=6)
    assert await usage_of(aclient, body) == tokens(16, 0, 2)
    # Another turn after the same system: the system's entry is read, the rest written.
    other = [marked(words(6, "v"))]
    assert await usage_of(aclient, body | {"messages": [{"role": "user", "content": other}]}) == (
        tokens(10, 6, 0)
    )
    # Unmarked system, a mark later on: the lookback finds the system's entry.
    plain = [{"type": "text", "text": words(10)}]
    later = [{"type": "text", "text": "x y"}, marked(words(4, "z"))]
    looked = ask("", plain) | {"messages": [{"role": "user", "content": later}]}
    assert await usage_of(aclient, looked) == tokens(10, 6, 0)


async def test_the_top_level_mark_caches_the_whole_prompt(
    claude: FakeAnthropic, aclient: anthropic.AsyncAnthropic
) -> None:
    claude.cache_minimums[""] = 4
    body = ask(words(8), cache_control={"type": "ephemeral"})
    assert await usage_of(aclient, body) == tokens(0, 8, 0)
    assert await usage_of(aclient, body) == tokens(8, 0, 0)


async def test_an_entry_lives_for_its_ttl(
    claude: FakeAnthropic, aclient: anthropic.AsyncAnthropic
) -> None:
    claude.cache_minimums[""], claude.cache.ttls["5m"] = 4, 0.15
    body = ask("q", [marked(words(8))])
    assert await usage_of(aclient, body) == tokens(0, 8, 1)
    await asyncio.sleep(0.1)
    assert await usage_of(aclient, body) == tokens(8, 0, 1)  # a read refreshes it
    await asyncio.sleep(0.1)
    assert await usage_of(aclient, body) == tokens(8, 0, 1)
    await asyncio.sleep(0.2)
    assert await usage_of(aclient, body) == tokens(0, 8, 1)


@pytest.mark.parametrize(
    ("system", "message"),
    [
        ([marked(f"block {i}") for i in range(5)], "A maximum of 4 blocks"),
        ([marked("a", "10m")], "Input should be '5m' or '1h'"),
        ([marked("a", "5m"), marked("b", "1h")], "ttl='1h' must not come after"),
        ([{"type": "text", "text": "a", "cache_control": {"type": "persistent"}}],
         "Input should be 'ephemeral'"),
        ([{"type": "text", "text": ""}], "must be non-empty"),
    ],
)  # fmt: skip
async def test_marks_the_api_refuses(
    aclient: anthropic.AsyncAnthropic, system: list[Any], message: str
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=message):
        await aclient.messages.create(**ask("q", system))


async def test_batched_requests_write_and_read_the_cache(
    claude: FakeAnthropic, aclient: anthropic.AsyncAnthropic
) -> None:
    claude.cache_minimums[""] = 8
    system = [marked(words(12))]
    requests = {f"r{i}": ask(f"q {i}", system) for i in range(3)}
    batch, _ = await ended(aclient, (await batch_of(aclient, requests)).id)
    got = await results(aclient, batch.id)
    usage = {c: r.message.usage for c, r in got.items()}
    assert [(usage[c].cache_creation_input_tokens, usage[c].cache_read_input_tokens,
             usage[c].input_tokens) for c in requests] == [(12, 0, 2), (0, 12, 2), (0, 12, 2)]  # fmt: skip
    assert await usage_of(aclient, ask("direct", system)) == tokens(12, 0, 1)
