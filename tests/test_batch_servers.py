"""The test servers' batch APIs and prompt caching, driven through the official SDKs:
OpenAI's Files + Batches (FakeOpenAI) and Anthropic's Message Batches (FakeAnthropic)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from tests.backend_helpers import serving
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
