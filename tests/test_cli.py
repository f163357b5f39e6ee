"""The ``hpt`` command against a protocol-faithful OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers.answer_key import KeyedResponder, strategy_of
from tests.servers.openai_compat import ServerThread

HPT = str(Path(sys.executable).parent / "hpt")


def hpt(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "OPENAI_API_KEY": "test-key", **(env or {})}
    full_env.pop("OPENAI_BASE_URL", None)
    return subprocess.run(
        [HPT, *args], capture_output=True, text=True, env=full_env, timeout=timeout, cwd=cwd
    )


def run_args(server: ServerThread, data_dir: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--dataset", "boolq", "--model", "openai:test-model", "--base-url", server.base_url,
            "--data-dir", str(data_dir), "--out", str(out), *extra]  # fmt: skip


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def test_run_writes_records_and_summary(fake_openai, data_dir, boolq_answers, tmp_path) -> None:
    fake, server = fake_openai
    fake.responder = KeyedResponder(boolq_answers, "three_shot_cot")
    out = tmp_path / "run"
    result = hpt(*run_args(server, data_dir, out, "--limit", "6", "--concurrency", "3"))
    assert result.returncode == 0, result.stderr
    recs = records(out)
    assert len(recs) == 6 and len({r["sample_id"] for r in recs}) == 6
    for r in recs:
        assert {
            "sample_id",
            "dataset",
            "model",
            "resolved_level",
            "hpi_score",
            "error",
            "attempts",
        } <= set(r)
        assert (r["resolved_level"], r["hpi_score"], r["error"]) == (3, 3.0, None)
        assert [a["strategy"] for a in r["attempts"]] == ["role", "zero_shot_cot", "three_shot_cot"]
        assert r["attempts"][-1]["parsed"] == r["target"]
    summary = json.loads((out / "summary.json").read_text())["cells"][0]
    assert summary["hpi"] == 3.0 and summary["accuracy"] == 1.0 and summary["m"] == 5
    assert summary["level_counts"] == {"1": 0, "2": 0, "3": 6, "4": 0, "5": 0}
    assert summary["penalty"] == 1.71 and summary["errors"] == 0 and summary["unresolved"] == 0
    assert len(fake.requests) == 18
    body = fake.requests[0]
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.6, 0.9, 1024)
    assert body["repetition_penalty"] == 1.1 and "frequency_penalty" not in body
    spec = json.loads((out / "run.json").read_text())
    assert spec["dataset"] == ["boolq"] and "test-key" not in (out / "run.json").read_text()
    # What reports need of the dataset travels with the run.
    assert spec["tasks"]["boolq"]["kind"] == "answer"
    assert spec["tasks"]["boolq"]["table"]["key"] == "answers"
    # Metrics are recomputed from the records alone.
    again = hpt("summarize", str(out))
    assert again.returncode == 0
    assert json.loads(again.stdout[again.stdout.index("[\n") :])[0]["hpi"] == 3.0


def test_same_seed_same_samples(fake_openai, data_dir, tmp_path) -> None:
    _, server = fake_openai
    ids = []
    for name in ("a", "b"):
        assert (
            hpt(
                *run_args(server, data_dir, tmp_path / name, "--limit", "4", "--seed", "3")
            ).returncode
            == 0
        )
        ids.append(sorted(r["sample_id"] for r in records(tmp_path / name)))
    assert ids[0] == ids[1]


def test_unresolved_samples_pay_the_penalty(fake_openai, data_dir, boolq_answers, tmp_path) -> None:
    fake, server = fake_openai
    fake.responder = KeyedResponder(boolq_answers, None)
    out = tmp_path / "run"
    assert (
        hpt(
            *run_args(server, data_dir, out, "--limit", "2", "--strategies", "role,zero_shot_cot")
        ).returncode
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())["cells"][0]
    assert (
        summary["m"] == 2
        and summary["hpi"] == pytest.approx(2 + 1.71)
        and summary["unresolved"] == 2
    )


def test_transient_faults_are_retried(fake_openai, data_dir, boolq_answers, tmp_path) -> None:
    fake, server = fake_openai
    fake.responder = KeyedResponder(boolq_answers, "role")
    fake.faults = [500, 429, 503, 502]
    out = tmp_path / "run"
    result = hpt(*run_args(server, data_dir, out, "--limit", "3", "--concurrency", "1"))
    assert result.returncode == 0, result.stderr
    assert [r["resolved_level"] for r in records(out)] == [1, 1, 1]


def test_persistent_failure_is_an_error_record_not_unresolved(
    fake_openai, data_dir, tmp_path
) -> None:
    fake, server = fake_openai
    fake.faults = [500] * 100
    out = tmp_path / "run"
    result = hpt(*run_args(server, data_dir, out, "--limit", "2", "--max-attempts", "2"))
    assert result.returncode == 0, result.stderr
    recs = records(out)
    assert all(r["error"] and "HTTP 500" in r["error"] and r["hpi_score"] is None for r in recs)
    summary = json.loads((out / "summary.json").read_text())["cells"][0]
    assert (summary["errors"], summary["unresolved"], summary["n"], summary["hpi"]) == (
        2,
        0,
        0,
        None,
    )


def assert_user_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("hpt: error:"), result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_bad_api_key_stops_the_run(fake_openai, data_dir, tmp_path) -> None:
    _, server = fake_openai
    result = hpt(
        *run_args(server, data_dir, tmp_path / "run", "--limit", "2"),
        env={"OPENAI_API_KEY": "wrong"},
    )
    assert_user_error(result, "credentials", "OPENAI_API_KEY")


def test_unreachable_endpoint(data_dir, tmp_path) -> None:
    result = hpt("run", "--dataset", "boolq", "--model", "openai:x", "--base-url", "http://127.0.0.1:9/v1",
                 "--data-dir", str(data_dir), "--limit", "1", "--out", str(tmp_path / "r"))  # fmt: skip
    assert_user_error(result, "cannot reach http://127.0.0.1:9/v1")


def test_unknown_model_name(fake_openai, data_dir, tmp_path) -> None:
    fake, server = fake_openai
    fake.model_ids = ("other",)
    result = hpt(*run_args(server, data_dir, tmp_path / "run", "--limit", "1"))
    assert_user_error(result, "not found")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--dataset", "squad"], "unknown dataset 'squad'"),
        (["--dataset", "boolq", "--model", "gpt4"], "model spec 'gpt4' is not PROVIDER:MODEL"),
        (["--dataset", "boolq", "--model", "cohere:x"], "unknown model provider 'cohere'"),
        (
            ["--dataset", "boolq", "--strategies", "role,tree_of_thought"],
            "unknown strategy 'tree_of_thought'",
        ),
        (["--dataset", "boolq", "--limit", "0"], "--limit must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str, data_dir: Path) -> None:
    assert_user_error(hpt("run", *args, "--data-dir", str(data_dir)), needle)


def test_data_dir_without_the_file(tmp_path) -> None:
    assert_user_error(
        hpt("run", "--dataset", "gsm8k", "--data-dir", str(tmp_path), "--model", "openai:m"),
        "gsm8k/test.jsonl",
    )


def test_malformed_row(tmp_path) -> None:
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text("{not json\n")
    assert_user_error(
        hpt("run", "--dataset", "gsm8k", "--data-dir", str(tmp_path), "--model", "openai:m"),
        "test.jsonl:1",
    )


def test_existing_run_directory_is_not_overwritten(fake_openai, data_dir, tmp_path) -> None:
    _, server = fake_openai
    out = tmp_path / "run"
    assert hpt(*run_args(server, data_dir, out, "--limit", "1")).returncode == 0
    before = (out / "samples.jsonl").read_text()
    assert_user_error(hpt(*run_args(server, data_dir, out, "--limit", "1")), "already holds a run")
    assert (out / "samples.jsonl").read_text() == before


def test_graph_prints_mermaid_offline() -> None:
    result = hpt("graph", "--strategies", "role,zero_shot_cot")
    assert result.returncode == 0
    assert "role -. &nbsp;unresolved&nbsp; .-> zero_shot_cot;" in result.stdout
    assert "three_shot_cot" not in result.stdout


def test_top_level_resolves_with_generated_knowledge(
    fake_openai, data_dir, boolq_answers, tmp_path
) -> None:
    fake, server = fake_openai
    fake.responder = KeyedResponder(boolq_answers, "generated_knowledge")
    out = tmp_path / "run"
    assert hpt(*run_args(server, data_dir, out, "--limit", "2")).returncode == 0
    for r in records(out):
        assert r["resolved_level"] == 5 and r["hpi_score"] == 5.0
        gk = r["attempts"][-1]["calls"]
        assert [c["purpose"] for c in gk] == [
            "knowledge 1/3", "knowledge 2/3", "knowledge 3/3", "answer"
        ]  # fmt: skip
        assert all(c["mean_token_prob"] is not None for c in gk[:3])
        assert r["attempts"][-1]["notes"]["knowledge"].startswith(
            "candidate 1 of 3 by mean token probability"
        )
    assert len(fake.requests) == 2 * (1 + 1 + 1 + 4 + 4)
    # Only the knowledge candidates ask for logprobs.
    assert all(bool(b.get("logprobs")) == (strategy_of(b) == "knowledge") for b in fake.requests)


def test_plugin_strategy_joins_the_ladder(fake_openai, data_dir, boolq_answers, tmp_path) -> None:
    fake, server = fake_openai
    fake.responder = KeyedResponder(boolq_answers, "role")
    (tmp_path / "myplug.py").write_text(
        "from hpt.backends import Message\n"
        "from hpt.graphs import strategy\n"
        "@strategy('shout')\n"
        "async def shout(ctx):\n"
        "    return await ctx.ask([Message(role='user', content='SHOUT')])\n"
    )
    out = tmp_path / "run"
    result = hpt(*run_args(server, data_dir, out, "--limit", "2", "--plugin", "myplug",
                           "--strategies", "shout,role"), env={"PYTHONPATH": str(tmp_path)})  # fmt: skip
    assert result.returncode == 0, result.stderr
    for r in records(out):
        assert [a["strategy"] for a in r["attempts"]] == ["shout", "role"]
        assert r["resolved_level"] == 2 and r["m"] == 2
    assert_user_error(
        hpt("graph", "--plugin", "no_such_plugin"), "cannot import plugin 'no_such_plugin'"
    )


def test_failed_start_leaves_no_run_directory(data_dir, tmp_path) -> None:
    out = tmp_path / "never"
    result = hpt("run", "--dataset", "boolq", "--model", "openai:x", "--base-url", "http://127.0.0.1:9/v1",
                 "--data-dir", str(data_dir), "--limit", "1", "--out", str(out))  # fmt: skip
    assert result.returncode == 2 and not out.exists()
