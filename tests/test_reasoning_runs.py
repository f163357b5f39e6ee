"""Reasoning effort and thinking budget as run dimensions, run for real against loopback
servers: one cell per effort through the command line, a config file and the Python API, each
cell's calls sending its effort (recorded as sent), a resumed campaign, a setting a model
cannot take stopping the run before its directory exists, a paper setting a model does not
take said once at the start, a run cut off at the token limit ending with one line naming
--max-tokens, and the instruments (judge, extractor) asking without the cell's effort."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from rich.console import Console

import hpt
from hpt.backends.errors import SettingRefused
from hpt.backends.managed import ManagedBackend
from hpt.cli.progress import (
    RichProgress,
    cells_table,
    summary_table,
    truncation_warning,
)
from hpt.orchestrator.cells import ROLE_FLAGS, Given, settings_notes
from hpt.orchestrator.planning import plan_cells
from hpt.orchestrator.scheduling import interleave
from hpt.orchestrator.spec import RunSpec
from hpt.reports.truncation import TRUNCATION_WARNING_SHARE
from hpt.results.reader import read_records
from hpt.results.records import Attempt, Call, SampleRecord
from hpt.results.tally import Tally
from hpt.types import GenerationParams, Usage
from tests.backend_helpers import FAST_RETRY, serving
from tests.run_fixtures import make_summary
from tests.servers.answer_key import KeyedResponder, strategy_of
from tests.servers.openai_compat import FakeOpenAI, Reply, ServerThread
from tests.test_cli import assert_user_error
from tests.test_cli import hpt as run_hpt
from tests.test_depthqa_runs import Scripted, write_graph

STRATEGIES = "role,zero_shot_cot,three_shot_cot"
EFFORTS = ("low", "medium", "high")
# What each effort's cell scores: high resolves at level 1, medium at level 2, low never.
RESOLVES_FROM = {"high": "role", "medium": "zero_shot_cot", "low": None}
THINKING = "Let me weigh the passage before I answer; perhaps it says the opposite."


class ByEffort:
    """A reasoning model that thinks first and answers better the harder it is asked to
    think (the server returns the thinking in its reasoning field, or inline)."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.keyed = {e: KeyedResponder(answers, level) for e, level in RESOLVES_FROM.items()}

    def __call__(self, body: dict[str, Any]) -> Reply:
        return Reply(self.keyed[body["reasoning_effort"]](body), reasoning=THINKING)


def _records(out: Path) -> list[SampleRecord]:
    return list(read_records(out))


def _cells(out: Path) -> dict[str | None, dict[str, Any]]:
    cells = json.loads((out / "summary.json").read_text())["cells"]
    # summary.json writes no "truncated" where nothing was cut.
    return {c.get("reasoning_effort"): {"truncated": {}, **c} for c in cells}


