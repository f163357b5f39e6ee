"""DSPy optimisation (dspy_bfrs, dspy_mipro) when the model's calls fail: the program's meta
counts the calls made and failed; more than ``max_failed_share`` failed stops the run with
one ``hpt: error:`` line, keeps the finished samples and saves no program.

The server is the scripted toy model of test_dspy_methods behind a loopback OpenAI server
that refuses (HTTP 400: no retry helps) a set share of the optimisation's requests -- those
asking about the training pool's numbers (100-119), never the test samples (0-3)."""

from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from hpt.orchestrator.runner import run_evaluation
from hpt.structured.runtime import OptimisationError
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_cli import hpt
from tests.test_dspy_methods import MIPRO_FAST, Scripted, spec, write_toy

pytestmark = pytest.mark.dspy

PROGRAM = "plusone__openai_test-model__{}.json"


class Failing(FakeOpenAI):
    """Refuses the training-pool requests by a repeating pattern of 1 (refuse) and 0."""

    def __init__(self, pattern: list[int], helm_right_below: int = 4) -> None:
        script = Scripted()

        def respond(body: dict[str, Any]) -> str:
            if "[[ ##" not in json.dumps(body["messages"]):  # HELM's prompt
                last = body["messages"][-1]["content"]
                if int(re.findall(r"What is (\d+) plus one", last)[-1]) >= helm_right_below:
                    return "0"  # answered wrong: the climb goes on to DSPy
            return script(body)

        super().__init__(responder=respond)
        self._pattern = itertools.cycle(pattern)
        self._count_lock = threading.Lock()
        self.failing = True
        self.pool_requests = 0
        self.refused = 0

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        last = body["messages"][-1]["content"] if body.get("messages") else ""
        asked = re.findall(r"What is (\d+) plus one", last)
        if self.failing and asked and int(asked[-1]) >= 100:
            with self._count_lock:
                self.pool_requests += 1
                refuse = next(self._pattern)
                self.refused += refuse
            if refuse:
                return self._fault_body(400)
        return await super()._chat(request)


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[Path]:
    """test_dspy_methods' toy dataset (plusone), importable as the plugin dspytoy."""
    site = write_toy(tmp_path / "toy")
    sys.path.insert(0, str(site))
    try:
        importlib.import_module("dspytoy")
        yield site
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("dspytoy", None)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def serve(fake: Failing) -> Iterator[tuple[Failing, ServerThread]]:
    server = ServerThread(fake.app()).start()
    try:
        yield fake, server
    finally:
        server.stop()


@pytest.fixture
def sixty() -> Iterator[tuple[Failing, ServerThread]]:
    """60% of the optimisation's calls refused; HELM's prompt right for t0 and t1 only."""
    yield from serve(Failing([1, 1, 0, 1, 0], helm_right_below=2))


@pytest.fixture
def thirty() -> Iterator[tuple[Failing, ServerThread]]:
    yield from serve(Failing([1, 0, 0, 1, 0, 0, 0, 1, 0, 0]))


def meta_of(out: Path, strategy: str) -> dict[str, Any]:
    program = out / "programs" / PROGRAM.format(strategy)
    return json.loads(program.with_name(program.stem + ".meta.json").read_text())


def test_a_tolerated_share_is_counted_in_the_meta(toy, thirty, tmp_path) -> None:
    fake, server = thirty
    out = tmp_path / "run"
    args = {"num_threads": 4, "max_errors": 100, "max_failed_share": 0.5}
    s = spec(server, out, "dspy_bfrs", strategy_args={"dspy_bfrs": args}, cache=False)
    assert asyncio.run(run_evaluation(s)).complete
    meta = meta_of(out, "dspy_bfrs")
    failures = meta["failures"]
    # Every request the optimisation sent reached the server once (a 400 is not retried).
    assert failures["made"] == fake.pool_requests > 0
    assert failures["failed"] == fake.refused == meta["optimisation"]["failed_calls"]
    assert 0.25 <= failures["failed"] / failures["made"] <= 0.35
    assert failures["max_failed_share"] == 0.5 and "HTTP 400" in failures["first"]
    assert meta["optimisation"]["calls"] == failures["made"] - failures["failed"]
    usage = json.loads((out / "programs" / "usage.json").read_text())
    assert usage["plusone__openai_test-model__dspy_bfrs"]["optimisation"] == meta["optimisation"]
    notes = json.loads((out / "samples.jsonl").read_text().splitlines()[0])["attempts"][0]["notes"]
    assert f"{failures['failed']} failed calls" in notes["optimisation"]


