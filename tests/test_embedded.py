"""End to end on the real embedded model: SmolLM2-135M-Instruct Q4_1 under llama.cpp's
llama-server."""

from __future__ import annotations

import asyncio
import contextlib
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
from hpt.backends.local import SERVER_ENV, embedded_server, find_gguf
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


# Generated knowledge asks for logprobs; the embedded model's one llama-server answers them.


def _servers_of(root: int) -> dict[int, int]:
    """The llama-servers among ``root``'s children: pid -> port."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().decode().split("\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == root and argv[0].endswith("llama-server"):
            found[int(entry.name)] = int(argv[argv.index("--port") + 1])
    return found


def _servers_with_env(marker: str) -> set[int]:
    """Every llama-server whose environment holds the entry ``marker``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"llama-server") and marker.encode() in env:
            found.add(int(entry.name))
    return found


def _this_tests_servers() -> set[int]:
    """The servers started under this test's private cache dir (they inherit it)."""
    return _servers_with_env(f"HPT_CACHE_DIR={os.environ['HPT_CACHE_DIR']}")


def _refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _decoding(port: int) -> int:
    """How many of the server's slots are decoding a call now (its /slots)."""
    with contextlib.suppress(httpx.HTTPError, ValueError):
        slots = httpx.get(f"http://127.0.0.1:{port}/slots", timeout=2).json()
        if isinstance(slots, list):  # not an error (503 while loading)
            return sum(1 for s in slots if s.get("is_processing"))
    return 0


def _gkp_run(data_dir: Path, out: Path, *, interrupt: bool = False) -> tuple[int, str, dict]:
    """``hpt run`` of generated knowledge on one BoolQ sample; returns its exit code, stderr
    and the servers it started (pid -> port, seen while it ran). Once one is up, it must be
    the one found by this test's environment, which is how leftovers are looked for."""
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
            if len(seen) > before:
                assert _this_tests_servers() == set(seen)
            # The knowledge calls are being decoded: interrupt them.
            if interrupt and seen and any(_decoding(port) for port in seen.values()):
                proc.send_signal(signal.SIGINT)
                break
            time.sleep(0.05)
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

    # One server answered every call, logprobs included; it is gone: port closed, reaped.
    assert len(servers) == 1, servers
    assert all(_refused(port) for port in servers.values())
    assert _this_tests_servers() == set()


def test_ctrl_c_during_generated_knowledge_stops_the_server(data_dir: Path, tmp_path: Path) -> None:
    code, stderr, servers = _gkp_run(data_dir, tmp_path / "run", interrupt=True)
    assert len(servers) == 1, (servers, stderr)
    assert code == 130, stderr
    assert "Traceback" not in stderr
    assert all(_refused(port) for port in servers.values())
    assert _this_tests_servers() == set()


async def test_logprobs_come_from_the_one_server() -> None:
    async with open_backend(parse_model_spec("local"), label="local") as backend:
        ask = [Message(role="user", content="Name a colour.")]
        plain = await backend.complete(ask, GenerationParams(max_tokens=8, seed=1))
        assert plain.logprobs is None
        scored = await asyncio.gather(
            *(
                backend.complete(ask, GenerationParams(max_tokens=8, seed=i, logprobs=True))
                for i in range(3)
            )
        )
        # One a token, except that llama-server gives a character split over several tokens
        # (an emoji's bytes) one logprob, its last token's.
        assert all(s.logprobs and len(s.logprobs) <= s.usage.completion_tokens for s in scored)
        assert all(lp <= 0 for s in scored for lp in s.logprobs or [])
        url = backend.transport.endpoint
    async with httpx.AsyncClient(timeout=2) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"{url}/models")


def _library_logprobs(ask: list[dict[str, str]], max_tokens: int) -> tuple[str, list[float]]:
    """Greedy text and per-token logprobs from llama.cpp's library (llama-cpp-python), as
    the embedded model's server gave them before llama-server."""
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(str(find_gguf()), n_ctx=1024, logits_all=True, verbose=False)
    out = llm.create_chat_completion(
        ask, max_tokens=max_tokens, temperature=0, logprobs=True, top_logprobs=1
    )
    choice = out["choices"][0]
    return choice["message"]["content"], [t["logprob"] for t in choice["logprobs"]["content"]]


async def test_logprobs_are_the_numbers_the_library_gives() -> None:
    """Same model, same attention (no flash attention), same log-softmax of the raw logits:
    greedy decoding gives the same text and the same logprobs to ~3 decimals."""
    ask = [{"role": "user", "content": "Give one fact about the moon."}]
    text, expected = await asyncio.to_thread(_library_logprobs, ask, 16)
    async with open_backend(parse_model_spec("local"), label="local") as backend:
        got = await backend.complete(
            [Message(role="user", content=ask[0]["content"])],
            GenerationParams(max_tokens=16, temperature=0, logprobs=True, repetition_penalty=1.0),
        )
    assert got.text == text
    assert got.logprobs == pytest.approx(expected, abs=0.01)


# The server decodes the calls in flight together, one slot each.


async def test_calls_in_flight_are_decoded_together() -> None:
    async with embedded_server(4) as url:
        root = url.removesuffix("/v1")
        async with httpx.AsyncClient(timeout=120) as client:
            props = (await client.get(f"{root}/props")).json()
            assert props["total_slots"] == 4
            body = {"messages": [{"role": "user", "content": "Tell a long story."}],
                    "max_tokens": 96, "temperature": 0, "ignore_eos": True}  # fmt: skip
            most = 0

            async def watch() -> None:
                nonlocal most
                while True:
                    slots = (await client.get(f"{root}/slots")).json()
                    most = max(most, sum(1 for s in slots if s["is_processing"]))
                    await asyncio.sleep(0.02)

            watcher = asyncio.ensure_future(watch())
            replies = await asyncio.gather(
                *(client.post(f"{url}/chat/completions", json=body) for _ in range(4))
            )
            watcher.cancel()
        assert [r.json()["usage"]["completion_tokens"] for r in replies] == [96] * 4
        assert most >= 3, most  # decoded side by side, not one after another


async def test_hpt_local_server_names_a_running_server_that_outlives_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with embedded_server(2) as url:
        monkeypatch.setenv(SERVER_ENV, url)
        mine = set(_servers_of(os.getpid()))
        assert len(mine) == 1
        async with open_backend(parse_model_spec("local"), label="local") as backend:
            out = await backend.complete(
                [Message(role="user", content="Say hello.")], GenerationParams(max_tokens=8)
            )
            assert out.text.strip() and backend.transport.endpoint == url
            assert set(_servers_of(os.getpid())) == mine  # it started none
            assert backend.stats.concurrency == 2
        async with httpx.AsyncClient(timeout=5) as client:
            assert (await client.get(f"{url}/health")).status_code == 200
