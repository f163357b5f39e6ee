"""hpt judge-strategies: verdict parsing, retries, the summary and the chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpt.orchestrator.complexity import Verdict, parse_verdict


@pytest.mark.parametrize(
    ("reply", "scores"),
    [
        ('{"score1": 1, "score2": 2, "score3": 3, "score4": 4}', (1, 2, 3, 4)),
        ('Sure! ```json\n{"score1": 5, "score2": 5, "score3": 4, "score4": 3}\n```', (5, 5, 4, 3)),
        ('{"score1": 0, "score2": 2, "score3": 3, "score4": 4}', None),  # out of range
        ('{"score1": 2, "score2": 2, "score3": 3}', None),  # a criterion missing
        ('{"score1": "high", "score2": 2, "score3": 3, "score4": 4}', None),
        ("I would give it a 3 overall.", None),
        ('{"note": 1} then {"score1": 2, "score2": 2, "score3": 2, "score4": 2}', (2, 2, 2, 2)),
    ],
)  # fmt: skip
def test_parse_verdict(reply: str, scores: tuple[int, ...] | None) -> None:
    verdict = parse_verdict(reply)
    if scores is None:
        assert verdict is None
    else:
        assert verdict == Verdict(score1=scores[0], score2=scores[1], score3=scores[2],
                                  score4=scores[3])  # fmt: skip


def test_judge_strategies_end_to_end(data_dir: Path, tmp_path: Path) -> None:
    from tests.servers.openai_compat import FakeOpenAI, ServerThread
    from tests.test_cli import hpt

    asked: dict[str, int] = {}

    def responder(body: dict[str, Any]) -> str:
        first = body["messages"][0]
        if first["role"] == "system" and first["content"].startswith("You are a judge"):
            user = body["messages"][1]["content"]
            strategy = user.split("\n", 1)[0].removeprefix("Prompting strategy: ")
            key = user[-400:]
            asked[key] = asked.get(key, 0) + 1
            if strategy == "role" and asked[key] == 1:
                return "It is fairly simple."  # unreadable once: asked again
            level = ["role", "zero_shot_cot", "three_shot_cot"].index(strategy) + 1
            return json.dumps({"score1": level, "score2": level, "score3": level + 1,
                               "score4": level})  # fmt: skip
        return "The answer is True."

    fake = FakeOpenAI(responder)
    server = ServerThread(fake.app()).start()
    try:
        out = tmp_path / "judge"
        result = hpt("judge-strategies", "--model", "openai:test-model", "--datasets",
                     "boolq,gsm8k", "--strategies", "role,zero_shot_cot,three_shot_cot",
                     "--per-dataset", "2", "--data-dir", str(data_dir), "--out", str(out),
                     "--base-url", server.base_url)  # fmt: skip
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "judge_summary.json").read_text())
    assert summary["means"]["role"] == {"score1": 1, "score2": 1, "score3": 2, "score4": 1}
    assert summary["means"]["three_shot_cot"]["score3"] == 4
    assert summary["judged"] == {"role": 4, "zero_shot_cot": 4, "three_shot_cot": 4}
    records = [json.loads(line) for line in (out / "judgements.jsonl").read_text().splitlines()]
    assert len(records) == 12
    role = [r for r in records if r["strategy"] == "role"]
    assert all(len(r["replies"]) == 2 and r["verdict"] for r in role)
    assert all(r["prompts"] and r["answer"] == "The answer is True." for r in records)
    svg = (out / "judge_scores.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<rect") >= 12 + 4
    assert "Analysis and Reasoning" in svg and "Strategy complexity by LLM judge" in result.stdout
