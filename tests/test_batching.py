"""Batch mode's engine: requests gathered into provider batches, retried across batches,
kept in the run directory and followed by a later process.

The provider is an in-process implementation of hpt's own ``BatchAPI`` Protocol
(``ScriptedBatches``), which records what was submitted and can hold, expire, fail or error
a batch or one of its requests; end-to-end tests through the providers' SDKs against the
test servers are in tests/test_batch_providers.py; the last test here runs the engine with
the real OpenAI transport against the test server's Files + Batches."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from rich.console import Console

from hpt.backends import (
    BackendStats,
    BatchOptions,
    ManagedBackend,
    ResponseCache,
    RetryPolicy,
    batch_journal,
    batching,
    model_config_from,
    open_backend,
)
from hpt.backends.batch_api import BatchStatus, RequestFailed
from hpt.backends.batch_errors import CannotTell, SubmitUnsure, gone
from hpt.backends.batch_journal import JOURNAL, RESULTS
from hpt.backends.batching import BatchCollector
from hpt.backends.errors import BackendError, BudgetSpent, FatalBackendError, TransientError
from hpt.backends.limits import BackendLimits
from hpt.cli.progress import RichProgress, batches_line
from hpt.errors import StorageError
from hpt.orchestrator import RunSpec
from hpt.types import Completion, GenerationParams, Message, Usage
from tests.backend_helpers import serving
from tests.servers.anthropic_api import FakeAnthropic
from tests.servers.openai_compat import FakeOpenAI

RETRY = RetryPolicy(max_attempts=3, initial_wait_s=0.001, max_wait_s=0.01, max_total_s=5)
PARAMS = GenerationParams(max_tokens=50)
LABEL = "scripted:model-1"

# What a request may come back as: answered, failed (transient or not), or absent from the
# batch's results (as an expired request may be).
Outcome = Completion | RequestFailed | None


def answered(content: str) -> Completion:
    return Completion(text=f"re: {content}", usage=Usage(prompt_tokens=7, completion_tokens=3))


@dataclass
class FakeBatch:
    local_id: str
    requests: list[dict[str, Any]]
    held: bool
    state: str = "in_progress"  # as the provider words it
    failed: str | None = None  # the batch failed as a whole, with this error


@dataclass
class ScriptedBatches:
    """A provider's Batch API in memory. ``outcome(content, attempt)`` decides each request
    (attempt: how many batches have carried that prompt so far, this one included)."""

    outcome: Callable[[str, int], Outcome] = lambda content, attempt: answered(content)
    provider: str = "scripted"
    max_requests: int = 1000
    max_bytes: int = 10_000_000
    keeps_metadata: bool = True  # find() works (OpenAI); False: it cannot (Anthropic)
    hold: bool = False  # new batches stay in progress until released
    submit_errors: list[Exception] = field(default_factory=list)  # raised by the next submits
    find_errors: list[Exception] = field(default_factory=list)  # raised by the next finds
    status_errors: list[Exception] = field(default_factory=list)  # raised by the next statuses
    search_cut: bool = False  # find() stops before reaching the time it was asked to
    hang_submits: bool = False  # a submission makes the batch, then never returns
    submit_delay_s: float = 0.0  # a submission makes the batch, then answers this late
    gone: set[str] = field(default_factory=set)  # batch ids the provider no longer has
    journal: Path | None = None  # read at each submission: what the run had written by then
    batches: dict[str, FakeBatch] = field(default_factory=dict)
    seen_journal: list[dict[str, Any]] = field(default_factory=list)
    sent: Counter[str] = field(default_factory=Counter)  # prompts submitted, by content
    status_calls: int = 0
    finds: int = 0
    finds_since: list[datetime | None] = field(default_factory=list)

    def request(
        self, custom_id: str, messages: list[Message], params: GenerationParams
    ) -> dict[str, Any]:
        return {
            "custom_id": custom_id,
            "body": {"content": messages[-1].content, "max_tokens": params.max_tokens},
        }

    async def submit(self, requests: list[dict[str, Any]], local_id: str) -> str:
        if self.journal is not None:
            self.seen_journal.append(json.loads(self.journal.read_text()))
        if self.submit_errors:
            raise self.submit_errors.pop(0)
        batch_id = f"fb-{len(self.batches) + 1}"
        self.batches[batch_id] = FakeBatch(local_id, requests, held=self.hold)
        self.sent.update(r["body"]["content"] for r in requests)
        if self.hang_submits:
            await asyncio.Event().wait()
        await asyncio.sleep(self.submit_delay_s)
        return batch_id

    @property
    def can_find(self) -> bool:
        return self.keeps_metadata

    async def find(self, local_id: str, since: datetime | None = None) -> str | None:
        self.finds += 1
        self.finds_since.append(since)
        if self.find_errors:
            raise self.find_errors.pop(0)
        if not self.keeps_metadata:
            return None
        if self.search_cut:
            raise CannotTell("the search stopped at the newest 10000")
        return next((i for i, b in self.batches.items() if b.local_id == local_id), None)

    async def status(self, batch_id: str) -> BatchStatus:
        self.status_calls += 1
        if self.status_errors:
            raise self.status_errors.pop(0)
        if batch_id in self.gone:
            raise gone(batch_id, self.provider, "no such batch")
        batch = self.batches[batch_id]
        if batch.failed is not None:
            return BatchStatus("failed", "failed", error=batch.failed)
        if batch.held:
            return BatchStatus("in_progress", "in_progress", {"total": len(batch.requests)})
        return BatchStatus("ended", batch.state, {"total": len(batch.requests)})

    async def results(self, batch_id: str) -> dict[str, Completion | RequestFailed]:
        out: dict[str, Completion | RequestFailed] = {}
        for r in self.batches[batch_id].requests:
            content = r["body"]["content"]
            outcome = self.outcome(content, self.sent[content])
            if outcome is not None:
                out[r["custom_id"]] = outcome
        return out

    async def cancel(self, batch_id: str) -> None:
        raise AssertionError("hpt never cancels a provider batch")

    def release(self) -> None:
        for batch in self.batches.values():
            batch.held = False

    def submitted(self) -> list[list[str]]:
        """Each batch's prompts, in submission order."""
        return [[r["body"]["content"] for r in b.requests] for b in self.batches.values()]


