"""Whole runs in batch mode (``--batch``) against the loopback OpenAI and Anthropic servers,
through the official SDKs' Files + Batches and Message Batches: a batched ladder records what
the same run without batches records; a run killed (SIGKILL) while its batches are out is
resumed without submitting a request twice; batches that expire or fail, and requests that
fail inside their batch, go into later batches; a budget that runs out mid-run in batch mode
and a resume that finishes it; Anthropic's prompt-cache breakpoints end to end."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hpt.backends import BackendStats
from hpt.orchestrator.observer import RunObserver, SilentObserver
from hpt.orchestrator.runner import RunResult, run_evaluation
from hpt.orchestrator.spec import RunSpec
from hpt.results.records import SampleRecord
from hpt.results.tally import Tally
from hpt.tasks import get_task
from tests.backend_helpers import FAST_RETRY, serving
from tests.servers.anthropic_api import FakeAnthropic
from tests.servers.batches import BatchTiming, Expire
from tests.servers.openai_compat import FakeOpenAI
from tests.test_budgets import VaryingDepth
from tests.test_cli import HPT
from tests.test_cli import hpt as run_hpt

PROVIDERS = ("openai", "anthropic")
MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-test-1"}
# Batches end a tenth of a second after they are created; hpt sends a batch 0.1 s after the
# last request came and asks its status every 0.1 s: a level of the ladder takes ~0.3 s.
FAST = BatchTiming(validating_s=0.02, in_progress_s=0.05, finalizing_s=0.02)
WAIT = POLL = 0.1
LIMIT = 10

Fake = FakeOpenAI | FakeAnthropic


@dataclass
class Served:
    provider: str
    fake: Fake
    url: str  # what --base-url takes

    @property
    def label(self) -> str:
        return f"{self.provider}:{MODELS[self.provider]}"


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def start(boolq_answers: dict[str, str]) -> Iterator[Callable[[str], Served]]:
    """Starts a server of a provider (a new one each call) whose model resolves each BoolQ
    sample from a level of its own (VaryingDepth), with batches that end at once."""
    with contextlib.ExitStack() as stack:

        def started(provider: str) -> Served:
            responder = VaryingDepth(boolq_answers)
            fake: Fake
            if provider == "openai":
                fake = FakeOpenAI(responder, model_ids=(MODELS[provider],), batch_timing=FAST)
                server = stack.enter_context(serving(fake.app()))
                return Served(provider, fake, server.base_url)
            fake = FakeAnthropic(responder, model_ids=(MODELS[provider],), batch_timing=FAST)
            server = stack.enter_context(serving(fake.app()))
            return Served(provider, fake, server.root_url)

        yield started


def spec(served: Served, data_dir: Path, out: Path, *, batch: bool, **extra: Any) -> RunSpec:
    settings: dict[str, Any] = dict(
        dataset="boolq", model=served.label, base_url=served.url, data_dir=data_dir, out=out,
        limit=LIMIT, params={"max_tokens": 64}, retry=FAST_RETRY, cache=False,
    )  # fmt: skip
    if batch:
        settings.update(batch=True, batch_wait_s=WAIT, batch_poll_s=POLL)
    return RunSpec.model_validate({**settings, **extra})


def run(s: RunSpec, observer: RunObserver | None = None) -> RunResult:
    return asyncio.run(run_evaluation(s, observer))


class Watching(SilentObserver):
    """Keeps the backends' live counters a run hands its observer."""

    def __init__(self) -> None:
        self.stats: dict[str, BackendStats] = {}
        self.done_when_recorded: list[int] = []  # batches done when each sample was recorded

    def watch(self, backends: Mapping[str, BackendStats]) -> None:
        self.stats = dict(backends)

    def recorded(self, record: SampleRecord, tally: Tally) -> None:
        self.done_when_recorded.append(self.stats[record.model].batches_done)


def cli_args(served: Served, data_dir: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--dataset", "boolq", "--model", served.label, "--base-url", served.url,
            "--data-dir", str(data_dir), "--out", str(out), "--limit", str(LIMIT),
            "--max-tokens", "64", "--no-progress", "--batch", "--batch-wait", str(WAIT),
            "--batch-poll", str(POLL), *extra]  # fmt: skip


def lines(out: Path) -> list[dict[str, Any]]:
    """samples.jsonl as written: a (sample, draw) recorded twice shows twice."""
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def calls(record: dict[str, Any]) -> list[dict[str, Any]]:
    chosen = [s["call"] for s in record.get("selections", []) if s.get("call")]
    return [c for a in record["attempts"] for c in a["calls"]] + chosen


