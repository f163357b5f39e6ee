"""One evaluation, several thresholds: the threshold cells of a dataset ask each identical
request once (the backend shares a request in flight, the runner climbs a sample's threshold
cells together) and so score the same completions, with the response cache or without."""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import hpt
from hpt.results.reader import read_records
from tests.backend_helpers import FAST_RETRY, serving
from tests.servers.openai_compat import FakeOpenAI


class Sampling:
    """A model that samples: a fresh draw of the prompt's words each time a request comes,
    so two identical requests sent apart get different replies."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        identity = json.dumps(body["messages"])
        with self.lock:
            self.asked[identity] += 1
            rng = random.Random(f"{identity}#{self.asked[identity]}")
        words = " ".join(body["messages"][-1]["content"].splitlines()[-12:]).split()
        picked = sorted(rng.sample(range(len(words)), min(12, len(words))))
        return "Summary: " + " ".join(words[i] for i in picked)


@pytest.mark.parametrize("cache", [True, False])
async def test_threshold_cells_share_every_completion(
    cache: bool, monkeypatch: pytest.MonkeyPatch, data_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    sampling = Sampling()
    fake = FakeOpenAI(sampling, delay_s=0.05)
    with serving(fake.app()) as srv:
        result = await hpt.evaluate(
            datasets="samsum", models="openai:test-model", threshold=[0.15, 0.2],
            base_url=srv.base_url, limit=6, concurrency=3, cache=cache,
            strategies=["role", "zero_shot_cot", "three_shot_cot"], data_dir=data_dir,
            out=tmp_path / "run", retry=FAST_RETRY,
        )  # fmt: skip
    # No request reached the model twice.
    assert max(sampling.asked.values()) == 1
    records = list(read_records(tmp_path / "run"))
    by_sample: dict[str, dict[float | None, list[str]]] = {}
    for r in records:
        by_sample.setdefault(r.sample_id, {})[r.threshold] = [
            a.completion or "" for a in r.attempts
        ]
    assert len(by_sample) == 6
    for climbs in by_sample.values():
        low, high = climbs[0.15], climbs[0.2]
        # The levels both cells reached scored the same completion.
        assert low[: len(high)] == high[: len(low)]
    calls = [c for r in records for c in r.all_calls()]
    made = [c for c in calls if not c.cached]
    assert len(made) == len(fake.requests) == len(sampling.asked)
    assert all(c.cached and c.shared for c in calls if c.shared)
    assert sum(c.shared for c in calls) == len(calls) - len(fake.requests) > 0
    # The summaries count a shared call as a call not made (cached_calls), once per cell.
    not_made = sum(s.cached_calls for s in result.summaries)
    assert sum(s.calls for s in result.summaries) - not_made == len(fake.requests)