@dataclass
class RecordingGate:
    """A budget of ``allowed`` admissions (``must`` ones always pass). ``counted``: the
    batches whose landing it holds (saved by ``landed``, or by an earlier process);
    ``landings``: each ``landed`` call, with how many calls were settled by then and the
    batch's state in the journal (``journal``, read then)."""

    allowed: int = 1000
    journal: Path | None = None
    landed_delay_s: float = 0.0
    admitted: list[dict[str, Any]] = field(default_factory=list)
    settled: list[tuple[int, Completion | None]] = field(default_factory=list)
    counted_batches: set[str] = field(default_factory=set)
    landings: list[tuple[str, int, str | None]] = field(default_factory=list)
    landing: asyncio.Event = field(default_factory=asyncio.Event)  # landed() was called

    def admit(
        self, backend: str, prompt_bound: int, max_tokens: int, *, batched: bool, must: bool = False
    ) -> object:
        if not must and len(self.admitted) >= self.allowed:
            raise BudgetSpent("the budget is spent")
        self.admitted.append(dict(backend=backend, prompt_bound=prompt_bound,
                                  max_tokens=max_tokens, batched=batched, must=must))  # fmt: skip
        return len(self.admitted)

    def settle(self, ticket: object, completion: Completion | None) -> None:
        assert isinstance(ticket, int)
        assert ticket not in [t for t, _ in self.settled], "settled twice"
        self.settled.append((ticket, completion))

    def counted(self, batch: str) -> bool:
        return batch in self.counted_batches

    async def landed(self, batch: str) -> None:
        state = None
        if self.journal is not None:
            state = next((b["state"] for b in journal(self.journal.parent)
                          if b["local_id"] == batch), None)  # fmt: skip
        self.landings.append((batch, len(self.settled), state))
        self.landing.set()
        await asyncio.sleep(self.landed_delay_s)
        self.counted_batches.add(batch)


def msgs(content: str) -> list[Message]:
    return [Message(role="system", content="be brief"), Message(role="user", content=content)]


def options(directory: Path, **kw: Any) -> BatchOptions:
    return BatchOptions(directory=directory, **{"size": 100, "wait_s": 0.05, "poll_s": 0.01, **kw})


@pytest.fixture
def api() -> ScriptedBatches:
    return ScriptedBatches()


class Run:
    """One process's collector on a run directory."""

    def __init__(self, api: ScriptedBatches, directory: Path, gate: RecordingGate | None = None,
                 **opts: Any) -> None:  # fmt: skip
        self.stats = BackendStats()
        self.collector = BatchCollector(
            api, options(directory, **opts), label=LABEL, model="model-1",
            endpoint="https://scripted.example", retry=RETRY, stats=self.stats, gate=gate,
            params_of=lambda p: {"max_tokens": p.max_tokens},
        )  # fmt: skip

    async def ask(self, content: str) -> Completion:
        return await self.collector.ask(f"k-{content}", msgs(content), PARAMS)


@pytest.fixture
async def run(api: ScriptedBatches, tmp_path: Path) -> AsyncIterator[Run]:
    r = Run(api, tmp_path)
    await r.collector.start()
    yield r
    await r.collector.aclose()


def journal(directory: Path) -> list[dict[str, Any]]:
    batches: list[dict[str, Any]] = json.loads((directory / JOURNAL).read_text())["batches"]
    return batches


async def settle_down(seconds: float = 0.15) -> None:
    """Long enough for a queue to be submitted (wait_s 0.05) and a batch polled (poll_s 0.01)."""
    await asyncio.sleep(seconds)


# -- gathering ---------------------------------------------------------------------------
async def test_a_full_queue_is_submitted_at_once_the_rest_after_the_wait(
    api: ScriptedBatches, tmp_path: Path
) -> None:
    run = Run(api, tmp_path, size=3, wait_s=0.3)
    await run.collector.start()
    started = time.monotonic()
    asks = [asyncio.create_task(run.ask(str(i))) for i in range(7)]
    await settle_down()
    assert api.submitted() == [["0", "1", "2"], ["3", "4", "5"]]
    assert (run.stats.batch_requests_waiting, run.stats.batches_waiting) == (1, 1)
    answers = await asyncio.gather(*asks)
    assert time.monotonic() - started >= 0.3  # the seventh waited for wait_s
    assert api.submitted()[2] == ["6"]
    assert [a.text for a in answers] == [f"re: {i}" for i in range(7)]
    assert all(a.batched and not a.cached for a in answers)
    assert answers[0].params == {"max_tokens": 50}  # what the transport sends for PARAMS
    assert all(a.latency_s > 0 for a in answers)
    await run.collector.aclose()


async def test_each_new_request_restarts_the_wait(api: ScriptedBatches, tmp_path: Path) -> None:
    run = Run(api, tmp_path, wait_s=0.2)
    await run.collector.start()
    first = asyncio.create_task(run.ask("a"))
    await asyncio.sleep(0.12)
    second = asyncio.create_task(run.ask("b"))
    await asyncio.sleep(0.12)  # 0.24 s after the first, 0.12 s after the second
    assert api.submitted() == []
    await asyncio.gather(first, second)
    assert api.submitted() == [["a", "b"]]
    await run.collector.aclose()