def normalised(out: Path, *, cached: bool = False) -> list[dict[str, Any]]:
    """The records without what may differ between a direct and a batched run: timings,
    latencies, the ``batched`` flag (and, where ``cached``, whether hpt's response cache
    answered: a resumed run answers there what the first process was answered)."""
    records = lines(out)
    for r in records:
        r.pop("wall_s")
        for c in calls(r):
            c.pop("latency_s")
            c.pop("batched", None)
            if cached:
                c.pop("cached")
    return sorted(records, key=lambda r: (r["sample_id"], r["draw"]))


def every_call(out: Path) -> list[dict[str, Any]]:
    return [c for r in lines(out) for c in calls(r)]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def journal(out: Path) -> list[dict[str, Any]]:
    return list(read_json(out / "batches.json")["batches"])


PRICE = 1000.0  # USD per million tokens: a token (a word, on the servers) is a tenth of a cent


def batch_cost(out: Path) -> float:
    """What the records' calls cost at PRICE, batched: half (the prices file gives no batch
    rates)."""
    tokens = sum(c["usage"]["prompt_tokens"] + c["usage"]["completion_tokens"]
                 for c in every_call(out))  # fmt: skip
    return tokens * PRICE / 2 / 1e6


def assert_all_batched(served: Served, out: Path) -> None:
    """Every call of the run went through a batch, none directly, each key submitted once."""
    made = every_call(out)
    assert made and all(c.get("batched") for c in made)
    assert served.fake.direct_calls == 0
    assert set(served.fake.ledger.submitted.values()) == {1}
    # One request per call the records hold: no call was asked of the provider twice.
    assert len(served.fake.ledger.submitted) == len(made)


# -- the same records with and without batches ---------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batched_ladder_records_what_a_direct_run_does(
    provider: str, start: Callable[[str], Served], data_dir: Path, tmp_path: Path
) -> None:
    direct, batched = start(provider), start(provider)
    run(spec(direct, data_dir, tmp_path / "direct", batch=False))
    watching = Watching()
    result = run(spec(batched, data_dir, tmp_path / "batched", batch=True), watching)
    assert result.complete
    expected = normalised(tmp_path / "direct")
    assert normalised(tmp_path / "batched") == expected
    # The ladder's depth varies by sample: several levels resolve, some samples none.
    levels = Counter(r["resolved_level"] for r in expected)
    assert len(levels) >= 4 and None in levels
    assert not any(c.get("batched") for c in every_call(tmp_path / "direct"))
    assert direct.fake.direct_calls == len(every_call(tmp_path / "direct"))
    assert_all_batched(batched, tmp_path / "batched")
    # One batch per round of the ladder: every sample's level 1 in the first.
    sizes = [len(b.custom_ids) for b in batched.fake.ledger.batches.values()]
    assert sizes[0] == LIMIT and sum(sizes) == len(every_call(tmp_path / "batched"))
    entries = journal(tmp_path / "batched")
    assert [e["id"] for e in entries] == list(batched.fake.ledger.batches)
    assert {e["state"] for e in entries} == {"collected"}
    assert all((tmp_path / "batched" / "batches" / f"{e['local_id']}.jsonl").is_file()
               for e in entries)  # fmt: skip
    # The summaries agree but for the count of batched calls.
    (plain,) = read_json(tmp_path / "direct" / "summary.json")["cells"]
    (cell,) = read_json(tmp_path / "batched" / "summary.json")["cells"]
    assert "batched_calls" not in plain
    assert cell.pop("batched_calls") == cell["calls"] == plain["calls"]
    assert cell == plain
    # What the live display shows: the batches and their requests, all done at the end.
    stats = watching.stats[batched.label]
    assert (stats.batches_done, stats.batch_requests_done) == (len(sizes), sum(sizes))
    assert stats.calls == sum(sizes)
    assert not (stats.batches_in_progress or stats.batch_requests_in_progress)
    assert not (stats.batches_waiting or stats.batch_requests_waiting)
    # Samples resolved at level 1 were recorded once the first batch was done, the last
    # sample once every batch was.
    assert 1 <= watching.done_when_recorded[0] and watching.done_when_recorded[-1] == len(sizes)