def test_no_failures_are_counted_as_none(toy, tmp_path) -> None:
    for fake, server in serve(Failing([0])):
        out = tmp_path / "run"
        s = spec(server, out, "dspy_bfrs", strategy_args={"dspy_bfrs": {"num_threads": 4}},
                 cache=False)  # fmt: skip
        assert asyncio.run(run_evaluation(s)).complete
        failures = meta_of(out, "dspy_bfrs")["failures"]
        assert failures == {"made": fake.pool_requests, "failed": 0, "max_failed_share": 0.1,
                            "first": None}  # fmt: skip


def test_too_many_failures_stop_the_run_in_one_line(toy, sixty, tmp_path) -> None:
    """The issue's case: 60% of the calls fail, DSPy tolerates them (max_errors), and hpt
    stops the run: one line, exit 2, the finished samples kept, no program saved; fixed,
    the run resumes and optimises."""
    fake, server = sixty
    out = tmp_path / "run"
    argv = ["--plugin", "dspytoy", "run", "--dataset", "plusone", "--model", "openai:test-model",
            "--base-url", server.base_url, "--strategies", "helm_baseline,dspy_bfrs",
            "--strategy-arg", "dspy_bfrs.num_threads=4", "--strategy-arg",
            "dspy_bfrs.max_errors=100", "--temperature", "0", "--no-cache", "--out", str(out),
            "--no-progress"]  # fmt: skip
    # DSPy's own progress bars (tqdm, which it calls unconditionally) are switched off here.
    env = {"PYTHONPATH": str(toy), "TQDM_DISABLE": "1"}
    result = hpt(*argv, env=env)
    assert result.returncode == 2, result.stderr
    said = result.stderr.strip().splitlines()
    lines = [line for line in said if not line.startswith("hpt: note: plusone: an unresolved")]
    assert len(lines) == 1 and lines[0].startswith("hpt: error: dspy_bfrs on plusone"), said
    share = fake.refused / fake.pool_requests
    assert f"{fake.refused} of {fake.pool_requests} model calls failed" in lines[0]
    assert f"more than max_failed_share=0.1 ({share:.0%})" in lines[0]
    assert "dspy_bfrs.max_failed_share=" in lines[0] and f"hpt run --resume {out}" in lines[0]
    # t0 and t1 resolved at level 1 before the optimisation failed: kept.
    kept = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert sorted(r["sample_id"] for r in kept) == ["t0", "t1"]
    assert all(r["resolved_level"] == 1 for r in kept)
    assert not (out / "programs" / PROGRAM.format("dspy_bfrs")).exists()
    assert not list((out / "programs").glob("*.meta.json"))
    usage = json.loads((out / "programs" / "usage.json").read_text())
    assert usage["plusone__openai_test-model__dspy_bfrs"]["optimisation"]["failed_calls"] == (
        fake.refused)  # fmt: skip

    fake.failing = False
    resumed = hpt("run", "--resume", str(out), "--trust-plugins", "--no-progress", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert meta_of(out, "dspy_bfrs")["failures"]["failed"] == 0
    assert len((out / "samples.jsonl").read_text().splitlines()) == 4


def test_dspy_giving_up_says_how_many_failed(toy, sixty, tmp_path) -> None:
    """With DSPy's own limit (max_errors 10) it gives up first; the line still counts."""
    fake, server = sixty
    s = spec(server, tmp_path / "run", "dspy_bfrs", cache=False,
             strategy_args={"dspy_bfrs": {"num_threads": 4}})  # fmt: skip
    with pytest.raises(OptimisationError) as caught:
        asyncio.run(run_evaluation(s))
    message = str(caught.value)
    assert f"{fake.refused} of " in message and "model calls failed during optimisation" in message
    assert "BootstrapFewShotWithRandomSearch gave up" in message and "HTTP 400" in message
    assert not (tmp_path / "run" / "programs" / PROGRAM.format("dspy_bfrs")).exists()


def test_mipro_stops_too(toy, sixty, tmp_path) -> None:
    fake, server = sixty
    out = tmp_path / "run"
    args = {**MIPRO_FAST, "max_errors": 100, "max_failed_share": 0.2}
    s = spec(server, out, "dspy_mipro", strategy_args={"dspy_mipro": args}, cache=False)
    with pytest.raises(OptimisationError) as caught:
        asyncio.run(run_evaluation(s))
    message = str(caught.value)
    assert "more than max_failed_share=0.2" in message, message
    assert f"{fake.refused} of " in message
    assert not (out / "programs" / PROGRAM.format("dspy_mipro")).exists()


def test_the_share_is_a_checked_strategy_parameter() -> None:
    from pydantic import ValidationError

    from hpt.structured.optimise import BfrsParams, MiproParams

    assert BfrsParams().max_failed_share == MiproParams().max_failed_share == 0.1
    assert BfrsParams(max_failed_share=0).max_failed_share == 0
    for bad in (-0.1, 1.5):
        with pytest.raises(ValidationError):
            BfrsParams(max_failed_share=bad)


@pytest.mark.parametrize("strategy", ["dspy_bfrs", "dspy_mipro"])
def test_a_budget_running_out_in_an_optimisation_stops_the_run_as_a_budget(
    toy, strategy, tmp_path
) -> None:
    """DSPy scores a refused call as a wrong answer and goes on: the refusal must still stop
    the climb as a budget stop (no program chosen on refused calls, no OptimisationError),
    and a resume with more calls optimises and finishes."""
    for fake, server in serve(Failing([0])):
        out = tmp_path / "run"
        args = {"dspy_bfrs": {"num_threads": 4, "max_errors": 100},
                "dspy_mipro": {**MIPRO_FAST, "max_errors": 100}}[strategy]  # fmt: skip
        s = spec(server, out, strategy, strategy_args={strategy: args}, cache=False,
                 max_calls=6)  # fmt: skip
        result = asyncio.run(run_evaluation(s))
        assert result.stopped_by == "--max-calls" and not result.complete
        assert result.spend is not None and result.spend.calls == fake.served <= 6
        assert not (out / "samples.jsonl").read_text()  # every climb abandoned, none failed
        assert not list(out.glob("programs/plusone*.json"))  # no program saved
        resumed = asyncio.run(run_evaluation(s.model_copy(update={"max_calls": 10_000}),
                                             resume=True))  # fmt: skip
        assert resumed.complete and resumed.stopped_by is None
        assert meta_of(out, strategy)["failures"]["failed"] == 0
        assert len((out / "samples.jsonl").read_text().splitlines()) == 4


def test_a_parse_error_behind_a_budget_refusal_is_not_the_failure() -> None:
    # ChatAdapter's JSON fallback refused by the budget: the refusal, raised while the first
    # reply's parse error was handled, is why the program call failed.
    import dspy
    from dspy.utils.exceptions import AdapterParseError

    from hpt.backends.errors import BudgetSpent
    from hpt.structured.engine import backend_error_in, parse_error_in

    try:
        try:
            raise AdapterParseError("ChatAdapter", dspy.Signature("question -> answer"), "?")
        except AdapterParseError:
            raise BudgetSpent("--max-calls 5") from None
    except BudgetSpent as refused:
        assert refused.__context__ is not None
        assert parse_error_in(refused) is None and backend_error_in(refused) is None
