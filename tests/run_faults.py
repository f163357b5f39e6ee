"""Helpers for the tests of run directories under faults: a model server that answers only
when told, the ``hpt run`` command line, one-line errors, a tmpfs of the test's own."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from tests.servers.openai_compat import FakeOpenAI
from tests.test_cli import HPT


@dataclass
class GatedOpenAI(FakeOpenAI):
    """Answers only once ``gate`` is set; ``arrived`` counts the calls that reached it."""

    gate: threading.Event = field(default_factory=threading.Event)
    arrived: int = 0

    async def _chat(self, request: web.Request) -> web.Response:
        with self._lock:
            self.arrived += 1
        await asyncio.to_thread(self.gate.wait)
        return await super()._chat(request)


def run_cmd(base_url: str, data_dir: Path, out: Path, limit: int, *extra: str) -> list[str]:
    return [HPT, "run", "--dataset", "boolq", "--model", "openai:test-model", "--base-url",
            base_url, "--data-dir", str(data_dir), "--out", str(out), "--limit",
            str(limit), "--concurrency", "4", "--no-progress", *extra]  # fmt: skip


def env() -> dict[str, str]:
    full = {**os.environ, "OPENAI_API_KEY": "test-key"}
    full.pop("OPENAI_BASE_URL", None)
    return full


def start(cmd: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def one_error_line(stderr: str, *needles: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpt: error: "), stderr
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(name="mounted")
def mounted_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs of our own (root can write through permission bits, not through a
    read-only mount); skipped where mounting is not allowed."""
    if shutil.which("mount") is None:
        pytest.skip("no mount command here")
    point = tmp_path / "mnt"
    point.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(point)],
                          capture_output=True, text=True)  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=True)
