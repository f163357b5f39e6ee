"""End to end on the real embedded model: SmolLM2-135M-Instruct Q4_1 under llama.cpp."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from hpt.backends import GenerationParams, Message, open_backend, parse_model_spec
from hpt.graphs import DEFAULT_LADDER
from tests.test_cli import hpt

pytestmark = pytest.mark.embedded


async def test_local_backend_answers_and_stops_its_server() -> None:
    async with open_backend(parse_model_spec("local"), label="local") as backend:
        base_url = backend.transport.endpoint
        out = await backend.complete(
            [Message(role="user", content="Say hello.")], GenerationParams(max_tokens=16, seed=1)
        )
        assert out.text.strip() and out.usage.completion_tokens > 0 and out.latency_s > 0
    async with httpx.AsyncClient(timeout=2) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"{base_url}/models")


def test_two_boolq_samples_through_the_ladder(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = hpt("run", "--dataset", "boolq", "--limit", "2", "--data-dir", str(data_dir),
                 "--out", str(out), "--gen-seed", "1", "--max-tokens", "192", timeout=900)  # fmt: skip
    assert result.returncode == 0, result.stderr
    recs = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(recs) == 2
    for r in recs:
        assert r["model"] == "local" and r["error"] is None
        attempts = r["attempts"]
        climbed = r["resolved_level"] or len(DEFAULT_LADDER)
        assert [a["strategy"] for a in attempts] == list(DEFAULT_LADDER[:climbed])
        assert all(a["calls"] and all(c["completion"] for c in a["calls"]) for a in attempts)
        assert all(not a["resolved"] for a in attempts[:-1])
        if r["resolved_level"]:
            assert attempts[-1]["parsed"] == r["target"] and r["hpi_score"] == r["resolved_level"]
        else:
            assert r["hpi_score"] == pytest.approx(5 + 1.71)
    summary = json.loads((out / "summary.json").read_text())["cells"][0]
    assert summary["n"] == 2 and summary["m"] == 5
    assert summary["hpi"] == pytest.approx(sum(r["hpi_score"] for r in recs) / 2)

    # The same run again is answered from the cache, although the server gets a new port.
    again = tmp_path / "again"
    result = hpt("run", "--dataset", "boolq", "--limit", "2", "--data-dir", str(data_dir),
                 "--out", str(again), "--gen-seed", "1", "--max-tokens", "192", timeout=900)  # fmt: skip
    assert result.returncode == 0, result.stderr
    recs2 = [json.loads(line) for line in (again / "samples.jsonl").read_text().splitlines()]
    calls = [c for r in recs2 for a in r["attempts"] for c in a["calls"]]
    assert calls and all(c["cached"] for c in calls)
    assert sorted(r["resolved_level"] or 0 for r in recs2) == sorted(
        r["resolved_level"] or 0 for r in recs
    )
