"""The DSPy strategies in a run with reasoning settings as cells, against loopback servers
(test_dspy_methods' toy dataset and scripted model): each effort's cell optimises its own
program, with its own file, meter and usage entry; MIPROv2's instruction proposer is an
instrument, asked without the cell's effort and checked at the start like the judge."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpt.orchestrator.runner import run_evaluation
from tests import test_dspy_failures
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_dspy_methods import MIPRO_FAST, Scripted, spec

pytestmark = pytest.mark.dspy
# test_dspy_failures' fixtures: its toy dataset (plusone, the plugin dspytoy) and a key.
toy = test_dspy_failures.toy
_key = test_dspy_failures._key

EFFORTS = ["low", "high"]


@pytest.fixture
def served() -> Iterator[tuple[FakeOpenAI, ServerThread]]:
    fake = FakeOpenAI(responder=Scripted())
    server = ServerThread(fake.app()).start()
    yield fake, server
    server.stop()


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_effort_optimises_its_own_program(
    toy: Path, served: tuple[FakeOpenAI, ServerThread], tmp_path: Path
) -> None:
    """The first effort's optimised program was every effort's, under one file and meter."""
    fake, server = served
    out = tmp_path / "run"
    s = spec(server, out, "dspy_bfrs", reasoning_effort=EFFORTS,
             strategy_args={"dspy_bfrs": {"num_threads": 4}})  # fmt: skip
    assert asyncio.run(run_evaluation(s)).complete
    programs = out / "programs"
    usage = json.loads((programs / "usage.json").read_text())
    assert set(usage) == {f"plusone__openai_test-model__effort_{e}__dspy_bfrs" for e in EFFORTS}
    for effort in EFFORTS:
        program = programs / f"plusone__openai_test-model__effort_{effort}__dspy_bfrs.json"
        meta = json.loads(program.with_name(program.stem + ".meta.json").read_text())
        calls = _lines(program.with_name(program.stem + ".calls.jsonl"))
        # Optimised with its own cell's effort, each call recorded as sent.
        assert calls and len(calls) == meta["optimisation"]["calls"]
        assert {c["params"]["reasoning_effort"] for c in calls} == {effort}
        cell = usage[f"plusone__openai_test-model__effort_{effort}__dspy_bfrs"]
        assert cell["optimisation"]["calls"] == meta["optimisation"]["calls"]
        assert cell["evaluation"]["calls"] == 4
    # No program file without the effort: a run without one keeps the old names.
    assert not (programs / "plusone__openai_test-model__dspy_bfrs.json").exists()
    for line in _lines(out / "samples.jsonl"):
        (attempt,) = line["attempts"]
        assert f"effort_{line['reasoning_effort']}__" in attempt["notes"]["program"]
    sent = {body.get("reasoning_effort") for body in fake.requests}
    assert sent == set(EFFORTS)


def test_the_prompt_model_asks_without_the_cells_effort(
    toy: Path, served: tuple[FakeOpenAI, ServerThread], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """--prompt-model is an instrument: the run's settings without the cell's effort (o3-mini
    would take effort high and was sent it), and checked at the start (its dropped sampling
    settings said there)."""
    fake, server = served
    proposer = FakeOpenAI(Scripted(), model_ids=("o3-mini",), openai_rules=True)
    proposer_server = ServerThread(proposer.app()).start()
    try:
        models = {"proposer": {"provider": "openai", "model": "o3-mini",
                               "endpoints": [proposer_server.base_url],
                               "reasoning_control": "openai",
                               "repetition_penalty_field": None}}  # fmt: skip
        s = spec(server, tmp_path / "run", "dspy_mipro", reasoning_effort="high",
                 prompt_model="proposer", models=models,
                 strategy_args={"dspy_mipro": MIPRO_FAST})  # fmt: skip
        assert asyncio.run(run_evaluation(s)).complete
    finally:
        proposer_server.stop()
    assert proposer.requests, "the proposer was never asked"
    assert all("reasoning_effort" not in body for body in proposer.requests)
    assert fake.requests and all(b["reasoning_effort"] == "high" for b in fake.requests)
    stderr = capsys.readouterr().err
    assert "hpt: warning: proposer: temperature 0 and top_p 0.9 not sent: o3-mini" in stderr