async def test_a_batch_is_split_by_the_apis_limits(api: ScriptedBatches, tmp_path: Path) -> None:
    api.max_requests = 2
    run = Run(api, tmp_path, size=5)
    await run.collector.start()
    await asyncio.gather(*(run.ask(str(i)) for i in range(5)))
    assert api.submitted() == [["0", "1"], ["2", "3"], ["4"]]
    line = len(json.dumps(api.request("k-0", msgs("0"), PARAMS), separators=(",", ":"))) + 1
    api.max_requests, api.max_bytes = 1000, 2 * line  # two requests' bytes and no more
    await asyncio.gather(*(run.ask(str(i)) for i in range(5, 10)))
    assert api.submitted()[3:] == [["5", "6"], ["7", "8"], ["9"]]
    await run.collector.aclose()


async def test_one_key_is_one_request_however_often_asked_at_once(
    run: Run, api: ScriptedBatches
) -> None:
    one, two = await asyncio.gather(run.ask("q"), run.ask("q"))
    assert api.submitted() == [["q"]]
    assert one.text == two.text == "re: q"
    # Asked again once answered: a new request, as a direct call without the response cache
    # makes (with the cache on, it answers such a repeat before the collector is asked).
    again = await run.ask("q")
    assert api.submitted() == [["q"], ["q"]]
    assert not again.cached and again.batched and again.text == "re: q"


# -- failures and retries ----------------------------------------------------------------
async def test_a_request_that_failed_inside_a_batch_goes_into_a_later_one(
    api: ScriptedBatches, run: Run
) -> None:
    def flaky(content: str, attempt: int) -> Outcome:
        if content == "bad" and attempt < 3:
            return RequestFailed("server error", transient=True)
        return answered(content)

    api.outcome = flaky
    good, bad = await asyncio.gather(run.ask("good"), run.ask("bad"))
    assert api.submitted() == [["good", "bad"], ["bad"], ["bad"]]
    assert (good.text, bad.text) == ("re: good", "re: bad")
    assert run.stats.retries == 2
    assert [b["requests"][0]["attempt"] for b in journal(run.collector._options.directory)] == [
        1, 2, 3,
    ]  # fmt: skip


async def test_requests_missing_from_an_expired_batch_are_retried(
    api: ScriptedBatches, run: Run
) -> None:
    api.outcome = lambda content, attempt: None if attempt == 1 else answered(content)
    answer = await run.ask("slow")
    assert answer.text == "re: slow" and api.sent["slow"] == 2


async def test_a_batch_that_failed_as_a_whole_is_sent_again(
    api: ScriptedBatches, run: Run, tmp_path: Path
) -> None:
    api.hold = True
    ask = asyncio.create_task(run.ask("x"))
    await settle_down()
    api.batches["fb-1"].failed = "input file failed validation"
    api.hold = False
    assert (await ask).text == "re: x"
    assert api.sent["x"] == 2
    assert [b["state"] for b in journal(tmp_path)] == ["failed", "collected"]
    assert journal(tmp_path)[0]["error"] == "input file failed validation"


async def test_after_the_policys_attempts_the_call_fails(api: ScriptedBatches, run: Run) -> None:
    api.outcome = lambda content, attempt: RequestFailed("overloaded", transient=True)
    with pytest.raises(BackendError, match="gave up after 3 batches: overloaded"):
        await run.ask("never")
    assert api.sent["never"] == RETRY.max_attempts


async def test_a_permanent_failure_fails_at_once(api: ScriptedBatches, run: Run) -> None:
    api.outcome = lambda content, attempt: RequestFailed("invalid max_tokens", transient=False)
    with pytest.raises(BackendError, match=r"^invalid max_tokens$"):
        await run.ask("wrong")
    assert api.sent["wrong"] == 1


async def test_submission_errors_are_retried_and_fatal_ones_stop(
    api: ScriptedBatches, run: Run
) -> None:
    api.submit_errors = [TransientError("503"), TransientError("503")]
    assert (await run.ask("a")).text == "re: a"
    assert run.stats.retries == 2 and len(api.batches) == 1
    api.submit_errors = [FatalBackendError("invalid API key")]
    with pytest.raises(FatalBackendError, match="invalid API key"):
        await run.ask("b")
    api.submit_errors = [TransientError("503")] * RETRY.max_attempts  # this try gives up
    assert (await run.ask("c")).text == "re: c"  # in a later batch
    failed = journal(run.collector._options.directory)[-2]
    assert (failed["state"], failed["id"]) == ("failed", None)
    assert failed["error"] == "could not submit it: 503"
    assert api.finds == 0  # refusals made no batch: nothing to look for


def made_then_lost(api: ScriptedBatches, times: int = 1) -> None:
    """The next ``times`` submissions make their batch, and their answer is lost."""
    real_submit = api.submit
    lost = [times]

    async def submit(requests: list[dict[str, Any]], local_id: str) -> str:
        batch_id = await real_submit(requests, local_id)
        if lost[0] > 0:
            lost[0] -= 1
            raise SubmitUnsure("HTTP 502: bad gateway")  # a proxy's, after the batch was made
        return batch_id

    api.submit = submit  # type: ignore[method-assign]


async def test_a_submission_whose_answer_was_lost_is_found_not_made_again(
    api: ScriptedBatches, run: Run, tmp_path: Path
) -> None:
    made_then_lost(api)
    assert (await run.ask("a")).text == "re: a"
    assert len(api.batches) == 1 and api.sent["a"] == 1 and api.finds == 1
    [entry] = journal(tmp_path)
    assert (entry["id"], entry["state"]) == ("fb-1", "collected")
    # Unsure, but not made after all (the request never reached it): found nowhere, sent again.
    api.submit_errors = [SubmitUnsure("timed out")]
    assert (await run.ask("b")).text == "re: b"
    assert api.submitted() == [["a"], ["b"]] and api.finds == 2