# -- batches that expire or fail -----------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_requests_an_expired_or_failed_batch_left_unanswered_go_into_later_batches(
    provider: str, start: Callable[[str], Served], data_dir: Path, tmp_path: Path
) -> None:
    direct, batched = start(provider), start(provider)
    run(spec(direct, data_dir, tmp_path / "direct", batch=False))
    fake = batched.fake
    # The first batch answers three of its requests and expires. Then OpenAI's second batch
    # fails validation; Anthropic validates at create and has no failed batch: its first
    # create is refused as overloaded instead (529: nothing was made; tried again).
    fake.batch_faults.batch.append(Expire(answered=3))
    if provider == "openai":
        fake.batch_faults.batch.append("fail")
    else:
        fake.batch_faults.create.append(529)
    result = run(spec(batched, data_dir, tmp_path / "batched", batch=True))
    assert result.complete
    assert normalised(tmp_path / "batched") == normalised(tmp_path / "direct")
    made = every_call(tmp_path / "batched")
    assert all(c["batched"] for c in made) and fake.direct_calls == 0
    first, second, *_ = fake.ledger.batches.values()
    assert first.statuses[-1] == ("expired" if provider == "openai" else "ended")
    refused = 0 if provider == "openai" else 1
    assert fake.ledger.create_calls == len(fake.ledger.batches) + refused
    unanswered = set(first.custom_ids[3:])
    assert len(unanswered) == LIMIT - 3 and unanswered <= set(second.custom_ids)
    # Sent again: what the expired batch did not answer, and (OpenAI) all the failed one held;
    # nothing answered was sent again.
    again = Counter(unanswered)
    if provider == "openai":
        assert second.statuses[-1] == "failed"
        again.update(second.custom_ids)
    assert fake.ledger.submitted == Counter({c: 1 for c in fake.ledger.submitted}) + again
    assert len(fake.ledger.submitted) == len(made)
    states = [e["state"] for e in journal(tmp_path / "batched")]
    if provider == "openai":
        assert states[:2] == ["collected", "failed"]
    assert set(states) <= {"collected", "failed"}


# -- requests that fail inside their batch -------------------------------------------------


def prompt_text(body: dict[str, Any]) -> str:
    """Every text of a request's prompt (an OpenAI body or Anthropic params)."""
    system = body.get("system") or []
    texts = [system] if isinstance(system, str) else [b["text"] for b in system]
    for m in body["messages"]:
        content = m["content"]
        texts += [content] if isinstance(content, str) else [b["text"] for b in content]
    return "\n".join(texts)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_requests_failing_inside_batches_are_retried_refused_or_given_up(
    provider: str, start: Callable[[str], Served], data_dir: Path, tmp_path: Path
) -> None:
    direct, batched = start(provider), start(provider)
    run(spec(direct, data_dir, tmp_path / "direct", batch=False))
    expected = {r["sample_id"]: r for r in normalised(tmp_path / "direct")}
    questions = {
        s.id: str(s.fields["question"]) for s in get_task("boolq", data_dir).load_samples()
    }
    # Two samples the direct run resolved above level 1: one is refused (400) at its first
    # call, the other's calls fail with a server error however often they are sent.
    refused, flaky = [i for i, r in expected.items() if r["resolved_level"] not in (None, 1)][:2]
    assert sum(questions[refused] in questions[i] for i in expected) == 1
    assert sum(questions[flaky] in questions[i] for i in expected) == 1
    fake = batched.fake

    outcomes: dict[str, list[int | None]] = {}  # custom_id -> each time it was answered

    def request_error(custom_id: str, body: dict[str, Any]) -> int | None:
        text = prompt_text(body)
        if questions[refused] in text:
            status: int | None = 400
        elif questions[flaky] in text:
            status = 500
        else:  # a quarter of the other requests fail once (transiently)
            status = 500 if custom_id < "4" and fake.ledger.submitted[custom_id] == 1 else None
        outcomes.setdefault(custom_id, []).append(status)
        return status

    fake.batch_faults.request_error = request_error
    retry = {**FAST_RETRY, "max_attempts": 2}
    run(spec(batched, data_dir, tmp_path / "batched", batch=True, retry=retry))
    got = {r["sample_id"]: r for r in normalised(tmp_path / "batched")}
    assert got.keys() == expected.keys()
    assert {i: r for i, r in got.items() if i not in (refused, flaky)} == {
        i: r for i, r in expected.items() if i not in (refused, flaky)
    }
    # The refused request ended its climb at level 1 with the provider's reason.
    bad = got[refused]
    assert (bad["resolved_level"], bad["hpi_score"]) == (None, None)
    assert [a["level"] for a in bad["attempts"]] == [1]
    reason = {"openai": "HTTP 400", "anthropic": "invalid_request_error"}[provider]
    assert bad["error"].startswith(f"{batched.label}: {reason}"), bad["error"]
    # The failing one was sent in two batches (--max-attempts 2), then given up.
    lost = got[flaky]
    assert (lost["resolved_level"], lost["hpi_score"]) == (None, None)
    assert [a["level"] for a in lost["attempts"]] == [1]
    assert lost["error"].startswith(f"{batched.label}: gave up after 2 batches: "), lost["error"]
    # Each request was sent as often as it was answered: a refusal once, a server error
    # again in a later batch, an answer never again.
    histories = Counter(tuple(h) for h in outcomes.values())
    assert histories[(400,)] == 1 and histories[(500, 500)] == 1
    assert histories[(500, None)] > 0 and histories[(None,)] > 0
    assert set(histories) == {(400,), (500, 500), (500, None), (None,)}
    assert fake.ledger.submitted == Counter({c: len(h) for c, h in outcomes.items()})
    assert fake.direct_calls == 0


