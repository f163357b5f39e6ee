"""HumanEval: real execution in the sandbox, and everything a hostile completion might try."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from pathlib import Path

import pytest

from hpt.tasks import get_task
from hpt.tasks.humaneval import build_program, extract_code
from hpt.tasks.sandbox import Sandbox, SandboxLimits


@pytest.fixture(scope="module")
def humaneval(data_dir: Path):  # type: ignore[no-untyped-def]
    return get_task("humaneval", data_dir)


async def test_all_canonical_solutions_pass_and_wrong_ones_fail(humaneval) -> None:  # type: ignore[no-untyped-def]
    samples = humaneval._all()
    assert len(samples) == 164 and len(humaneval.load_samples()) == 161
    right = await asyncio.gather(*(humaneval.acheck(s, s.target) for s in samples))
    assert [s.id for s, c in zip(samples, right, strict=True) if not c.resolved] == []
    wrong = await asyncio.gather(*(humaneval.acheck(s, "    return None\n") for s in samples))
    assert [s.id for s, c in zip(samples, wrong, strict=True) if c.resolved] == []
    # Off by one: the tests really run (the reference code never called check()).
    s = samples[2]  # truncate_number: return number % 1.0
    off = await humaneval.acheck(s, "    return number % 1.0 + 0.5\n")
    assert not off.resolved and off.detail == "AssertionError"


def test_code_extraction() -> None:
    assert extract_code("    return 1\n", "f") == "    return 1\n"
    fenced = (
        "Sure.\n```python\ndef helper():\n    pass\n```\n```python\ndef f(x):\n    return x\n```"
    )
    assert extract_code(fenced, "f") == "def f(x):\n    return x\n"
    assert extract_code("```\nreturn 2\n```", "f") == "return 2\n"
    assert extract_code("```python\ndef f():\n    return 3", "f") == "def f():\n    return 3"
    program = build_program('def f(x):\n    """doc"""\n', "```py\ndef f(x):\n    return x\n```",
                            "def check(c):\n    assert c(2) == 2\n", "f")  # fmt: skip
    assert program.rstrip().endswith("check(f)")


def _program(body: str) -> str:
    return f"{body}\n"


HOSTILE = {
    "infinite loop": ("while True:\n    pass", "CPU time limit"),
    "sleeps forever": ("import time\ntime.sleep(600)", "timed out after"),
    "fork bomb": ("import os\nwhile True:\n    os.fork()", "blocked: os.fork"),
    "subprocess": ("import subprocess\nsubprocess.run(['rm', '-rf', '/tmp/x'])", "blocked: subprocess"),
    "unbounded memory": ("x = []\nwhile True:\n    x.append(' ' * 10**7)", "memory limit"),
    "os.system": ("import os\nos.system('echo hi')", "blocked: os.system"),
    "ctypes": ("import ctypes", "import of ctypes halted"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_hostile_programs_are_contained(name: str) -> None:
    code, reason = HOSTILE[name]
    sandbox = Sandbox(SandboxLimits(timeout_s=4, cpu_s=2, memory_mb=256))
    result = await sandbox.run(code)
    assert not result.passed and reason in result.reason, result


async def test_files_outside_the_sandbox_are_untouchable(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    sandbox = Sandbox(SandboxLimits(timeout_s=5))
    attempts = {
        "delete": f"import os\nos.remove({str(victim)!r})",
        "overwrite": f"open({str(victim)!r}, 'w').write('gone')",
        "read": f"print(open({str(victim)!r}).read())",
        "rmtree": f"import shutil\nshutil.rmtree({str(tmp_path)!r})",
        "rename": f"import os\nos.rename({str(victim)!r}, 'stolen')",
        "os.open": f"import os\nos.open({str(victim)!r}, os.O_WRONLY)",
        "climb out": "open('../escaped.txt', 'w').write('x')",
    }
    for name, code in attempts.items():
        result = await sandbox.run(code)
        assert not result.passed and result.reason.startswith("blocked:"), (name, result)
    assert victim.read_text() == "precious"
    # Its own directory is writable, and gone afterwards.
    ok = await sandbox.run("open('scratch.txt', 'w').write('x')\nimport os\nprint(os.getcwd())")
    assert ok.passed


async def test_no_secrets_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    code = "import os\nassert 'OPENAI_API_KEY' not in os.environ, 'leaked'\nassert len(os.environ) < 10"
    assert (await Sandbox().run(code)).passed


async def test_no_network() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(3)
    port = server.getsockname()[1]
    connected: list[bool] = []

    def accept() -> None:
        try:
            server.accept()
            connected.append(True)
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)"
    raw = f"import _socket\ns = _socket.socket()\ns.settimeout(2)\ns.connect(('127.0.0.1', {port}))"
    sandbox = Sandbox(SandboxLimits(timeout_s=5))
    guarded, low_level = await sandbox.run(code), await sandbox.run(raw)
    t.join()
    server.close()
    assert not guarded.passed and "blocked: network access" in guarded.reason
    assert not low_level.passed  # below the guard, the network namespace (where available)
    assert connected == []
    if guarded.isolation == "network namespace":
        assert "OSError" in low_level.reason or "Error" in low_level.reason


def test_sandbox_children_are_gone_after_a_timeout() -> None:
    # A killed program leaves no process behind in its group.
    async def go() -> None:
        result = await Sandbox(SandboxLimits(timeout_s=1)).run("import time\ntime.sleep(60)")
        assert "timed out" in result.reason

    asyncio.run(go())
    out = os.popen("ps -eo args").read()
    assert "hpt sandbox" not in out and "time.sleep(60)" not in out


async def test_ladder_on_humaneval(
    humaneval,
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    from hpt.orchestrator import RunSpec, run_evaluation
    from hpt.orchestrator.store import read_records
    from tests.backend_helpers import serving
    from tests.servers.answer_key import strategy_of
    from tests.servers.openai_compat import FakeOpenAI

    solutions = {str(s.fields["code"]): s for s in humaneval.load_samples()}

    def responder(body: dict) -> str:  # type: ignore[type-arg]
        prompt = body["messages"][-1]["content"]
        sample = next(s for code, s in solutions.items() if code in prompt)
        if strategy_of(body) == "role":  # a wrong body first, then a whole fenced function
            return "```python\n    return None\n```"
        return f"Let me write it.\n```python\n{sample.fields['code']}{sample.target}```"

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(responder)
    with serving(fake.app()) as srv:
        spec = RunSpec(dataset="humaneval", model="openai:test-model", base_url=srv.base_url,
                       limit=4, data_dir=data_dir, out=tmp_path / "run")  # fmt: skip
        result = await run_evaluation(spec)
    records = list(read_records(tmp_path / "run"))
    assert len(records) == 4 and result.summary.hpi == 2.0
    for r in records:
        assert r.resolved_level == 2
        assert r.attempts[0].detail.startswith("AssertionError") and not r.attempts[0].resolved
        assert r.attempts[1].detail == "passed"


async def test_samples_per_task_reports_pass_at_k(
    humaneval,
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    import threading
    from collections import Counter

    from hpt.orchestrator import RunSpec, run_evaluation
    from hpt.orchestrator.store import read_records
    from tests.backend_helpers import serving
    from tests.servers.answer_key import strategy_of
    from tests.servers.openai_compat import FakeOpenAI

    solutions = {str(s.fields["code"]): s for s in humaneval.load_samples()}
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def responder(body: dict) -> str:  # type: ignore[type-arg]
        prompt = body["messages"][-1]["content"]
        sample = next(s for code, s in solutions.items() if code in prompt)
        if strategy_of(body) == "role":
            with lock:
                seen[sample.id] += 1
                first = seen[sample.id] == 1
            if not first:  # one of the three level-1 draws is right
                return "    return None\n"
        return f"```python\n{sample.fields['code']}{sample.target}```"

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with serving(FakeOpenAI(responder).app()) as srv:
        spec = RunSpec(dataset="humaneval", model="openai:test-model", base_url=srv.base_url,
                       limit=3, samples_per_task=3, data_dir=data_dir, out=tmp_path / "run",
                       strategies=["role", "zero_shot_cot"])  # fmt: skip
        result = await run_evaluation(spec)
    records = list(read_records(tmp_path / "run"))
    assert len(records) == 9 and sorted({r.draw for r in records}) == [0, 1, 2]
    p = result.summary.pass_at_k
    assert p["level1@1"] == pytest.approx(1 / 3) and p["level1@2"] == pytest.approx(2 / 3)
    assert p["level1@3"] == 1.0 and p["hpf@1"] == 1.0
    assert result.summary.hpi == pytest.approx((1 + 2 + 2) / 3)
