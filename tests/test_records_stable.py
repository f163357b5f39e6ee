"""The hot path may change; what it records may not. A scripted run (BoolQ, standard and
adaptive, the full ladder) writes records identical, timings aside, to those the code wrote
before the performance work (tests/data/golden_records.jsonl, written by commit 1058e2c)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from hpt.orchestrator import RunSpec, run_evaluation
from tests.servers.answer_key import KeyedResponder, boolq_answer_key
from tests.servers.openai_compat import FakeOpenAI, ServerThread

GOLDEN = Path(__file__).parent / "data" / "golden_records.jsonl"
# What may differ between two runs of the same thing: how long it took, and which of two
# identical calls made at once was made and which shared its answer.
VOLATILE = {"wall_s", "latency_s", "cached", "shared"}
# Fields records gained after the golden file was written, with what this run must hold.
ADDED = {"options": 2}  # a BoolQ guess picks from two answers (the chance level)
# What every call sent (a compatible server: the repetition penalty goes), beside logprobs
# for generated knowledge's candidates.
SENT = {"temperature": 0.6, "top_p": 0.9, "max_tokens": 1024, "repetition_penalty": 1.1}


def _pop_sent(record: dict[str, Any]) -> None:
    """Check and remove each call's ``params`` (added after the golden file)."""
    calls = [c for a in record["attempts"] for c in a["calls"]]
    calls += [t["call"] for t in record["selections"] if t.get("call")]
    for call in calls:
        knowledge = call["purpose"].startswith("knowledge")
        assert call.pop("params") == {**SENT, **({"logprobs": True} if knowledge else {})}


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def scripted_records(data_dir: Path, out: Path) -> list[dict[str, Any]]:
    from hpt.tasks import get_task

    answers = boolq_answer_key(get_task("boolq", data_dir).load_samples())
    model = KeyedResponder(answers, "three_shot_cot")

    def respond(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if not prompt.startswith("Choose the most effective prompting strategy"):
            return model(body)
        # The selector climbs: level 1, then one above the levels tried so far.
        tried = re.search(r"Already tried without success: ([\d, ]+)\.", prompt)
        return str(len(tried[1].split(",")) + 1 if tried else 1)

    fake = FakeOpenAI(responder=respond)
    server = ServerThread(fake.app()).start()
    try:
        os.environ.setdefault("OPENAI_API_KEY", "test-key")
        spec = RunSpec(dataset="boolq", model="openai:test-model", base_url=server.base_url,
                       mode=["standard", "adaptive"], limit=8, concurrency=4,
                       data_dir=data_dir, out=out, cache=False)  # fmt: skip
        asyncio.run(run_evaluation(spec))
    finally:
        server.stop()
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return sorted((_stable(r) for r in rows), key=lambda r: (r["mode"], r["sample_id"]))


def test_records_are_those_written_before(data_dir: Path, tmp_path: Path) -> None:
    golden = [json.loads(line) for line in GOLDEN.read_text().splitlines()]
    records = scripted_records(data_dir, tmp_path / "run")
    for record in records:
        for name, value in ADDED.items():
            assert record.pop(name) == value
        _pop_sent(record)
    assert records == golden


if __name__ == "__main__":  # python tests/test_records_stable.py DATA_DIR: rewrite the golden file
    rows = scripted_records(Path(sys.argv[1]), Path(sys.argv[2]))
    for row in rows:
        _pop_sent(row)
    rows = [{k: v for k, v in r.items() if k not in ADDED} for r in rows]
    GOLDEN.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