async def test_a_lost_submission_the_provider_cannot_find_stops_the_run(
    api: ScriptedBatches, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api.keeps_metadata = False
    made_then_lost(api)
    run = Run(api, tmp_path)
    await run.collector.start()
    with pytest.raises(FatalBackendError) as failed:
        await run.ask("a")
    [entry] = journal(tmp_path)
    assert str(failed.value) == (
        f"batch {entry['local_id']} may have been created at scripted (HTTP 502: bad gateway); "
        "look in scripted's console for a batch created at about "
        f"{entry['created'][:10]} {entry['created'][11:16]} UTC and cancel it if it is there, "
        "then resume: the resume asks its 1 request(s) again"
    )
    assert len(api.batches) == 1 and api.finds == 0  # never made twice
    assert entry["state"] == "submitting"  # for the next process, which warns again
    await run.collector.aclose()
    again = Run(api, tmp_path)
    await again.collector.start()
    assert "cannot find a batch by hpt's id; its 1 request(s) are asked again" in caplog.text
    await again.collector.aclose()


async def test_a_lost_submission_that_cannot_be_looked_for_stops_the_run(
    api: ScriptedBatches, tmp_path: Path
) -> None:
    api.submit_errors = [SubmitUnsure("timed out")] * RETRY.max_attempts
    api.find_errors = [TransientError("503")] * (2 * RETRY.max_attempts)
    run = Run(api, tmp_path)
    await run.collector.start()
    with pytest.raises(
        FatalBackendError,
        match=r"cannot tell whether batch \S+ was created: "
        r"submitting it failed \(timed out\), and so did looking for it \(503\); "
        "resume the run when the provider answers",
    ):
        await run.ask("a")
    assert [b["state"] for b in journal(tmp_path)] == ["submitting"]
    assert api.batches == {}
    await run.collector.aclose()


# -- the journal -------------------------------------------------------------------------
async def test_the_journal_is_written_before_the_batch_is_submitted(
    api: ScriptedBatches, run: Run, tmp_path: Path
) -> None:
    api.journal = tmp_path / JOURNAL
    await run.ask("a")
    [before] = api.seen_journal
    [entry] = before["batches"]
    assert entry["state"] == "submitting" and entry["id"] is None
    assert entry["requests"] == [{"key": "k-a", "prompt_bound": len("be brief") + len("a") + 16,
                                  "max_tokens": 50, "attempt": 1}]  # fmt: skip
    [after] = journal(tmp_path)
    assert after["state"] == "collected" and after["id"] == "fb-1"
    assert (after["backend"], after["provider"], after["model"]) == (LABEL, "scripted", "model-1")
    assert after["ended"] is not None
    lines = (tmp_path / RESULTS / f"{after['local_id']}.jsonl").read_text().splitlines()
    assert [json.loads(line)["custom_id"] for line in lines] == ["k-a"]
    assert json.loads(lines[0])["completion"]["text"] == "re: a"


async def test_a_restart_follows_the_batches_out_and_never_resubmits(
    api: ScriptedBatches, tmp_path: Path
) -> None:
    api.hold = True
    first = Run(api, tmp_path)
    await first.collector.start()
    asks = [asyncio.create_task(first.ask(c)) for c in ("a", "b")]
    await settle_down()
    assert journal(tmp_path)[0]["state"] == "in_progress"
    for ask in asks:  # the process ends while the batch is out
        ask.cancel()
    await first.collector.aclose()
    assert [b.held for b in api.batches.values()] == [True]  # never cancelled

    gate = RecordingGate()
    second = Run(api, tmp_path, gate)
    await second.collector.start()
    assert [(a["must"], a["batched"]) for a in gate.admitted] == [(True, True)] * 2
    assert second.stats.batches_in_progress == 1
    waiting = asyncio.create_task(second.ask("a"))
    await settle_down()
    api.release()
    answer = await waiting
    assert answer.text == "re: a" and not answer.cached and answer.batched
    assert api.submitted() == [["a", "b"]]
    assert sorted(t for t, c in gate.settled if c is not None) == [1, 2]  # both billed
    # "b" was collected with nobody asking: its first asker gets it as the paid answer.
    b = await second.ask("b")
    assert not b.cached and b.text == "re: b"
    assert api.submitted() == [["a", "b"]]
    await second.collector.aclose()

    third = Run(api, tmp_path)  # a later process: answered from the saved results
    await third.collector.start()
    assert (third.stats.batches_done, third.stats.batch_requests_done) == (1, 2)
    assert not (await third.ask("a")).cached
    assert api.submitted() == [["a", "b"]]
    await third.collector.aclose()


async def test_a_batch_submitted_before_its_id_was_saved_is_found(
    api: ScriptedBatches, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batching, "CLOSE_WAIT_S", 0.2)
    api.hang_submits = True  # the provider's answer never comes before the process ends
    first = Run(api, tmp_path)
    await first.collector.start()
    ask = asyncio.create_task(first.ask("a"))
    await settle_down()
    ask.cancel()
    started = time.monotonic()
    await first.collector.aclose()
    assert 0.2 <= time.monotonic() - started < 1  # it waited for the answer, not forever
    assert [(b["state"], b["id"]) for b in journal(tmp_path)] == [("submitting", None)]

    api.hang_submits = False
    second = Run(api, tmp_path)
    await second.collector.start()
    assert journal(tmp_path)[0]["id"] == "fb-1"
    # Looked for back to when the journal entry was made, however long ago that was.
    assert api.finds_since == [datetime.fromisoformat(journal(tmp_path)[0]["created"])]
    assert (await second.ask("a")).text == "re: a"
    assert api.submitted() == [["a"]]
    await second.collector.aclose()


async def test_without_metadata_a_lost_submission_is_asked_again(
    api: ScriptedBatches, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(batching, "CLOSE_WAIT_S", 0.05)
    api.hang_submits, api.keeps_metadata = True, False
    first = Run(api, tmp_path)
    await first.collector.start()
    ask = asyncio.create_task(first.ask("a"))
    await settle_down()
    ask.cancel()
    await first.collector.aclose()

    api.hang_submits = False
    second = Run(api, tmp_path)
    await second.collector.start()
    assert journal(tmp_path)[0]["state"] == "failed"
    # Said, since it may be paid twice.
    assert "cannot find a batch by hpt's id; its 1 request(s) are asked again" in caplog.text
    assert (await second.ask("a")).text == "re: a"
    assert api.sent["a"] == 2  # the price of a provider that keeps no metadata
    await second.collector.aclose()


async def test_a_lost_submission_the_search_did_not_reach_is_asked_again_with_a_warning(
    api: ScriptedBatches, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The provider's list was too long to read back to the batch's creation: that is not
    "never submitted", and the user is told it may be paid twice."""
    monkeypatch.setattr(batching, "CLOSE_WAIT_S", 0.05)
    api.hang_submits = True
    first = Run(api, tmp_path)
    await first.collector.start()
    ask = asyncio.create_task(first.ask("a"))
    await settle_down()
    ask.cancel()
    await first.collector.aclose()

    api.hang_submits, api.search_cut = False, True
    second = Run(api, tmp_path)
    await second.collector.start()
    [entry] = journal(tmp_path)
    assert (entry["state"], entry["error"]) == (
        "failed", "unknown: the search stopped at the newest 10000"
    )  # fmt: skip
    assert (
        f"hpt: warning: {LABEL}: batch {entry['local_id']} was being submitted when an earlier "
        "process stopped, and the search stopped at the newest 10000; its 1 request(s) are "
        "asked again (if that batch reached scripted, they are paid twice)"
    ) in caplog.messages
    assert (await second.ask("a")).text == "re: a"
    assert api.sent["a"] == 2
    await second.collector.aclose()


async def test_a_lost_submission_the_search_cannot_tell_about_stops_the_run(
    api: ScriptedBatches, run: Run, tmp_path: Path
) -> None:
    made_then_lost(api)
    api.search_cut = True
    with pytest.raises(FatalBackendError) as failed:
        await run.ask("a")
    assert str(failed.value).startswith(
        f"batch {journal(tmp_path)[0]['local_id']} may have been created at scripted (HTTP 502: "
        "bad gateway; the search stopped at the newest 10000); look in scripted's console"
    )
    assert len(api.batches) == 1 and api.finds == 1  # never made twice
    assert journal(tmp_path)[0]["state"] == "submitting"


async def test_the_end_lets_a_submission_under_way_save_its_batchs_id(
    api: ScriptedBatches, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api.submit_delay_s = 0.3  # the provider made the batch; its answer is on its way
    run = Run(api, tmp_path)
    await run.collector.start()
    ask = asyncio.create_task(run.ask("a"))
    await settle_down()
    assert len(api.batches) == 1
    ask.cancel()  # Ctrl-C
    await run.collector.aclose()
    [entry] = journal(tmp_path)
    assert (entry["state"], entry["id"]) == ("submitted", "fb-1")
    assert api.status_calls == 0  # nothing polled after the end
    # Said when the wait starts: a Ctrl-C that seems to hang for 30 s would be pressed again.
    assert caplog.messages == [
        f"hpt: {LABEL}: waiting up to 30 s for batch {entry['local_id']}'s submission to "
        "finish so it is not sent twice"
    ]


async def test_the_end_lets_a_landing_under_way_be_saved(
    api: ScriptedBatches, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gate = RecordingGate(landed_delay_s=0.3)  # the spend is being written
    run = Run(api, tmp_path, gate)
    await run.collector.start()
    ask = asyncio.create_task(run.ask("a"))
    await gate.landing.wait()
    ask.cancel()
    await run.collector.aclose()
    assert gate.counted_batches == {journal(tmp_path)[0]["local_id"]}
    assert journal(tmp_path)[0]["state"] == "collected"
    assert caplog.messages == []  # no submission to wait for (a landing takes moments)


async def test_a_cancelled_journal_write_finishes_before_the_next_begins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writing: list[int] = []
    overlaps: list[int] = []
    real = batch_journal._write_whole

    def slow(path: Path, data: bytes, what: str) -> None:
        writing.append(1)
        overlaps.append(len(writing))
        time.sleep(0.2)
        real(path, data, what)
        writing.pop()

    monkeypatch.setattr(batch_journal, "_write_whole", slow)
    book = await batch_journal.open_journal(tmp_path)
    entry = batch_journal.JournalBatch(
        local_id="one", provider="scripted", backend=LABEL, model="model-1", endpoint="e",
        state="submitting", created=batching._now(), requests=[],
    )  # fmt: skip
    first = asyncio.create_task(book.save(entry))
    await asyncio.sleep(0.05)  # its thread is writing
    first.cancel()
    later = entry.model_copy(update={"state": "submitted", "id": "fb-1"})
    await book.save(later)
    await asyncio.sleep(0.3)  # the first thread has long ended
    assert overlaps == [1, 1]
    assert [(b["state"], b["id"]) for b in journal(tmp_path)] == [("submitted", "fb-1")]
    assert not (tmp_path / f"{JOURNAL}.tmp").exists()
    batch_journal.close_journal(book)


async def test_a_batch_gone_at_the_provider_is_asked_again(
    api: ScriptedBatches, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api.hold = True
    first = Run(api, tmp_path)
    await first.collector.start()
    ask = asyncio.create_task(first.ask("a"))
    await settle_down()
    ask.cancel()
    await first.collector.aclose()
    api.gone.add("fb-1")  # the run was resumed a month later

    gate = RecordingGate()
    second = Run(api, tmp_path, gate)
    api.hold = False
    await second.collector.start()
    await settle_down()
    assert (await second.ask("a")).text == "re: a"
    assert api.submitted() == [["a"], ["a"]]
    gone_entry, again = journal(tmp_path)
    assert (gone_entry["state"], again["state"]) == ("failed", "collected")
    assert gone_entry["error"].startswith("batch fb-1 is gone at scripted (HTTP 404: no such")
    warnings = [r.getMessage() for r in caplog.records if "is gone" in r.getMessage()]
    assert warnings == [f"hpt: warning: {LABEL}: {gone_entry['error']}; its 1 request(s), "
                        "already paid for, are asked again"]  # fmt: skip
    # The gone batch's reservation is released unbilled; the new one is billed.
    assert [(t, c is not None) for t, c in gate.settled] == [(1, False), (2, True)]
    await second.collector.aclose()


async def test_a_batch_refused_while_polled_is_kept_not_asked_again(
    api: ScriptedBatches, tmp_path: Path
) -> None:
    """Not a 404: the batch may still be out. Its askers fail (the run goes on), nothing is
    sent again, and the journal keeps the batch for the next process to collect."""
    api.hold = True
    first = Run(api, tmp_path)
    await first.collector.start()
    api.status_errors = [BackendError("HTTP 410: no longer available")]
    async with asyncio.timeout(5):  # (sent again, it would wait for the held batch)
        with pytest.raises(BackendError) as failed:
            await first.ask("a")
        assert not isinstance(failed.value, FatalBackendError)
        assert str(failed.value) == (
            "batch fb-1: HTTP 410: no longer available; --resume collects it"
        )
        with pytest.raises(BackendError, match="--resume collects it"):
            await first.ask("a")  # asked again in this process: not sent twice
    await first.collector.aclose()
    assert api.submitted() == [["a"]]
    [entry] = journal(tmp_path)
    assert (entry["id"], entry["state"], entry["error"]) == ("fb-1", "submitted", None)

    api.release()
    second = Run(api, tmp_path)
    await second.collector.start()
    assert (await second.ask("a")).text == "re: a"
    assert api.submitted() == [["a"]]
    assert journal(tmp_path)[0]["state"] == "collected"
    await second.collector.aclose()


async def test_a_journal_that_cannot_be_written_stops_the_run(
    api: ScriptedBatches, tmp_path: Path
) -> None:
    (tmp_path / f"{JOURNAL}.tmp").mkdir()  # where the journal is written first, taken
    run = Run(api, tmp_path)
    await run.collector.start()
    with pytest.raises(StorageError, match="could not write the batch journal"):
        await run.ask("a")
    assert api.batches == {}  # never submitted what could not be recorded
    await run.collector.aclose()


# -- the budget --------------------------------------------------------------------------
async def test_the_gate_admits_before_queueing_and_settles_when_it_lands(
    api: ScriptedBatches, tmp_path: Path
) -> None:
    gate = RecordingGate(allowed=2)
    api.outcome = lambda c, n: (
        RequestFailed("refused", transient=False) if c == "b" else answered(c)
    )
    run = Run(api, tmp_path, gate)
    await run.collector.start()
    a = await run.ask("a")
    with pytest.raises(BackendError):
        await run.ask("b")
    with pytest.raises(BudgetSpent):
        await run.ask("c")
    assert api.submitted() == [["a"], ["b"]]  # nothing queued for "c"
    assert [(x["batched"], x["must"], x["max_tokens"]) for x in gate.admitted] == [
        (True, False, 50)] * 2  # fmt: skip
    assert gate.settled == [(1, gate.settled[0][1]), (2, None)]
    settled = gate.settled[0][1]
    assert settled is not None and settled.batched and settled.usage == a.usage
    await run.collector.aclose()


async def test_a_landing_is_billed_and_saved_before_the_journal_says_collected(
    api: ScriptedBatches, tmp_path: Path
) -> None:
    gate = RecordingGate(journal=tmp_path / JOURNAL)
    api.outcome = lambda c, n: (
        RequestFailed("refused", transient=False) if c == "b" else answered(c)
    )
    run = Run(api, tmp_path, gate)
    await run.collector.start()
    answers = await asyncio.gather(run.ask("a"), run.ask("b"), return_exceptions=True)
    assert isinstance(answers[1], BackendError)
    [entry] = journal(tmp_path)
    # "a" billed, then the spend saved, while the journal still said the batch was out.
    assert gate.landings == [(entry["local_id"], 1, "submitted")]
    assert entry["state"] == "collected"
    assert sorted((t, c is not None) for t, c in gate.settled) == [(1, True), (2, False)]
    await run.collector.aclose()


async def test_a_batch_the_gate_counted_is_not_billed_again(
    api: ScriptedBatches, tmp_path: Path
) -> None:
    api.hold = True
    first = Run(api, tmp_path)
    await first.collector.start()
    asks = [asyncio.create_task(first.ask(c)) for c in ("a", "b")]
    await settle_down()
    for ask in asks:
        ask.cancel()
    await first.collector.aclose()
    # An earlier process billed and saved its landing, and was killed before the journal said
    # it was collected.
    gate = RecordingGate(counted_batches={journal(tmp_path)[0]["local_id"]})
    second = Run(api, tmp_path, gate)
    await second.collector.start()
    assert [a["must"] for a in gate.admitted] == [True, True]
    api.release()
    answer = await second.ask("a")
    assert answer.text == "re: a" and not answer.cached
    assert sorted(gate.settled, key=lambda s: s[0]) == [(1, None), (2, None)]  # nothing billed
    assert journal(tmp_path)[0]["state"] == "collected"
    await second.collector.aclose()


# -- through the backend -----------------------------------------------------------------
@dataclass
class Direct:
    """A transport; ``batches`` is its Batch API (None: the provider has none)."""

    batches: ScriptedBatches | None
    provider: str = "scripted"
    model: str = "model-1"
    endpoint: str = "https://scripted.example"
    sends: int = 0

    @property
    def suggested_concurrency(self) -> int | None:
        return None

    async def start(self) -> None:
        return None

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion:
        self.sends += 1
        return answered(messages[-1].content)

    def sent_params(self, params: GenerationParams) -> dict[str, Any]:
        return {"max_completion_tokens": params.max_tokens}

    def batch_api(self) -> ScriptedBatches | None:
        return self.batches

    async def aclose(self) -> None:
        return None


async def test_the_backend_batches_without_its_rate_limits(
    api: ScriptedBatches, tmp_path: Path
) -> None:
    transport = Direct(api)
    # One request a minute, one at a time: 20 direct calls would take 20 minutes.
    limits = BackendLimits(max_concurrency=1, requests_per_minute=1)
    backend = ManagedBackend(transport, label=LABEL, limits=limits, retry=RETRY,
                             batch=options(tmp_path))  # fmt: skip
    await backend.check()
    assert backend.batched
    started = time.monotonic()
    answers = await asyncio.gather(*(backend.complete(msgs(str(i)), PARAMS) for i in range(20)))
    assert time.monotonic() - started < 5
    assert transport.sends == 0 and len(api.submitted()) == 1
    assert all(a.batched for a in answers)
    assert answers[0].params == {"max_completion_tokens": 50}
    assert backend.stats.calls == 20 and backend.stats.batches_done == 1
    await backend.aclose()


async def test_the_backend_answers_from_its_cache_first_and_fills_it(
    api: ScriptedBatches, tmp_path: Path
) -> None:
    async with ResponseCache(tmp_path / "cache.sqlite3") as cache:
        backend = ManagedBackend(Direct(api), label=LABEL, retry=RETRY, cache=cache,
                                 batch=options(tmp_path / "run"))  # fmt: skip
        await backend.check()
        first = await backend.complete(msgs("a"), PARAMS)
        again = await backend.complete(msgs("a"), PARAMS)
        await backend.aclose()
    assert first.batched and not first.cached
    assert again.cached and backend.stats.cache_hits == 1
    assert api.submitted() == [["a"]]


async def test_a_provider_without_a_batch_api_is_called_directly(tmp_path: Path) -> None:
    transport = Direct(None)
    backend = ManagedBackend(transport, label=LABEL, retry=RETRY, batch=options(tmp_path))
    await backend.check()
    assert not backend.batched
    answer = await backend.complete(msgs("a"), PARAMS)
    assert transport.sends == 1 and not answer.batched
    assert not (tmp_path / JOURNAL).exists()
    await backend.aclose()


async def test_a_backend_failure_names_the_backend(api: ScriptedBatches, tmp_path: Path) -> None:
    api.outcome = lambda content, attempt: RequestFailed("context too long", transient=False)
    backend = ManagedBackend(Direct(api), label=LABEL, retry=RETRY, batch=options(tmp_path))
    await backend.check()
    with pytest.raises(BackendError, match=f"^{LABEL}: context too long$"):
        await backend.complete(msgs("a"), PARAMS)
    assert backend.stats.errors == 1
    await backend.aclose()


# -- progress ----------------------------------------------------------------------------
async def test_stats_count_waiting_open_and_done_batches(
    api: ScriptedBatches, tmp_path: Path
) -> None:
    api.hold = True
    run = Run(api, tmp_path, size=2, wait_s=30)
    await run.collector.start()
    asks = [asyncio.create_task(run.ask(str(i))) for i in range(5)]
    await settle_down()
    s = run.stats
    assert (s.batches_waiting, s.batch_requests_waiting) == (1, 1)
    assert (s.batches_in_progress, s.batch_requests_in_progress) == (2, 4)
    assert (s.batches_done, s.batch_requests_done) == (0, 0)
    assert batches_line(s) == (
        "batches: 1 waiting (1 req) · 2 in progress (4 req) · 0 done (0 req)"
    )
    api.release()
    await asyncio.wait(asks[:4])
    assert (s.batches_in_progress, s.batches_done, s.batch_requests_done) == (0, 2, 4)
    asks[4].cancel()  # withdrawn before it was sent: nothing waits any more
    await settle_down()
    assert s.batch_requests_waiting == 0 and not s.batches_waiting
    await run.collector.aclose()


def test_the_live_display_shows_batches_once_there_are_any(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = RichProgress(Console(file=out, force_terminal=True, width=200))
    direct, batched = BackendStats(calls=3), BackendStats(calls=2340)
    progress.watch({"tgi:http://gpu-1:8080": direct, "openai:gpt-4o": batched})
    progress.started(RunSpec(dataset="boolq"), total=10, out=tmp_path)
    batched.batches_waiting, batched.batch_requests_waiting = 1, 340
    batched.batches_in_progress, batched.batch_requests_in_progress = 2, 2000
    batched.batches_done, batched.batch_requests_done = 5, 4812
    progress.stop()
    text = out.getvalue()
    assert (
        "openai:gpt-4o: batches: 1 waiting (340 req) · 2 in progress (2,000 req) · "
        "5 done (4,812 req)"
    ) in text
    assert "tgi:http://gpu-1:8080: batches" not in text


# -- end to end: OpenAI's SDK against the test server's Files + Batches ------------------
async def test_openai_batches_through_the_sdk_retry_and_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=lambda body: f"echo: {body['messages'][-1]['content']}")
    # The first submission of "2" fails inside its batch with a server error (transient).
    fake.batch_faults.request_error = lambda custom_id, body: (
        500 if body["messages"][-1]["content"] == "2" and fake.ledger.submitted[custom_id] == 1
        else None
    )  # fmt: skip
    batch = options(tmp_path, size=4, wait_s=0.05, poll_s=0.05)
    with serving(fake.app()) as srv:
        config = model_config_from(
            {
                "provider": "openai",
                "model": "test-model",
                "endpoints": [srv.base_url],
                "retry": RETRY.model_dump(),
            }
        )
        async with open_backend(config, label="openai:test-model", batch=batch) as b:
            assert b.batched
            answers = await asyncio.gather(*(b.complete(msgs(str(i)), PARAMS) for i in range(4)))
        assert fake.direct_calls == 0
        assert [len(r.custom_ids) for r in fake.ledger.batches.values()] == [4, 1]
        assert set(fake.ledger.submitted.values()) == {1, 2}
        assert [a.text for a in answers] == [f"echo: {i}" for i in range(4)]
        assert all(a.batched and not a.cached and a.usage.completion_tokens for a in answers)
        assert answers[0].params is not None and answers[0].params["max_tokens"] == 50
        assert [e["state"] for e in journal(tmp_path)] == ["collected", "collected"]

        # A later process (no response cache) answers from the saved results; nothing is sent.
        async with open_backend(config, label="openai:test-model", batch=batch) as b:
            again = await b.complete(msgs("2"), PARAMS)
        assert again.text == "echo: 2" and again.batched and not again.cached
        assert len(fake.ledger.batches) == 2 and fake.direct_calls == 0


def lose_first_create(fake: FakeOpenAI | FakeAnthropic) -> None:
    """The server's first batch-create makes the batch, and its answer is lost: a proxy's 502."""
    create = fake._batch_create
    calls = [0]

    async def lossy(request: web.Request) -> web.Response:
        made = await create(request)
        calls[0] += 1
        if calls[0] > 1:
            return made
        return web.json_response({"error": {"message": "bad gateway", "type": "server_error"}},
                                 status=502)  # fmt: skip

    fake._batch_create = lossy  # type: ignore[method-assign]


async def test_a_lost_openai_create_is_found_not_made_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder=lambda body: f"echo: {body['messages'][-1]['content']}")
    lose_first_create(fake)
    with serving(fake.app()) as srv:
        config = model_config_from({"provider": "openai", "model": "test-model",
                                    "endpoints": [srv.base_url], "retry": RETRY.model_dump()})  # fmt: skip
        async with open_backend(config, label="openai:test-model",
                                batch=options(tmp_path, poll_s=0.05)) as b:  # fmt: skip
            answers = await asyncio.gather(*(b.complete(msgs(str(i)), PARAMS) for i in range(3)))
    assert [a.text for a in answers] == [f"echo: {i}" for i in range(3)]
    assert fake.ledger.create_calls == 1 and len(fake.ledger.batches) == 1
    assert set(fake.ledger.submitted.values()) == {1}
    [entry] = journal(tmp_path)
    assert (entry["id"], entry["state"]) == (next(iter(fake.ledger.batches)), "collected")


async def test_a_lost_anthropic_create_stops_the_run_and_says_how_to_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")
    fake = FakeAnthropic(responder=lambda body: "fine")
    lose_first_create(fake)
    with serving(fake.app()) as srv:
        config = model_config_from({"provider": "anthropic", "model": "claude-test-1",
                                    "endpoints": [srv.root_url], "retry": RETRY.model_dump()})  # fmt: skip
        async with open_backend(config, label="anthropic:claude-test-1",
                                batch=options(tmp_path, poll_s=0.05)) as b:  # fmt: skip
            with pytest.raises(FatalBackendError) as failed:
                await b.complete(msgs("a"), PARAMS)
    [entry] = journal(tmp_path)
    assert str(failed.value) == (
        f"anthropic:claude-test-1: batch {entry['local_id']} may have been created at "
        "anthropic (HTTP 502); look in anthropic's console for a batch created at about "
        f"{entry['created'][:10]} {entry['created'][11:16]} UTC and cancel it if it is there, "
        "then resume: the resume asks its 1 request(s) again"
    )
    assert entry["state"] == "submitting"  # resuming warns before asking them again
    assert fake.ledger.create_calls == 1 and len(fake.ledger.batches) == 1


async def test_an_anthropic_create_answered_500_says_briefly_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 500 may come after the batch was made: one short line, not the SDK's error body."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")
    fake = FakeAnthropic(responder=lambda body: "fine")
    fake.batch_faults.create.append(500)
    with serving(fake.app()) as srv:
        config = model_config_from({"provider": "anthropic", "model": "claude-test-1",
                                    "endpoints": [srv.root_url], "retry": RETRY.model_dump()})  # fmt: skip
        async with open_backend(config, label="anthropic:claude-test-1",
                                batch=options(tmp_path, poll_s=0.05)) as b:  # fmt: skip
            with pytest.raises(FatalBackendError) as failed:
                await asyncio.gather(*(b.complete(msgs(str(i)), PARAMS) for i in range(3)))
    [entry] = journal(tmp_path)
    assert str(failed.value) == (
        f"anthropic:claude-test-1: batch {entry['local_id']} may have been created at "
        "anthropic (HTTP 500); look in anthropic's console for a batch created at about "
        f"{entry['created'][:10]} {entry['created'][11:16]} UTC and cancel it if it is there, "
        "then resume: the resume asks its 3 request(s) again"
    )
    assert fake.ledger.create_calls == 1 and entry["state"] == "submitting"