def _check_campaign(out: Path, fake: FakeOpenAI, stdout: str, limit: int) -> None:
    """Three cells, one per effort, each scored as its effort answers, every call sending
    (and recording) its cell's effort and its thinking apart, run.json saying what was sent
    per effort."""
    counted = fake.reasoning_format != "inline"  # a server's reasoning parser counts tokens
    cells = _cells(out)
    assert set(cells) == set(EFFORTS)
    penalty = cells["low"]["penalty"]
    hpi = {"high": 1.0, "medium": 2.0, "low": 3 + penalty}
    levels = {"high": 1, "medium": 2, "low": 3}
    for effort, cell in cells.items():
        assert (cell["samples"], cell["hpi"]) == (limit, pytest.approx(hpi[effort])), effort
        assert cell["truncated"] == {} and cell["attempts"] == limit * levels[effort]
        thinking = cell["calls"] * len(THINKING.split()) if counted else None
        assert cell.get("reasoning_tokens") == thinking
    for effort in EFFORTS:  # the cells as tables label them
        assert f"standard · effort {effort}" in stdout
    records = _records(out)
    assert Counter(r.reasoning_effort for r in records) == dict.fromkeys(EFFORTS, limit)
    assert len({r.key for r in records}) == len(records)
    for r in records:
        assert r.cell.label == f"boolq · effort {r.reasoning_effort}"
        for call in r.all_calls():
            # Sent as vLLM and llama.cpp take it (a loopback server: reasoning_control auto).
            assert call.params is not None
            assert call.params["reasoning_effort"] == r.reasoning_effort
            assert call.reasoning == THINKING and "think" not in call.completion
            assert call.usage.reasoning_tokens == (len(THINKING.split()) if counted else None)
    sent = Counter(body["reasoning_effort"] for body in fake.requests)
    assert sent == Counter(c.params["reasoning_effort"] for r in records for c in r.all_calls()
                           if not c.cached)  # fmt: skip
    saved = json.loads((out / "run.json").read_text())
    assert saved["reasoning_effort"] == list(EFFORTS) and "reasoning_effort" not in saved["params"]
    generation = saved["generation"]["boolq"]
    assert "reasoning_effort" not in generation["asked"]
    by_effort = {e["reasoning_effort"]: e["sent"] for e in generation["reasoning"]}
    assert set(by_effort) == set(EFFORTS)
    for effort, sent_by_model in by_effort.items():
        (params,) = sent_by_model.values()
        assert params["reasoning_effort"] == effort and params["temperature"] == 0.6


