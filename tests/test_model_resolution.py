"""One model resolution: a config-named model resolves to the same object whichever role
names it, and ``run`` and ``judge-strategies`` take the same model options and config file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpt.orchestrator import RunSpec
from hpt.orchestrator.complexity import JudgeSpec
from tests.servers.answer_key import strategy_of
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_cli import hpt


def _config(path: Path, url: str) -> Path:
    path.write_text(
        "[run]\nmax_concurrency = 3\n\n"
        "[models.helper]\n"
        f'provider = "openai"\nmodel = "helper-model"\nendpoints = ["{url}"]\n'
        'client = "aiohttp"\nrequests_per_minute = 600\n'
    )
    return path


def test_a_named_model_is_one_object_in_every_role(tmp_path: Path) -> None:
    models = {"helper": {"provider": "openai", "model": "helper-model",
                         "endpoints": ["http://127.0.0.1:1/v1"], "client": "aiohttp"}}  # fmt: skip
    run = RunSpec.model_validate({
        "dataset": "boolq", "model": "openai:x", "base_url": "http://127.0.0.1:2/v1",
        "knowledge_model": "helper", "selector_model": "helper", "extractor_model": "helper",
        "models": models, "max_concurrency": 3,
    })  # fmt: skip
    judge = JudgeSpec.model_validate({
        "model": "openai:x", "judge_model": "helper", "datasets": ["boolq"],
        "strategies": ["role"], "out": tmp_path, "models": models, "max_concurrency": 3,
        "base_url": "http://127.0.0.1:2/v1",
    })  # fmt: skip
    roles = [run.resolve(run.knowledge_model or ""), run.resolve(run.selector_model or ""),
             run.resolve(run.extractor_model or ""), judge.resolve(judge.judge_model or "")]  # fmt: skip
    assert all(r == roles[0] for r in roles)
    assert roles[0].config.endpoints == ["http://127.0.0.1:1/v1"]  # its own, not --base-url
    assert roles[0].config.max_concurrency == 3  # the run-wide override applies to every role
    assert run.resolve("openai:x").config.endpoints == ["http://127.0.0.1:2/v1"]


def test_run_and_judge_use_the_config_named_helper(data_dir: Path, tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def responder(body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"]
        first = body["messages"][0]["content"]
        if first.startswith("You are a judge"):
            kind = "judge"
        elif last.startswith("Choose the most effective prompting strategy"):
            kind = "select"
        else:
            kind = strategy_of(body)
        seen.append((body["model"], kind))
        if kind == "judge":
            return json.dumps({"score1": 2, "score2": 2, "score3": 2, "score4": 2})
        if kind == "select":
            return "5"
        return "Some background." if kind == "knowledge" else "Maybe."

    fake = FakeOpenAI(responder)
    fake.model_ids = ("test-model", "helper-model")
    server = ServerThread(fake.app()).start()
    try:
        config = _config(tmp_path / "models.toml", server.base_url)
        common = ["--config", str(config), "--base-url", server.base_url, "--no-cache"]
        run = hpt("run", "--dataset", "boolq", "--model", "openai:test-model", "--mode",
                  "adaptive", "--selector-model", "helper", "--knowledge-model", "helper",
                  "--limit", "1", "--data-dir", str(data_dir), "--out", str(tmp_path / "run"),
                  *common)  # fmt: skip
        judge = hpt("judge-strategies", "--model", "openai:test-model", "--judge-model",
                    "helper", "--datasets", "boolq", "--strategies", "role",
                    "--per-dataset", "1", "--data-dir", str(data_dir),
                    "--out", str(tmp_path / "judge"), *common)  # fmt: skip
    finally:
        server.stop()
    assert run.returncode == 0, run.stderr
    assert judge.returncode == 0, judge.stderr
    by_kind: dict[str, set[str]] = {}
    for model, kind in seen:
        by_kind.setdefault(kind, set()).add(model)
    # The helper serves the selector, the knowledge and the judge; the evaluated model answers.
    assert by_kind["select"] == by_kind["knowledge"] == by_kind["judge"] == {"helper-model"}
    assert by_kind["generated_knowledge"] == by_kind["role"] == {"test-model"}
    record = json.loads((tmp_path / "run" / "samples.jsonl").read_text().splitlines()[0])
    assert {s["call"]["model"] for s in record["selections"]} == {"helper"}