# -- killed while batches are out, then resumed --------------------------------------------

# Batches created after the first take seconds to answer: a run is killed while one is out.
SLOW = BatchTiming(validating_s=0.0, in_progress_s=2.0, finalizing_s=0.0)


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert proc.poll() is None, f"hpt ended (exit {proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within 30 s"
        time.sleep(0.01)


def out_batches(out: Path) -> list[dict[str, Any]]:
    """The journal's batches so far ([] before it exists; it is replaced whole, atomically)."""
    return journal(out) if (out / "batches.json").is_file() else []


def out_at(batches: list[dict[str, Any]]) -> int | None:
    """Where the journal has a batch out (submitted, not collected) after collected ones."""
    for i, entry in enumerate(batches):
        if entry["state"] != "collected":
            submitted = entry["id"] is not None and entry["state"] != "failed"
            return i if i > 0 and submitted else None
    return None


# Following a batch after the restart is the provider's part; where the resumed climbs find
# what the first process collected (the saved results, or the response cache) is not.
@pytest.mark.parametrize(
    ("provider", "cache"),
    [("openai", False), ("anthropic", True)],
    ids=["openai-no-cache", "anthropic-cache"],
)
def test_a_run_killed_while_its_batches_are_out_resumes_sending_nothing_twice(
    provider: str, cache: bool, start: Callable[[str], Served], data_dir: Path, tmp_path: Path
) -> None:
    direct, batched = start(provider), start(provider)
    run(spec(direct, data_dir, tmp_path / "direct", batch=False))
    fake, out = batched.fake, tmp_path / "run"
    # Under a budget: spend.json must count each request once, whichever process collected it.
    prices = tmp_path / "prices.toml"
    prices.write_text(f'["{batched.label}"]\ninput = {PRICE}\noutput = {PRICE}\n')
    args = cli_args(batched, data_dir, out, "--prices", str(prices), "--budget-usd", "100",
                    *([] if cache else ["--no-cache"]))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.endswith("_BASE_URL")}
    with (tmp_path / "stderr").open("wb") as stderr:
        proc = subprocess.Popen([HPT, *args], stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    try:
        wait_for(lambda: len(fake.ledger.batches) >= 1, proc, "a first batch")
        fake.batch_timing = SLOW
        # A later batch submitted and its id saved, in progress at the provider.
        wait_for(lambda: out_at(out_batches(out)) is not None, proc, "a batch out")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "stderr").read_text()
    before = out_batches(out)
    out_then = out_at(before)
    assert out_then is not None
    kept = lines(out)
    assert len(kept) < LIMIT
    fake.batch_timing = FAST

    resumed = run_hpt("run", "--resume", str(out), "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert read_json(out / "summary.json")["complete"] is True
    records = lines(out)
    assert len(records) == LIMIT == len({(r["sample_id"], r["draw"]) for r in records})
    assert {r["sample_id"] for r in kept} <= {r["sample_id"] for r in records}
    assert normalised(out, cached=cache) == normalised(tmp_path / "direct", cached=cache)
    assert_all_batched(batched, out)
    # The calls the first process had collected answer the resumed climbs: from the response
    # cache where it is on, else from the saved results (not cached: first used here).
    cached = sum(bool(c.get("cached")) for c in every_call(out))
    assert cached > 0 if cache else cached == 0
    # The batch out at the kill was followed to its end by the second process.
    after = journal(out)
    assert after[out_then]["local_id"] == before[out_then]["local_id"]
    assert {e["state"] for e in after} == {"collected"}
    assert [e["id"] for e in after] == list(fake.ledger.batches)
    spend = read_json(out / "spend.json")
    assert spend["calls"] == len(fake.ledger.submitted)
    assert spend["spent_usd"] == pytest.approx(batch_cost(out))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_run_killed_while_submitting_a_batch_finds_it_or_says_it_may_pay_twice(
    provider: str, start: Callable[[str], Served], data_dir: Path, tmp_path: Path
) -> None:
    direct, batched = start(provider), start(provider)
    ladder = ["role", "zero_shot_cot"]  # two levels are enough here
    run(spec(direct, data_dir, tmp_path / "direct", batch=False, strategies=ladder))
    fake, out = batched.fake, tmp_path / "run"
    args = cli_args(batched, data_dir, out, "--no-cache", "--strategies", ",".join(ladder))
    # The first batch is created a second after its request came: hpt is killed meanwhile,
    # with the batch in its journal and no id for it.
    fake.batch_faults.create.append("slow:1")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_BASE_URL")}
    with (tmp_path / "stderr").open("wb") as stderr:
        proc = subprocess.Popen([HPT, *args], stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    try:
        wait_for(lambda: fake.ledger.create_calls >= 1, proc, "a batch being created")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    [entry] = out_batches(out)
    assert (entry["state"], entry["id"]) == ("submitting", None)
    deadline = time.monotonic() + 10
    while not fake.ledger.batches and time.monotonic() < deadline:
        time.sleep(0.01)
    [lost] = fake.ledger.batches.values()  # the provider made it all the same

    resumed = run_hpt("run", "--resume", str(out), "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert normalised(out) == normalised(tmp_path / "direct")
    first = journal(out)[0]
    assert first["local_id"] == entry["local_id"]
    if provider == "openai":
        # Found by the local id in its metadata, followed, collected: nothing sent twice.
        assert (first["id"], first["state"]) == (lost.id, "collected")
        assert_all_batched(batched, out)
    else:
        # Message batches carry no metadata: its requests were asked again, as said.
        assert first["state"] == "failed" and first["id"] is None
        assert f"batch {entry['local_id']} was being submitted" in resumed.stderr
        assert "they are paid twice" in resumed.stderr
        again = Counter(lost.custom_ids)
        assert fake.ledger.submitted == Counter(set(fake.ledger.submitted)) + again


# -- a budget that runs out in batch mode, and a resume that finishes the run --------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_budget_stops_a_batched_run_and_a_higher_one_finishes_it(
    provider: str, start: Callable[[str], Served], data_dir: Path, tmp_path: Path
) -> None:
    direct, batched = start(provider), start(provider)
    # Three levels: the budget runs out at the third, whose three-shot prompts are long.
    ladder = ["role", "zero_shot_cot", "three_shot_cot"]
    run(spec(direct, data_dir, tmp_path / "direct", batch=False, strategies=ladder))
    fake, out = batched.fake, tmp_path / "run"
    prices = tmp_path / "prices.toml"
    prices.write_text(f'["{batched.label}"]\ninput = {PRICE}\noutput = {PRICE}\n')
    first = run_hpt(*cli_args(batched, data_dir, out, "--strategies", ",".join(ladder),
                              "--prices", str(prices), "--budget-usd", "4"))  # fmt: skip
    assert first.returncode == 3, first.stderr
    assert "hpt: the run stopped at its budget (--budget-usd 4): spent $" in first.stderr
    assert re.search(rf"continue with a higher budget: hpt run --resume {re.escape(str(out))} "
                     r"--budget-usd \d", first.stderr), first.stderr  # fmt: skip
    assert read_json(out / "summary.json")["complete"] is False
    kept = lines(out)
    assert 0 < len(kept) < LIMIT
    spend = read_json(out / "spend.json")
    sent = len(fake.ledger.submitted)
    assert spend["calls"] == sent and spend["spent_usd"] <= 4
    resumed = run_hpt("run", "--resume", str(out), "--budget-usd", "100", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert read_json(out / "summary.json")["complete"] is True
    records = lines(out)
    assert len(records) == LIMIT == len({(r["sample_id"], r["draw"]) for r in records})
    assert normalised(out, cached=True) == normalised(tmp_path / "direct", cached=True)
    # No request was sent twice across the two processes, and every one sent was billed, at
    # half the price (the prices file gives no batch rates).
    assert_all_batched(batched, out)
    assert len(fake.ledger.submitted) > sent
    total = read_json(out / "spend.json")
    assert total["calls"] == len(fake.ledger.submitted)
    assert total["spent_usd"] == pytest.approx(batch_cost(out))
    assert spend["spent_usd"] < total["spent_usd"] <= 100


# -- Anthropic's prompt cache, end to end --------------------------------------------------


@pytest.fixture
def one_calculator(data_dir: Path, tmp_path: Path) -> Path:
    """Offline MedCalc data of one calculator (CHA2DS2-VASc): every sample's three-shot
    prompt opens with the same three exemplars (about 2,000 words), a prefix to cache."""
    with (data_dir / "medcalc" / "test_data.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    mine = tmp_path / "data"
    (mine / "medcalc").mkdir(parents=True)
    with (mine / "medcalc" / "test_data.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if r["Calculator ID"] == "4")
    return mine


@pytest.mark.parametrize("batch", [False, True], ids=["direct", "batched"])
def test_anthropic_prompt_cache_reads_the_shared_exemplars_of_later_samples(
    batch: bool, one_calculator: Path, tmp_path: Path
) -> None:
    usage: dict[str, list[list[dict[str, Any]]]] = {}
    texts: dict[str, list[dict[str, Any]]] = {}
    for setting in ("auto", "off"):
        fake = FakeAnthropic(lambda body: "I am not sure.", model_ids=(MODELS["anthropic"],),
                             batch_timing=FAST)  # fmt: skip
        out = tmp_path / setting
        with serving(fake.app()) as server:
            served = Served("anthropic", fake, server.root_url)
            # One sample at a time where called directly: the first writes, the next read.
            run(spec(served, one_calculator, out, batch=batch, dataset="medcalc", limit=5,
                     concurrency=1, strategies=["role", "three_shot_cot"],
                     prompt_cache=setting))  # fmt: skip
        records = normalised(out)
        usage[setting] = [[c.pop("usage") for c in calls(r)] for r in records]
        texts[setting] = records
        summary = read_json(out / "summary.json")["cells"][0]
        if setting == "auto":
            assert summary["cached_input_share"] > 0
        else:
            assert not summary.get("cached_input_share")
    # The same prompts and completions: only how the input was billed differs.
    assert texts["auto"] == texts["off"]
    # As many input tokens (the server counts words per text block: the word the mark cuts
    # in two counts twice).
    for marked, plain in zip(usage["auto"], usage["off"], strict=True):
        grown = [
            a["prompt_tokens"] - o["prompt_tokens"] for a, o in zip(marked, plain, strict=True)
        ]
        assert grown == [0, 1]
    assert all(u["cache_read_tokens"] == u["cache_write_tokens"] == 0
               for r in usage["off"] for u in r)  # fmt: skip
    # Level 1 (the sample's own text first) is never cached; level 2's exemplars are
    # written by the first sample asked and read by every later one.
    role = [r[0] for r in usage["auto"]]
    assert all(u["cache_read_tokens"] == u["cache_write_tokens"] == 0 for u in role)
    three_shot = [r[1] for r in usage["auto"]]
    writes = [u["cache_write_tokens"] for u in three_shot]
    reads = [u["cache_read_tokens"] for u in three_shot]
    assert sorted(writes)[:-1] == [0] * 4 and max(writes) > 1000
    assert sorted(reads) == [0] + [max(writes)] * 4
    assert all(w == 0 or r == 0 for w, r in zip(writes, reads, strict=True))


def test_a_run_stopped_by_an_anthropic_batch_that_may_exist_says_how_to_go_on(
    start: Callable[[str], Served], data_dir: Path, tmp_path: Path
) -> None:
    # A create answered 500 may have made the batch; Anthropic cannot be asked: the run stops
    # with one line that says what to check and, the run having begun, how to go on.
    served = start("anthropic")
    served.fake.batch_faults.create.append(500)
    out = tmp_path / "run"
    result = run_hpt(*cli_args(served, data_dir, out))
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"hpt: error: {served.label}: batch ")
    assert "may have been created at anthropic (HTTP 500)" in line
    assert line.endswith(
        f"; finished samples are kept in {out}; continue with: hpt run --resume {out}"
    )
    assert (out / "run.json").is_file()