def test_three_efforts_from_the_command_line(
    fake_openai: tuple[FakeOpenAI, ServerThread], boolq_answers: dict[str, str],
    data_dir: Path, tmp_path: Path,
) -> None:  # fmt: skip
    fake, server = fake_openai
    fake.responder = ByEffort(boolq_answers)
    out = tmp_path / "run"
    result = run_hpt(
        "run", "--dataset", "boolq", "--model", "openai:test-model", "--base-url",
        server.base_url, "--data-dir", str(data_dir), "--out", str(out), "--limit", "3",
        "--strategies", STRATEGIES, "--reasoning-effort", "low,medium",
        "--reasoning-effort", "high",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    _check_campaign(out, fake, result.stdout, limit=3)
    assert "hpt: warning" not in result.stderr  # nothing dropped, nothing cut off


CONFIG = """\
[run]
dataset = "boolq"
model = "thinker"
strategies = ["role", "zero_shot_cot", "three_shot_cot"]
reasoning_effort = ["low", "medium", "high"]
limit = 2

[models.thinker]
provider = "openai"
model = "test-model"
endpoints = ["{url}"]
"""


def test_three_efforts_from_a_config_file(
    fake_openai: tuple[FakeOpenAI, ServerThread], boolq_answers: dict[str, str],
    data_dir: Path, tmp_path: Path,
) -> None:  # fmt: skip
    fake, server = fake_openai
    fake.responder = ByEffort(boolq_answers)
    fake.reasoning_format = "inline"  # a server without a reasoning parser
    (tmp_path / "run.toml").write_text(CONFIG.format(url=server.base_url))
    out = tmp_path / "run"
    result = run_hpt("run", "--config", "run.toml", "--data-dir", str(data_dir), "--out",
                     str(out), cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    _check_campaign(out, fake, result.stdout, limit=2)
    assert {r.model for r in _records(out)} == {"thinker"}


def test_an_effort_in_params_is_the_same_setting() -> None:
    """[run.params] or GenerationParams may hold one effort or budget: it becomes the run's
    dimension (and leaves params); given both ways, the two must agree."""
    spec = RunSpec.model_validate(
        {"dataset": "boolq", "params": {"reasoning_effort": "high", "thinking_budget": 0,
                                        "max_tokens": 64}}
    )  # fmt: skip
    assert (spec.reasoning_effort, spec.thinking_budget) == (["high"], [0])
    assert spec.params.model_fields_set == {"max_tokens"}
    agreed = RunSpec.model_validate(
        {"dataset": "boolq", "reasoning_effort": "high",
         "params": GenerationParams(reasoning_effort="high")}
    )  # fmt: skip
    assert agreed.reasoning_effort == ["high"] and agreed.params.reasoning_effort is None
    # A run without them saves nothing of them: run.json as before.
    assert "reasoning_effort" not in RunSpec(dataset=["boolq"]).model_dump(mode="json")
    clash = "params.reasoning_effort (high) and reasoning_effort (low, high) disagree"
    with pytest.raises(ValidationError, match=re.escape(clash)):
        RunSpec.model_validate({"dataset": "boolq", "reasoning_effort": ["low", "high"],
                                "params": {"reasoning_effort": "high"}})  # fmt: skip


def test_a_config_file_effort_in_params_and_the_flag(
    fake_openai: tuple[FakeOpenAI, ServerThread], boolq_answers: dict[str, str],
    data_dir: Path, tmp_path: Path,
) -> None:  # fmt: skip
    fake, server = fake_openai
    fake.responder = ByEffort(boolq_answers)
    config = CONFIG.replace('reasoning_effort = ["low", "medium", "high"]\n', "")
    (tmp_path / "run.toml").write_text(
        config.format(url=server.base_url) + '\n[run.params]\nreasoning_effort = "medium"\n'
    )
    base = ("run", "--config", "run.toml", "--data-dir", str(data_dir), "--limit", "1")
    # The flag is over the config file's setting, wherever the file holds it.
    result = run_hpt(*base, "--out", "flag", "--reasoning-effort", "high", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert set(_cells(tmp_path / "flag")) == {"high"}
    result = run_hpt(*base, "--out", "file", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert set(_cells(tmp_path / "file")) == {"medium"}
    (tmp_path / "clash.toml").write_text(
        (tmp_path / "run.toml").read_text().replace("[run]\n", '[run]\nreasoning_effort = "low"\n')
    )
    clash = run_hpt("run", "--config", "clash.toml", cwd=tmp_path)
    assert_user_error(clash, "params.reasoning_effort (medium) and reasoning_effort (low) disagree")


def test_a_three_effort_campaign_resumes(
    fake_openai: tuple[FakeOpenAI, ServerThread], boolq_answers: dict[str, str],
    data_dir: Path, tmp_path: Path,
) -> None:  # fmt: skip
    fake, server = fake_openai
    fake.responder = ByEffort(boolq_answers)
    out = tmp_path / "run"
    result = run_hpt(
        "run", "--dataset", "boolq", "--model", "openai:test-model", "--base-url",
        server.base_url, "--data-dir", str(data_dir), "--out", str(out), "--limit", "3",
        "--strategies", STRATEGIES, "--reasoning-effort", "low,medium,high", "--no-cache",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    full = _cells(out)
    samples = out / "samples.jsonl"
    lines = samples.read_text().splitlines(keepends=True)
    samples.write_text("".join(lines[:4]))  # as if stopped after four records
    kept = {r.key for r in _records(out)}
    fake.requests.clear()
    refused = run_hpt("run", "--resume", str(out), "--reasoning-effort", "high")
    assert_user_error(refused, "cannot take --reasoning-effort")
    result = run_hpt("run", "--resume", str(out))
    assert result.returncode == 0, result.stderr
    records = _records(out)
    assert len(records) == len({r.key for r in records}) == 9
    rerun = [r for r in records if r.key not in kept]
    # Only the missing climbs were asked again, each with its own cell's effort.
    assert Counter(b["reasoning_effort"] for b in fake.requests) == Counter(
        r.reasoning_effort for r in rerun for _ in r.all_calls()
    )
    again = _cells(out)
    for effort in EFFORTS:
        assert {k: v for k, v in again[effort].items() if k != "calls"} == {
            k: v for k, v in full[effort].items() if k != "calls"
        }
    saved = json.loads((out / "run.json").read_text())
    assert saved["reasoning_effort"] == list(EFFORTS) and len(saved["resumed_at"]) == 1


def _reasoner(boolq_answers: dict[str, str]) -> FakeOpenAI:
    """o3-mini as api.openai.com answers it: temperature, top_p, max_tokens, a repetition
    penalty or an effort it does not take are refused with OpenAI's own 400s."""
    return FakeOpenAI(ByEffort(boolq_answers), model_ids=("o3-mini",), openai_rules=True)


def _reasoner_config(url: str, efforts: str) -> str:
    """o3-mini on a loopback server told to follow OpenAI's own rules (as an OpenAI proxy
    would be), without a repetition penalty field, as on api.openai.com."""
    return (
        f"run:\n  dataset: boolq\n  model: o3\n  reasoning_effort: {efforts}\n"
        f"  strategies: [role, zero_shot_cot, three_shot_cot]\n"
        f"models:\n  o3:\n    provider: openai\n    model: o3-mini\n    endpoints: ['{url}']\n"
        f"    reasoning_control: openai\n    repetition_penalty_field: null\n"
    )


def test_a_setting_the_model_cannot_take_stops_the_run_before_it_starts(
    boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    fake = _reasoner(boolq_answers)
    with serving(fake.app()) as server:
        (tmp_path / "run.yaml").write_text(_reasoner_config(server.base_url, "[low, minimal]"))
        out = tmp_path / "run"
        result = run_hpt("run", "--config", "run.yaml", "--data-dir", str(data_dir),
                         "--out", str(out), "--limit", "2", cwd=tmp_path)  # fmt: skip
    # One line, the provider's rule and the fix; no call sent, no run directory left.
    assert_user_error(result, "o3-mini takes the reasoning efforts low, medium, high, not "
                      "'minimal'", "--reasoning-effort")  # fmt: skip
    assert fake.requests == [] and not out.exists()


def test_a_dropped_paper_setting_is_said_once_at_the_start(
    boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    fake = _reasoner(boolq_answers)
    with serving(fake.app()) as server:
        (tmp_path / "run.yaml").write_text(_reasoner_config(server.base_url, "[low, medium, high]"))
        out = tmp_path / "run"
        result = run_hpt("run", "--config", "run.yaml", "--data-dir", str(data_dir),
                         "--out", str(out), "--limit", "2", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("hpt: warning:")]
    # Three cells, each dropping the same paper settings: each sentence said once, at the start.
    assert len(warnings) == 2, result.stderr
    sampling = "hpt: warning: o3: temperature 0.6 and top_p 0.9 not sent: o3-mini"
    assert sum(line.startswith(sampling) for line in warnings) == 1, warnings
    assert sum(line.startswith("hpt: warning: o3: repetition_penalty 1.1 not sent")
               for line in warnings) == 1, warnings  # fmt: skip
    assert "https://" in warnings[0]
    assert {body["reasoning_effort"] for body in fake.requests} == set(EFFORTS)
    for r in _records(out):
        for call in r.all_calls():
            assert call.params == {"max_completion_tokens": 1024,
                                   "reasoning_effort": r.reasoning_effort}  # fmt: skip
            # OpenAI counts the thinking and returns none of it.
            assert call.reasoning is None and call.usage.reasoning_tokens == len(THINKING.split())


def test_a_run_cut_off_at_the_token_limit_ends_with_one_line(
    boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    keyed = KeyedResponder(boolq_answers, "role")

    def respond(body: dict[str, Any]) -> Reply:
        # At medium effort the model thinks past a 12-token limit, inside its thinking.
        if body["reasoning_effort"] == "high":
            return Reply(keyed(body), reasoning="Short thought.")
        return Reply(keyed(body), reasoning=f"{THINKING} {THINKING}")

    fake = FakeOpenAI(respond)
    with serving(fake.app()) as server:
        out = tmp_path / "run"
        result = run_hpt(
            "run", "--dataset", "boolq", "--model", "openai:test-model", "--base-url",
            server.base_url, "--data-dir", str(data_dir), "--out", str(out), "--limit", "4",
            "--strategies", STRATEGIES, "--reasoning-effort", "medium,high",
            "--max-tokens", "12",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    cells = _cells(out)
    medium, high = cells["medium"], cells["high"]
    # Medium: every attempt cut inside its thinking (3 levels x 4 samples); high: none.
    assert medium["truncated"] == {"1": 4, "2": 4, "3": 4} and medium["attempts"] == 12
    assert medium["unresolved"] == 4 and medium["reasoning_tokens"] == 12 * 12
    assert high["truncated"] == {} and high["attempts"] == 4 and high["hpi"] == 1.0
    cut = [r for r in _records(out) if r.reasoning_effort == "medium"]
    assert all(a.truncated == "thinking" and not a.resolved for r in cut for a in r.attempts)
    lines = [line for line in result.stderr.splitlines() if "--max-tokens" in line]
    assert len(lines) == 1, result.stderr
    # By cell: the medium cell's share, not the run's (12 of 16).
    assert lines[0].startswith(
        "hpt: warning: 100% of attempts in boolq · openai:test-model · standard · effort medium "
        "(12 of 12) were cut off at the token limit (max_tokens 12);"
    )
    assert "the HPI then measures the token budget" in lines[0]
    # The closing table: thinking tokens and truncations by cell.
    assert "thinking tokens" in result.stdout
    assert "12 / 12 (100%; L1 4, L2 4, L3 4)" in result.stdout


async def test_instruments_ask_without_the_cells_effort(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    """The extractor and the judge measure every cell alike: the run's settings without the
    cell's effort. Generated knowledge's knowledge model is part of the climb: the cell's."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    keyed = ByEffort(boolq_answers)

    def respond(body: dict[str, Any]) -> str:
        if body["messages"][-1]["content"].startswith("Generate"):
            return "Some background knowledge."
        if "reasoning_effort" not in body:  # the extractor
            return "True"
        return keyed(body)

    fake = FakeOpenAI(respond)
    with serving(fake.app()) as server:
        await hpt.evaluate(
            datasets="boolq", models="openai:test-model", base_url=server.base_url,
            extractor_model="openai:test-model", limit=2, reasoning_effort=["low", "high"],
            strategies=["role", "generated_knowledge"], data_dir=data_dir,
            out=tmp_path / "extract", retry=FAST_RETRY, cache=False,
        )  # fmt: skip
    calls = [(r.reasoning_effort, c) for r in _records(tmp_path / "extract")
             for c in r.all_calls()]  # fmt: skip
    purposes = Counter(c.purpose.split()[0] for _, c in calls)
    assert purposes["extract"] > 0 and purposes["knowledge"] > 0
    for effort, call in calls:
        assert call.params is not None
        expected = None if call.purpose == "extract" else effort
        assert call.params.get("reasoning_effort") == expected, call.purpose

    judged = FakeOpenAI(Scripted())
    with serving(judged.app()) as server:
        await hpt.evaluate(
            datasets="depthqa", models="openai:test-model", base_url=server.base_url,
            task_args={"depthqa": {"graph": str(write_graph(tmp_path / "graph"))}},
            reasoning_effort="high", out=tmp_path / "judged", retry=FAST_RETRY, cache=False,
        )  # fmt: skip
    bodies = judged.requests
    judging = [b for b in bodies if b["messages"][0]["content"].startswith("You are a fair judge")]
    assert judging and all("reasoning_effort" not in b for b in judging)
    answering = [b for b in bodies if b not in judging]
    assert answering and all(b["reasoning_effort"] == "high" for b in answering)
    records = _records(tmp_path / "judged")
    assert {r.reasoning_effort for r in records} == {"high"}
    for call in (c for r in records for c in r.all_calls()):
        assert call.params is not None
        assert call.params.get("reasoning_effort") == (None if call.purpose == "judge" else "high")


async def test_threshold_siblings_climb_together_only_within_one_effort(data_dir: Path) -> None:
    """A sample's threshold cells read one evaluation and climb as one work item; cells of
    another effort ask other calls, so they are never in that item."""
    spec = RunSpec.model_validate(
        {"dataset": "samsum", "model": "openai:test-model", "base_url": "http://127.0.0.1:9/v1",
         "threshold": [0.15, 0.2], "reasoning_effort": ["low", "high"], "limit": 3,
         "strategies": ["role"], "data_dir": data_dir, "penalties": {"samsum": 1.0}}
    )  # fmt: skip
    plans = await plan_cells(spec)
    assert len(plans) == 4
    for p in plans:
        p.todo = [(s, 0) for s in p.samples]
        assert p.params.reasoning_effort == p.cell.reasoning_effort
    items = interleave(plans)
    assert len(items) == 3 * 2
    for item in items:
        assert sorted(p.cell.threshold for p, _, _ in item) == [0.15, 0.2]
        assert len({(p.cell.reasoning_effort, s.id) for p, s, _ in item}) == 1


async def test_every_effort_with_every_budget_is_a_cell(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(ByEffort(boolq_answers))
    with serving(fake.app()) as server:
        result = await hpt.evaluate(
            datasets="boolq", models="openai:test-model", base_url=server.base_url, limit=2,
            reasoning_effort=["high", "low"], thinking_budget=[0, 2048], strategies=["role"],
            data_dir=data_dir, out=tmp_path / "run", retry=FAST_RETRY,
        )  # fmt: skip
    settings = [(s.reasoning_effort, s.thinking_budget) for s in result.summaries]
    assert settings == [("high", 0), ("high", 2048), ("low", 0), ("low", 2048)]
    assert [s.cell.label for s in result.summaries][:2] == [
        "boolq · effort high · thinking 0", "boolq · effort high · thinking 2048"]  # fmt: skip
    for r in _records(tmp_path / "run"):
        (call,) = r.all_calls()
        # vLLM's names for them (a loopback server: reasoning_control auto).
        assert call.params is not None
        assert (call.params["reasoning_effort"], call.params["thinking_token_budget"]) == (
            r.reasoning_effort, r.thinking_budget)  # fmt: skip
    assert len(fake.requests) == 8
    generation = json.loads((tmp_path / "run" / "run.json").read_text())["generation"]["boolq"]
    assert [
        (e["reasoning_effort"], e["thinking_budget"]) for e in generation["reasoning"]
    ] == settings


def _lines(table: Any) -> list[str]:
    out = io.StringIO()
    Console(file=out, force_terminal=False, width=200).print(table)
    return [" ".join(x.replace("│", " ").split()) for x in out.getvalue().splitlines()]


def test_the_tables_and_the_live_view_show_thinking_and_truncation(tmp_path: Path) -> None:
    cut = make_summary(reasoning_effort="high", reasoning_tokens=700, truncated={1: 2, 3: 1})
    lines = _lines(summary_table(cut))
    assert "HPF · gsm8k · thinker · effort high" in lines
    assert "of which thinking (reasoning tokens) 700" in lines
    assert "cut off at the token limit (attempts) 3 / 25 (12%; L1 2, L3 1)" in lines
    # Adaptive: selector turns cut before naming a level count too, even without a cut attempt.
    turns = make_summary(mode="adaptive", selector_turns=15, selector_truncated=3)
    assert ("cut off at the token limit (attempts and selector turns) 3 / 40 (8%; selector 3)"
            in _lines(summary_table(turns)))  # fmt: skip
    plain = _lines(summary_table(make_summary()))
    assert not any("thinking" in line or "cut off" in line for line in plain)
    header = next(
        line for line in _lines(cells_table([make_summary(), make_summary()])) if "HPI" in line
    )
    assert "thinking" not in header and "truncated" not in header  # no columns where none
    rows = _lines(cells_table([cut, make_summary(reasoning_effort="low")]))
    assert any(line.startswith("gsm8k thinker standard · effort high") and
               "700 3 / 25 (12%; L1 2, L3 1)" in line for line in rows), rows  # fmt: skip
    rows = _lines(cells_table([make_summary(), turns]))
    assert any(line.startswith("gsm8k thinker adaptive") and "3 / 40 (8%; selector 3)" in line
               for line in rows), rows  # fmt: skip

    out = io.StringIO()
    progress = RichProgress(Console(file=out, force_terminal=True, width=300))
    progress.started(RunSpec(dataset="gsm8k"), total=1, out=tmp_path)
    tally = Tally(dataset="gsm8k", model="thinker", mode="standard", m=1, penalty=1.0,
                  reasoning_effort="high")  # fmt: skip
    call = Call(purpose="answer", model="thinker", messages=[], completion="",
                usage=Usage(prompt_tokens=5, completion_tokens=9, reasoning_tokens=9))  # fmt: skip
    record = SampleRecord(
        sample_id="s", dataset="gsm8k", model="thinker", reasoning_effort="high",
        strategies=["role"], m=1, penalty=1.0, target="4", resolved_level=None, hpi_score=2.0,
        attempts=[Attempt(level=1, strategy="role", calls=[call], truncated="thinking")],
    )  # fmt: skip
    tally.add(record)
    progress.recorded(record, tally)
    progress.stop()
    assert "gsm8k · thinker · standard · effort high: HPI" in out.getvalue()
    assert "tokens 5+9 (thinking 9)  truncated 1" in out.getvalue()


def test_the_truncation_line_comes_from_a_tenth_of_a_cells_attempts_on() -> None:
    assert TRUNCATION_WARNING_SHARE == 0.10
    below = [make_summary(truncated={1: 2}, attempts=21)]
    assert truncation_warning(below, [1024]) is None
    assert truncation_warning([make_summary(attempts=0)], []) is None  # saved before attempts
    # A run's total under a tenth hides no cell at a tenth or more.
    hidden = [
        make_summary(truncated={1: 1}, attempts=5),
        make_summary(dataset="boolq", attempts=95),
    ]
    line = truncation_warning(hidden, [1024, 2048, 1024])
    assert line == (
        "20% of attempts in gsm8k · thinker · standard (1 of 5) were cut off at the token limit "
        "(max_tokens 1024, 2048); each counts as unresolved, so the HPI then measures the token "
        "budget, not the model: raise --max-tokens"
    )
    # Selector turns cut off before naming a level count with the attempts; the worst cell
    # is named, and the others counted.
    cells = [make_summary(truncated={1: 1}, attempts=5, mode="adaptive", selector_turns=5,
                      selector_truncated=3),
             make_summary(dataset="boolq", truncated={1: 2}, attempts=10)]  # fmt: skip
    line = truncation_warning(cells, [1024])
    assert line is not None and line.startswith(
        "40% of attempts and selector turns in gsm8k · thinker · adaptive (4 of 10) were cut "
        "off at the token limit (max_tokens 1024), and 1 more cell at 10% or more;"
    )


def _helpers_config(url: str) -> str:
    """o3-mini evaluated at effort high, gpt-4o (no reasoning model) as its selector and
    knowledge model, both as api.openai.com takes them."""
    models = "".join(
        f"  {name}:\n    provider: openai\n    model: {model}\n    endpoints: ['{url}']\n"
        f"    reasoning_control: openai\n    repetition_penalty_field: null\n"
        for name, model in (("o3", "o3-mini"), ("helper", "gpt-4o"))
    )
    return (
        "run:\n  dataset: boolq\n  model: o3\n  reasoning_effort: high\n"
        "  mode: [standard, adaptive]\n  strategies: [role, generated_knowledge]\n"
        "  selector_model: helper\n  knowledge_model: helper\n"
        f"models:\n{models}"
    )


def test_a_selector_and_knowledge_model_apart_ask_without_the_cells_effort(
    boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    """A selector or knowledge model that is not the evaluated model gets the run's settings
    without the cell's effort: a model that takes none (gpt-4o) refused the whole run in
    words naming neither its role nor its flag."""
    keyed = KeyedResponder(boolq_answers, "generated_knowledge")

    def respond(body: dict[str, Any]) -> str:
        if body["model"] == "gpt-4o":  # the helper: knowledge, or the selector's level
            return keyed(body) if strategy_of(body) == "knowledge" else "2"
        return keyed(body)

    fake = FakeOpenAI(respond, model_ids=("o3-mini", "gpt-4o"), openai_rules=True)
    with serving(fake.app()) as server:
        (tmp_path / "run.yaml").write_text(_helpers_config(server.base_url))
        out = tmp_path / "run"
        result = run_hpt("run", "--config", "run.yaml", "--data-dir", str(data_dir),
                         "--out", str(out), "--limit", "2", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    helper = [b for b in fake.requests if b["model"] == "gpt-4o"]
    kinds = Counter("knowledge" if strategy_of(b) == "knowledge" else "select" for b in helper)
    assert kinds["knowledge"] > 0 and kinds["select"] > 0
    assert all("reasoning_effort" not in b for b in helper)
    evaluated = [b for b in fake.requests if b["model"] == "o3-mini"]
    assert evaluated and all(b["reasoning_effort"] == "high" for b in evaluated)
    for r in _records(out):
        assert r.reasoning_effort == "high" and r.resolved_level is not None


async def test_the_evaluated_model_as_its_own_selector_gets_the_cells_effort(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    keyed = KeyedResponder(boolq_answers, "role")

    def respond(body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"]
        return "1" if last.startswith("Choose the most effective") else keyed(body)

    fake = FakeOpenAI(respond)
    with serving(fake.app()) as server:
        await hpt.evaluate(
            datasets="boolq", models="openai:test-model", base_url=server.base_url, limit=2,
            reasoning_effort=["low", "high"], mode="adaptive", strategies=["role"],
            data_dir=data_dir, out=tmp_path / "run", retry=FAST_RETRY, cache=False,
        )  # fmt: skip
    turns = [(r.reasoning_effort, s.call) for r in _records(tmp_path / "run")
             for s in r.selections]  # fmt: skip
    assert len(turns) == 4
    for effort, call in turns:
        assert call is not None and call.params is not None
        assert call.params["reasoning_effort"] == effort


class _Unsaid:
    """A plugin transport that says neither what it sends nor what it drops, and one that
    refuses every reasoning setting."""

    provider, model, endpoint = "plugin", "quiet-1", "http://127.0.0.1:9"

    def __init__(self, refuses: bool = False) -> None:
        if refuses:
            self.sent_params = self._refuse

    def _refuse(self, params: GenerationParams) -> dict[str, Any]:
        if params.reasoning_effort is not None or params.logprobs:
            raise SettingRefused(f"{self.model} takes no reasoning effort nor logprobs")
        return {}


def _managed(label: str, refuses: bool = False) -> ManagedBackend:
    return ManagedBackend(_Unsaid(refuses), label=label)  # type: ignore[arg-type]


def test_the_start_check_names_the_role_that_refuses_and_the_unsaid_settings() -> None:
    high = GenerationParams(reasoning_effort="high")
    plain = GenerationParams()
    quiet = _managed("quiet")
    notes = settings_notes([Given(quiet, high), Given(quiet, high.model_copy(
        update={"max_tokens": 64})), Given(quiet, plain)])  # fmt: skip
    # A transport that does not say what it sends: said once, for the settings it is given.
    assert notes == [
        "quiet: its transport does not say what it sends; the reasoning settings are passed "
        "on as GenerationParams.reasoning_effort and thinking_budget, unchecked"
    ]
    assert settings_notes([Given(quiet, plain)]) == []
    strict = _managed("strict", refuses=True)
    for role, flag in ROLE_FLAGS.items():
        with pytest.raises(SettingRefused) as refused:
            settings_notes([Given(strict, plain), Given(strict, plain.model_copy(
                update={"logprobs": True}), role)])  # fmt: skip
        assert str(refused.value) == (
            f"the {role} strict ({flag}): quiet-1 takes no reasoning effort nor logprobs"
        )
    # The evaluated model's own refusal is said as it is, before any role's.
    with pytest.raises(SettingRefused) as refused:
        settings_notes([Given(strict, high, "selector model"), Given(strict, high)])
    assert str(refused.value) == "quiet-1 takes no reasoning effort nor logprobs"
