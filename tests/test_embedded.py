"""End to end on the real embedded model: SmolLM2-135M-Instruct Q4_1 under llama.cpp."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hpt.backends import GenerationParams, Message, open_backend, parse_model_spec
from hpt.graphs import DEFAULT_LADDER
from tests.conftest import interruptible
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


# Generated knowledge asks for logprobs; the embedded model serves them from a second
# llama.cpp server (with logits_all) that the first such call starts.


def _servers_of(root: int) -> dict[int, int]:
    """The llama.cpp servers among ``root``'s children: pid -> port."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().decode().split("\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == root and any("llama_cpp.server" in arg for arg in argv):
            found[int(entry.name)] = int(argv[argv.index("--port") + 1])
    return found


def _servers_with_env(marker: str) -> set[int]:
    """Every llama.cpp server whose environment holds the entry ``marker``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"llama_cpp.server" in arg for arg in argv) and marker.encode() in env:
            found.add(int(entry.name))
    return found


def _this_tests_servers() -> set[int]:
    """The servers started under this test's private cache dir (they inherit it)."""
    return _servers_with_env(f"HPT_CACHE_DIR={os.environ['HPT_CACHE_DIR']}")


def _refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _gkp_run(data_dir: Path, out: Path, *, interrupt: bool = False) -> tuple[int, str, dict]:
    """``hpt run`` of generated knowledge on one BoolQ sample; returns its exit code, stderr
    and the servers it started (pid -> port, seen while it ran). Once both are up, they must
    be the ones found by this test's environment, which is how leftovers are looked for."""
    cmd = [str(Path(sys.executable).parent / "hpt"), "run", "--dataset", "boolq", "--limit", "1",
           "--strategies", "generated_knowledge", "--max-tokens", "64",
           "--data-dir", str(data_dir), "--out", str(out), "--no-progress"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)  # fmt: skip
    seen: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            before = len(seen)
            seen.update(_servers_of(proc.pid))
            if len(seen) == 2 > before:
                assert _this_tests_servers() == set(seen)
                if interrupt:  # both servers up: the knowledge calls are running
                    proc.send_signal(signal.SIGINT)
            time.sleep(0.1)
    finally:
        if proc.poll() is None and not interrupt:
            proc.send_signal(signal.SIGINT)  # a failed check: let hpt stop its servers
        _, stderr = proc.communicate(timeout=60)
    return proc.returncode, stderr, seen


def test_generated_knowledge_picks_by_mean_token_prob(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    code, stderr, servers = _gkp_run(data_dir, out)
    assert code == 0, stderr
    (rec,) = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    (attempt,) = rec["attempts"]
    knowledge = [c for c in attempt["calls"] if c["purpose"].startswith("knowledge")]
    assert [c["purpose"] for c in knowledge] == ["knowledge 1/3", "knowledge 2/3", "knowledge 3/3"]
    probs = [c["mean_token_prob"] for c in knowledge]
    assert all(p is not None and 0 < p <= 1 for p in probs), probs
    chosen = max(range(3), key=lambda i: probs[i])
    note = attempt["notes"]["knowledge"]
    assert note.startswith(f"candidate {chosen + 1} of 3 by mean token probability ("), note
    answer = attempt["calls"][-1]
    assert answer["purpose"] == "answer" and answer["mean_token_prob"] is None
    assert knowledge[chosen]["completion"] in answer["messages"][-1]["content"]

    # Both servers (the fast one and the logprob one) are gone: ports closed, processes reaped.
    assert len(servers) == 2, servers
    assert all(_refused(port) for port in servers.values())
    assert _this_tests_servers() == set()


def test_ctrl_c_during_generated_knowledge_stops_both_servers(
    data_dir: Path, tmp_path: Path
) -> None:
    code, stderr, servers = _gkp_run(data_dir, tmp_path / "run", interrupt=True)
    assert len(servers) == 2, (servers, stderr)
    assert code == 130, stderr
    assert "Traceback" not in stderr
    assert all(_refused(port) for port in servers.values())
    assert _this_tests_servers() == set()


async def test_logprob_calls_reach_the_logprob_server_only() -> None:
    async with open_backend(parse_model_spec("local"), label="local") as backend:
        ask = [Message(role="user", content="Name a colour.")]
        plain = await backend.complete(ask, GenerationParams(max_tokens=8, seed=1))
        assert plain.logprobs is None
        servers = backend.transport._servers  # type: ignore[attr-defined]
        assert servers.scoring.base_url == ""  # not started until a call asks for logprobs
        scored = await asyncio.gather(
            *(
                backend.complete(ask, GenerationParams(max_tokens=8, seed=i, logprobs=True))
                for i in range(3)
            )
        )
        assert all(s.logprobs and len(s.logprobs) == s.usage.completion_tokens for s in scored)
        urls = [servers.fast.base_url, servers.scoring.base_url]
        assert urls[0] != urls[1] and all(urls)
    async with httpx.AsyncClient(timeout=2) as client:
        for url in urls:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"{url}/models")
