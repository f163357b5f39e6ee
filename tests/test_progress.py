"""The live display shows each backend's retries, rate-limit waits and concurrency."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from hpt.backends import BackendStats
from hpt.orchestrator import RunSpec
from hpt.orchestrator.progress import RichProgress


def test_live_view_shows_backend_counters(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = RichProgress(Console(file=out, force_terminal=True, width=200))
    stats = BackendStats(calls=40, cache_hits=7, retries=3, rate_limited=2,
                         rate_limit_wait_s=4.25, in_flight=5, concurrency=16)  # fmt: skip
    progress.watch({"tgi:http://gpu-1:8080": stats})
    progress.started(RunSpec(dataset="boolq"), total=10, out=tmp_path)
    stats.retries = 4  # counters are read on every refresh, not copied once
    progress.stop()
    text = out.getvalue()
    assert "tgi:http://gpu-1:8080: in flight 5/16" in text
    assert "retries 4" in text and "rate-limited 2" in text and "held back 4.2 s" in text
    assert "cache hits 7" in text
