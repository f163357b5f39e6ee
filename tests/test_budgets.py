"""Budgets, call limits and the cost estimate, run for real against the loopback OpenAI server:
a budget that runs out mid-run (the run stops, keeps what it finished, says what it spent and
how to go on, exit 3) and a resume under a higher one that finishes it, every call sent
counted in spend.json at the run's prices; --max-calls; a model without a price refused
before any call; --estimate N projecting the whole run within its interval on a ladder
whose depth varies by sample; the prices a run used in run.json; and runs without any of
these options unchanged."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hpt
from hpt.backends.errors import BudgetSpent
from hpt.graphs import DEFAULT_LADDER as LADDER
from hpt.orchestrator.budget import SPEND, Budget, Ledger, Spend, load_spend
from hpt.orchestrator.runner import run_evaluation
from hpt.orchestrator.scheduling import budget_spent
from hpt.orchestrator.spec import RunSpec
from hpt.results.costs import ModelPrice, PriceError
from hpt.results.reader import read_records
from hpt.results.store import RunStore
from hpt.tasks import get_task
from hpt.types import Completion, Usage
from tests.backend_helpers import FAST_RETRY
from tests.servers.answer_key import KeyedResponder
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.servers.tgi import FakeTGI
from tests.test_cli import assert_user_error
from tests.test_cli import hpt as run_hpt

MODEL = "gpt-4o-mini"
LABEL = f"openai:{MODEL}"
# USD per million tokens: a token (a word, on the test server) costs a tenth of a cent.
PRICE = 1000.0
NEW_KEYS = {"prices", "budget_usd", "max_calls", "batch", "batch_size", "batch_wait_s",
            "batch_poll_s", "prices_file", "prompt_cache"}  # fmt: skip


class VaryingDepth:
    """A model that resolves each BoolQ sample from a level of its own (fixed by a hash of
    its question; some never), so a ladder's depth, and what a sample costs, vary."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.questions = [q for q in answers if "|" not in q]
        self.keyed = [KeyedResponder(answers, level) for level in (*LADDER, None)]

    def __call__(self, body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"]
        # The sample's own question is the last one a prompt shows (exemplars come first).
        where = max(self.questions, key=last.rfind)
        depth = zlib.crc32(where.encode()) % len(self.keyed) if where in last else 0
        return self.keyed[depth](body)


def _cost(fake: FakeOpenAI) -> float:
    """What every request the server answered costs at PRICE: one token per word."""
    words = 0
    for body in fake.requests:
        words += sum(len(m["content"].split()) for m in body["messages"])
        words += len(str(fake.responder(body)).split())
    return words * PRICE / 1e6


@pytest.fixture
def priced(boolq_answers: dict[str, str], tmp_path: Path) -> Iterator[tuple[FakeOpenAI, str, Path]]:
    fake = FakeOpenAI(VaryingDepth(boolq_answers), model_ids=(MODEL,))
    server = ServerThread(fake.app()).start()
    prices = tmp_path / "prices.toml"
    prices.write_text(f'["{LABEL}"]\ninput = {PRICE}\noutput = {PRICE}\n')
    yield fake, server.base_url, prices
    server.stop()


def _args(base_url: str, data_dir: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--dataset", "boolq", "--model", LABEL, "--base-url", base_url,
            "--data-dir", str(data_dir), "--out", str(out), "--max-tokens", "64",
            "--no-progress", *extra]  # fmt: skip


def _keys(out: Path) -> list[tuple[Any, ...]]:
    return [r.key for r in read_records(out, None)]


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_a_budget_stops_the_run_and_a_higher_one_finishes_it(
    priced: tuple[FakeOpenAI, str, Path], data_dir: Path, tmp_path: Path
) -> None:
    fake, base_url, prices = priced
    out = tmp_path / "run"
    first = run_hpt(*_args(base_url, data_dir, out, "--limit", "8", "--concurrency", "2",
                           "--prices", str(prices), "--budget-usd", "2"))  # fmt: skip
    assert first.returncode == 3, first.stderr
    assert "Traceback" not in first.stderr
    assert "hpt: the run stopped at its budget (--budget-usd 2): spent $" in first.stderr
    assert f"{LABEL} $" in first.stderr
    assert f"continue with a higher budget: hpt run --resume {out} --budget-usd 4" in first.stderr
    assert _json(out / "summary.json")["complete"] is False
    kept = _keys(out)
    assert 0 < len(kept) < 8 and len(set(kept)) == len(kept)
    spend = _json(out / "spend.json")
    # Every call sent was counted, at the run's prices, and the budget was never passed.
    assert spend["calls"] == fake.served == len(fake.requests)
    assert spend["by_model"] == {LABEL: {"usd": spend["spent_usd"], "calls": spend["calls"]}}
    assert spend["spent_usd"] == pytest.approx(_cost(fake))
    assert spend["spent_usd"] <= 2
    saved = _json(out / "run.json")
    assert saved["budget_usd"] == 2 and saved["prices_file"] == str(prices)
    assert saved["prices"][LABEL]["input"] == PRICE
    assert saved["prices"][LABEL]["source"].startswith("prices.toml")

    prices.unlink()  # the prices the run recorded stand
    resumed = run_hpt("run", "--resume", str(out), "--budget-usd", "100", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert _json(out / "summary.json")["complete"] is True
    keys = _keys(out)
    assert len(keys) == len(set(keys)) == 8
    assert set(kept) <= set(keys)
    total = _json(out / "spend.json")
    # What was spent before counts on: the ledger covers both processes' calls.
    assert total["calls"] == fake.served
    assert total["spent_usd"] == pytest.approx(_cost(fake))
    assert spend["spent_usd"] < total["spent_usd"] <= 100
    # The next resume goes on under the budget it was given.
    assert _json(out / "run.json")["budget_usd"] == 100


def test_max_calls_stops_after_that_many_calls(
    priced: tuple[FakeOpenAI, str, Path], data_dir: Path, tmp_path: Path
) -> None:
    fake, base_url, _ = priced
    out = tmp_path / "run"
    result = run_hpt(*_args(base_url, data_dir, out, "--limit", "6", "--concurrency", "3",
                            "--max-calls", "5"))  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert fake.served == 5
    assert _json(out / "spend.json")["calls"] == 5
    # Without a price the calls are counted, not costed, and the run says so.
    assert f"{LABEL} unpriced on 5 calls" in result.stderr
    assert f"hpt run --resume {out} --max-calls 10" in result.stderr
    assert len(_keys(out)) < 6


def test_a_model_without_a_price_is_refused_before_any_call(
    priced: tuple[FakeOpenAI, str, Path], data_dir: Path, tmp_path: Path
) -> None:
    fake, base_url, _ = priced
    out = tmp_path / "run"
    result = run_hpt(*_args(base_url, data_dir, out, "--limit", "2", "--budget-usd", "1"))
    assert_user_error(result, "--budget-usd needs the price", LABEL, "--prices FILE")
    assert fake.served == 0
    assert not out.exists()


async def test_the_estimate_holds_the_whole_runs_cost(
    priced: tuple[FakeOpenAI, str, Path], data_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake, base_url, prices = priced
    out = tmp_path / "run"
    settings: dict[str, Any] = dict(
        datasets="boolq", models=LABEL, base_url=base_url, limit=40, data_dir=data_dir,
        params={"max_tokens": 64}, prices_file=prices, retry=FAST_RETRY,
    )  # fmt: skip
    first = await hpt.evaluate(out=out, estimate=10, **settings)
    estimate = first.estimate
    assert estimate is not None and not first.complete
    assert len(_keys(out)) == 10
    (cell,) = estimate.cells
    assert (cell.run, cell.planned) == (10, 40)
    # What was spent, and the 30 climbs left at the mean of the 10 run.
    assert cell.projected_usd == pytest.approx(cell.spent_usd * 4)
    assert estimate.spent_usd == pytest.approx(_cost(fake))
    assert estimate.calls == fake.served
    depths = {len(r.attempts) for r in read_records(out, None)}
    assert len(depths) > 2  # the samples climb to different levels
    finished = await hpt.resume(out)
    assert finished.complete and len(_keys(out)) == 40
    actual = _cost(fake)
    assert estimate.low_usd <= actual <= estimate.high_usd
    assert estimate.low_usd < estimate.projected_usd < estimate.high_usd


def test_the_estimate_on_the_command_line(
    priced: tuple[FakeOpenAI, str, Path], data_dir: Path, tmp_path: Path
) -> None:
    _, base_url, prices = priced
    out = tmp_path / "run"
    result = run_hpt(*_args(base_url, data_dir, out, "--limit", "8", "--estimate", "5",
                            "--prices", str(prices)))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "cost estimate (95% interval)" in result.stdout
    assert f"continue with: hpt run --resume {out}" in result.stdout
    assert "--budget-usd" in result.stdout
    assert len(_keys(out)) == 5
    assert _json(out / "summary.json")["complete"] is False
    # A second estimate of the same run answers from the response cache: it says so.
    again = run_hpt(*_args(base_url, data_dir, tmp_path / "again", "--limit", "8",
                           "--estimate", "5", "--prices", str(prices)))  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "a warm cache makes the estimate low" in again.stderr
    assert run_hpt("run", "--resume", str(out), "--no-progress").returncode == 0
    assert len(_keys(out)) == 8
    # Too few samples for an interval: refused before anything is run.
    few = run_hpt(*_args(base_url, data_dir, tmp_path / "few", "--limit", "8", "--estimate", "4"))
    assert_user_error(few, "--estimate must be at least 5")
    assert not (tmp_path / "few").exists()


def test_the_estimate_runs_the_samples_a_limit_would_choose(
    priced: tuple[FakeOpenAI, str, Path], data_dir: Path, tmp_path: Path
) -> None:
    # No --limit: the whole dataset is planned, and the estimate's samples are the seeded
    # choice --limit 5 --seed 3 makes, not the file's first rows.
    _, base_url, prices = priced
    out = tmp_path / "run"
    result = run_hpt(*_args(base_url, data_dir, out, "--seed", "3", "--estimate", "5",
                            "--prices", str(prices)))  # fmt: skip
    assert result.returncode == 0, result.stderr
    task = get_task("boolq", data_dir)
    every = task.load_samples()
    chosen = {s.id for s in task.choose(every, 5, 3)}
    assert {r.sample_id for r in read_records(out, None)} == chosen
    assert chosen != {s.id for s in every[:5]}
    assert f"5/{len(every)}" in result.stdout


def test_runs_without_the_new_options_are_unchanged(
    priced: tuple[FakeOpenAI, str, Path], data_dir: Path, tmp_path: Path
) -> None:
    _, base_url, _ = priced
    out = tmp_path / "run"
    result = run_hpt(*_args(base_url, data_dir, out, "--limit", "2"))
    assert result.returncode == 0, result.stderr
    assert not NEW_KEYS & set(_json(out / "run.json"))
    assert not (out / "spend.json").exists()


def test_a_refusal_wrapped_on_its_way_out_still_stops_the_run() -> None:
    refused = BudgetSpent("--max-calls 5")
    try:
        try:
            raise refused
        except BudgetSpent as exc:
            raise RuntimeError("DSPy: the LM call failed") from exc
    except RuntimeError as wrapped:
        assert budget_spent(wrapped)
        assert budget_spent(ExceptionGroup("draws", [ValueError("x"), wrapped]))
    assert not budget_spent(ExceptionGroup("draws", [ValueError("x")]))


def test_batch_mode_is_billed_at_batch_prices_and_said_where_it_cannot_batch(
    priced: tuple[FakeOpenAI, str, Path], boolq_answers: dict[str, str], data_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    _, base_url, prices = priced
    out = tmp_path / "run"
    tgi = ServerThread(FakeTGI(responder=KeyedResponder(boolq_answers, "role")).app()).start()
    try:
        result = run_hpt(*_args(base_url, data_dir, out, "--limit", "4", "--prices", str(prices),
                                "--budget-usd", "50", "--batch", "--batch-wait", "0.1",
                                "--batch-poll", "0.05", "--extractor-model",
                                f"tgi:{tgi.root_url}"))  # fmt: skip
    finally:
        tgi.stop()
    assert result.returncode == 0, result.stderr
    assert f"tgi:{tgi.root_url}: its provider has no Batch API; called directly" in result.stderr
    calls = [c for r in read_records(out, None) for c in r.all_calls()]
    batched = [c for c in calls if c.model == LABEL]
    assert batched and all(c.batched for c in batched)
    assert all(not c.batched for c in calls if c.model != LABEL)
    tokens = sum(c.usage.prompt_tokens + c.usage.completion_tokens for c in batched)
    spend = _json(out / "spend.json")
    # Half the price: the prices file gives no batch rates.
    assert spend["by_model"][LABEL] == {"usd": pytest.approx(tokens * PRICE / 2 / 1e6),
                                        "calls": len(batched)}  # fmt: skip
    saved = _json(out / "run.json")
    assert saved["batch"] is True and saved["batch_wait_s"] == 0.1
    assert "batch_size" not in saved
    assert (out / "batches.json").is_file()


def test_prompt_cache_reaches_the_models_that_take_it() -> None:
    given = RunSpec(dataset="boolq", model=["anthropic:claude-sonnet-4-5"], prompt_cache="off")
    config = given.resolve("anthropic:claude-sonnet-4-5").config
    assert config.model_dump()["prompt_cache"] == "off"
    assert given.model_dump(mode="json")["prompt_cache"] == "off"
    default = RunSpec(dataset="boolq", model=["anthropic:claude-sonnet-4-5"])
    assert "prompt_cache" not in default.model_dump(mode="json")
    # A model without the setting is resolved as before.
    assert "prompt_cache" not in given.resolve("openai:gpt-4o").config.model_dump()


def test_a_run_that_kept_no_ledger_counts_its_records_against_a_budget(
    priced: tuple[FakeOpenAI, str, Path], data_dir: Path, tmp_path: Path
) -> None:
    fake, base_url, prices = priced
    out = tmp_path / "run"
    first = run_hpt(*_args(base_url, data_dir, out, "--limit", "8", "--estimate", "5",
                           "--prices", str(prices)))  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert not (out / "spend.json").exists()
    sent, spent = fake.served, _cost(fake)
    # Below what the first five samples cost: nothing more may be sent.
    resumed = run_hpt("run", "--resume", str(out), "--budget-usd", f"{spent / 2}", "--no-progress")
    assert resumed.returncode == 3, resumed.stderr
    assert fake.served == sent
    assert _json(out / "spend.json")["spent_usd"] == pytest.approx(spent)
    assert len(_keys(out)) == 5


async def test_a_hosted_models_name_served_through_the_base_url_variable_is_not_priced_as_it(
    priced: tuple[FakeOpenAI, str, Path],
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # openai:gpt-4o-mini is in the cost map, but OPENAI_BASE_URL sends it to another server.
    fake, base_url, _ = priced
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("OPENAI_API_KEY", fake.api_key)
    spec = RunSpec(dataset="boolq", model=LABEL, data_dir=data_dir, out=tmp_path / "run",
                   limit=1, budget_usd=1.0)  # fmt: skip
    with pytest.raises(PriceError, match=f"--budget-usd needs the price.*{MODEL}"):
        await run_evaluation(spec)
    assert fake.served == 0


async def test_a_batch_landing_is_saved_at_once_and_counted_on_resume(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    price = ModelPrice(input=PRICE, output=PRICE, source="prices.toml")
    budget = Budget({LABEL: price}, Ledger(lambda s: store.write_json(SPEND, s)), usd=10.0,
                    calls=None)  # fmt: skip
    tickets = [budget.admit(LABEL, 100, 64, batched=True) for _ in range(3)]
    usage = Usage(prompt_tokens=40, completion_tokens=10)
    for ticket in tickets[:2]:
        budget.settle(ticket, Completion(text="yes", usage=usage, batched=True))
    budget.settle(tickets[2], None)  # failed inside the batch: not billed
    assert not (tmp_path / SPEND).exists()  # the periodic writer is not running
    assert not budget.counted("20260101T000000-0a1b2c3d")
    await budget.landed("20260101T000000-0a1b2c3d")
    # Written before landed() returns (the journal may say "collected" only after it).
    saved = _json(tmp_path / SPEND)
    billed = 2 * 50 * PRICE / 2 / 1e6  # batch rate: half the price
    assert saved["spent_usd"] == pytest.approx(billed) and saved["calls"] == 2
    assert saved["batches"] == ["20260101T000000-0a1b2c3d"]
    assert budget.counted("20260101T000000-0a1b2c3d")
    # A resumed run's gate, from the ledger: the batch is counted, another is not.
    spend = load_spend(tmp_path)
    assert spend is not None
    again = Budget({LABEL: price}, Ledger(lambda s: None), usd=10.0, calls=None, spend=spend)
    assert again.counted("20260101T000000-0a1b2c3d")
    assert not again.counted("20260101T000001-99999999")
    assert again.spend.spent_usd == pytest.approx(billed)
    # A ledger without batches is written as before.
    assert "batches" not in Spend(spent_usd=1.0, calls=1).model_dump(mode="json")


async def test_a_batched_extractor_gathers_every_samples_call_into_one_batch(
    priced: tuple[FakeOpenAI, str, Path], boolq_answers: dict[str, str], data_dir: Path,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # The evaluated model (TGI) has no Batch API; only the extractor's calls are batched.
    # Climbed --concurrency 1 at a time, each would wait on a batch of its own.
    fake, base_url, _ = priced
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("OPENAI_API_KEY", fake.api_key)
    tgi = ServerThread(FakeTGI(responder=KeyedResponder(boolq_answers, "role")).app()).start()
    try:
        result = await hpt.evaluate(
            datasets="boolq", models=f"tgi:{tgi.root_url}", extractor_model=LABEL,
            strategies=["role"], data_dir=data_dir, out=tmp_path / "run", limit=6, concurrency=1,
            batch=True,
            batch_wait_s=0.5, batch_poll_s=0.05, params={"max_tokens": 64}, retry=FAST_RETRY,
        )  # fmt: skip
    finally:
        tgi.stop()
    assert result.complete
    records = list(read_records(tmp_path / "run", None))
    # One level, one extractor call per sample, all in one batch.
    extracted = [c for r in records for c in r.all_calls() if c.model == LABEL]
    assert len(extracted) == 6 and all(c.batched for c in extracted)
    assert len(fake.ledger.batches) == 1
    assert sum(fake.ledger.submitted.values()) == 6
    assert fake.direct_calls == 0


def test_in_batch_mode_the_suggested_budget_leaves_room_for_every_waiting_call(
    priced: tuple[FakeOpenAI, str, Path], data_dir: Path, tmp_path: Path
) -> None:
    # Every sample's level 1 waits at once, each reserving its worst case: a budget of $1
    # admits two or so, and twice it would admit hardly more on resume.
    fake, base_url, prices = priced
    out = tmp_path / "run"
    batch = ("--batch", "--batch-wait", "0.1", "--batch-poll", "0.05")
    first = run_hpt(*_args(base_url, data_dir, out, "--limit", "12", "--prices", str(prices),
                           "--budget-usd", "1", *batch))  # fmt: skip
    assert first.returncode == 3, first.stderr
    said = re.search(r"a resume asks the (\d+) calls refused again together, at most \$([\d.]+);"
                     r" the bound below leaves room for them", first.stderr)  # fmt: skip
    assert said is not None, first.stderr
    bound = re.search(
        rf"hpt run --resume {re.escape(str(out))} --budget-usd ([\d.]+)", first.stderr
    )
    assert bound is not None
    spent = _json(out / "spend.json")["spent_usd"]
    refused = int(said.group(1))
    kept = len(_keys(out))
    assert refused == 12 - kept > 1
    assert float(bound.group(1)) >= spent + float(said.group(2)) > 2
    resumed = run_hpt("run", "--resume", str(out), "--budget-usd", bound.group(1), "--no-progress")
    assert resumed.returncode in (0, 3), resumed.stderr
    # Every refused climb's level 1 went out together this time.
    assert len(fake.ledger.batches) > 0 and len(_keys(out)) > kept
    assert _json(out / "spend.json")["spent_usd"] <= float(bound.group(1))


def test_in_batch_mode_the_estimates_bound_leaves_room_for_every_waiting_call(
    priced: tuple[FakeOpenAI, str, Path], data_dir: Path, tmp_path: Path
) -> None:
    _, base_url, prices = priced
    out = tmp_path / "run"
    batch = ("--batch", "--batch-wait", "0.1", "--batch-poll", "0.05")
    result = run_hpt(*_args(base_url, data_dir, out, "--limit", "12", "--estimate", "5",
                            "--prices", str(prices), *batch))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "in batch mode every waiting call reserves its worst case at once" in result.stdout
    high = re.search(r"\$[\d.]+-\$([\d.]+)", result.stdout)
    bound = re.search(r"--budget-usd ([\d.]+)\)", result.stdout)
    assert high is not None and bound is not None, result.stdout
    assert float(bound.group(1)) > float(high.group(1))
    # That bound lets the whole run finish in batch mode.
    resumed = run_hpt("run", "--resume", str(out), "--budget-usd", bound.group(1), "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert len(_keys(out)) == 12


KILL_AFTER_LANDING = """
import asyncio, os, sys
from hpt.backends import batching
from hpt.cli.main import main
landing = batching.BatchCollector._land
async def _land(self, *args):
    await landing(self, *args)  # the journal says collected; the periodic ledger write is 1 s off
    await asyncio.sleep(0.05)  # the climbs take their answers
    os._exit(9)
batching.BatchCollector._land = _land
sys.argv = ["hpt", *sys.argv[1:]]
sys.exit(main())
"""


def test_a_kill_right_after_a_batch_lands_neither_loses_nor_repeats_its_cost(
    priced: tuple[FakeOpenAI, str, Path], data_dir: Path, tmp_path: Path
) -> None:
    fake, base_url, prices = priced
    out = tmp_path / "run"
    killer = tmp_path / "killer.py"
    killer.write_text(KILL_AFTER_LANDING)
    args = _args(base_url, data_dir, out, "--limit", "6", "--prices", str(prices),
                 "--budget-usd", "1000", "--batch", "--batch-wait", "0.1", "--batch-poll", "0.05")  # fmt: skip
    env = {**os.environ, "OPENAI_API_KEY": "test-key"}
    env.pop("OPENAI_BASE_URL", None)
    killed = subprocess.run([sys.executable, str(killer), *args], capture_output=True, text=True,
                            env=env, timeout=120)  # fmt: skip
    assert killed.returncode == 9, killed.stderr
    # The landing's spend was written before the journal said collected.
    landed = _json(out / "spend.json")
    assert landed["calls"] == sum(fake.ledger.submitted.values()) > 0
    assert len(landed["batches"]) == 1
    resumed = run_hpt("run", "--resume", str(out), "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    calls = [c for r in read_records(out, None) for c in r.all_calls() if not c.cached]
    tokens = sum(c.usage.prompt_tokens + c.usage.completion_tokens for c in calls)
    spend = _json(out / "spend.json")
    # Every request sent once, billed once: the ledger is the records' cost at batch prices.
    assert max(fake.ledger.submitted.values()) == 1
    assert sum(fake.ledger.submitted.values()) == spend["calls"] == len(calls)
    assert spend["spent_usd"] == pytest.approx(tokens * PRICE / 2 / 1e6)


async def test_in_batch_mode_a_model_called_directly_keeps_to_the_runs_concurrency(
    tmp_path: Path,
) -> None:
    # Every climb waits at once in batch mode; a model without a Batch API is still sent at
    # most --concurrency calls at a time, and reserves a call's worst case only when sent.
    from hpt.backends import BatchOptions, GenerationParams, Message
    from hpt.orchestrator.models import ModelBackends, ModelSettings

    class Peak:
        def __init__(self) -> None:
            self.now = self.peak = 0

        def admit(self, *args: Any, **kwargs: Any) -> object:
            self.now += 1
            self.peak = max(self.peak, self.now)
            return None

        def settle(self, ticket: object, completion: Completion | None) -> None:
            self.now -= 1

        def counted(self, batch: str) -> bool:
            return False

        async def landed(self, batch: str) -> None:
            return None

    tgi = ServerThread(FakeTGI(responder=lambda body: "True", delay_s=0.2).app()).start()
    gate = Peak()
    try:
        async with contextlib.AsyncExitStack() as stack:
            backends = ModelBackends(stack, None, gate=gate, batch=BatchOptions(directory=tmp_path),
                                     direct_concurrency=2)  # fmt: skip
            model = await backends.open(ModelSettings().resolve(f"tgi:{tgi.root_url}"))
            asks = [model.complete([Message(role="user", content=f"q{i}")], GenerationParams(),
                                   cache_seed=str(i)) for i in range(6)]  # fmt: skip
            await asyncio.gather(*asks)
            assert model.stats.concurrency == 2
            assert gate.peak == 2
            assert backends.unbatched_notes() == [
                f"tgi:{tgi.root_url}: its provider has no Batch API; called directly, at most "
                "2 calls at a time (--concurrency)"
            ]
    finally:
        tgi.stop()
