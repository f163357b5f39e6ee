"""The sandbox's threat model, attack by attack (hpt/tasks/sandbox.py, sandbox_child.py,
sandbox_checker.py).

Each attack runs under bubblewrap and under the fallback (no bubblewrap): the verdict comes
from the checker, a process that never runs generated code, in both; the harness's refusals
are defence in depth, and what only the OS boundary gives is asserted only under it. Every
forgery below resolved a wrong body under an earlier design (the test ran in the program's
own interpreter), and every escape reached the user's files or processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpt.tasks import sandbox_bwrap
from hpt.tasks.humaneval import HumanEval
from hpt.tasks.sandbox import Sandbox, SandboxLimits, SandboxResult, _unshare_prefix, isolation

REPO = Path(__file__).resolve().parents[1]
MODES = ["bubblewrap", "fallback"]


def sandbox(mode: str) -> Sandbox:
    if mode == "bubblewrap" and isolation()[0] != "bubblewrap":
        pytest.skip(
            "bubblewrap cannot run here (make test installs it: apt-get install bubblewrap)"
        )
    return Sandbox(SandboxLimits(timeout_s=10), bubblewrap=mode == "bubblewrap")


# A wrong body, as HumanEval builds a program (prompt + completion), and the test the checker
# runs. The attack sits in the completion, where a model's text goes.
WRONG = "def f(x):\n    return -x\n\n"
TEST = "\n\ndef check(candidate):\n    assert candidate(2) == 2\n"
# Given any frame, walk up to the harness's main() and prove success with its own token and
# functions (the old harness's names, and this one's).
FORGE = textwrap.dedent("""
    def forge(frame):
        while frame is not None:
            names = frame.f_locals
            if "token" in names and "real_exit" in names:
                if "say" in names:
                    names["say"](names["token"], False)
                else:
                    names["write"](names["proof_fd"], names["token"])
                names["real_exit"](0)
            frame = frame.f_back
""")


async def attack(mode: str, completion: str, tests: str = TEST) -> SandboxResult:
    program = WRONG + FORGE + textwrap.dedent(completion)
    return await sandbox(mode).run(program, entry_point="f", tests=tests)


# The type-dict leak (CPython gh-152405): comparing a type's mappingproxy with an object whose
# __eq__ keeps its argument hands over the type's real, writable dict.
LEAK = """
        class Leak:
            def __eq__(self, other):
                global leaked
                leaked = other
                return True
    """
# An object that says it equals anything, whose metaclass says its class is int (hash and ==):
# `type(value) in {int, ...}` let it through the old harness's plain-data copy.
ALWAYS_EQUAL = """
        class Meta(type):
            def __hash__(cls):
                return hash(int)
            def __eq__(cls, other):
                return True
        class Yes(metaclass=Meta):
            def __eq__(self, other):
                return True
            def __ne__(self, other):
                return False
            def __sub__(self, other):
                return 0
            def __rsub__(self, other):
                return 0
            def __abs__(self):
                return 0
            def __bool__(self):
                return True
            __hash__ = object.__hash__
    """


# FunctionType's __code__ replaced (through the leak) by a descriptor that shows the test's
# check()'s code on a no-op, which the program then puts in check()'s place.
SWAP_CHECK = """
        import sys
        type(lambda: 0).__dict__ == Leak()
        real = leaked["__code__"]
        expected = []
        def fake(candidate):
            pass
        class Code:
            def __get__(self, obj, owner=None):
                if obj is fake and expected:
                    return expected[0]
                return real.__get__(obj, owner)
            def __set__(self, obj, value):
                real.__set__(obj, value)
        class Swap:
            def __del__(self):
                g = globals()
                expected.append(g["check"].__code__)
                g["check"] = fake
                leaked["__code__"] = Code()
                sys._clear_type_cache()
        check = Swap()
    """

FORGERIES = {
    "sys._getframe walk to main()": "import sys\nforge(sys._getframe())\n",
    "traceback tb_frame walk": """
        try:
            1 / 0
        except ZeroDivisionError as exc:
            forge(exc.__traceback__.tb_frame)
    """,
    "generator gi_frame walk": """
        def walker():
            yield forge(running.gi_frame)
        running = walker()
        next(running)
    """,
    "signal handler frame walk": """
        import signal
        signal.signal(signal.SIGUSR1, lambda number, frame: forge(frame))
        signal.raise_signal(signal.SIGUSR1)
    """,
    "a fresh _signal module's handler": """
        import _imp, importlib.machinery
        fresh = _imp.create_builtin(importlib.machinery.ModuleSpec("_signal", None))
        fresh.signal(10, lambda number, frame: forge(frame))
        fresh.raise_signal(10)
    """,
    "sys.settrace": """
        import sys
        sys.settrace(lambda frame, event, arg: forge(frame))
        (lambda: None)()
    """,
    "ctypes PyEval_GetFrame": """
        import sys
        sys.modules.pop("ctypes", None)
        import ctypes
        get = ctypes.pythonapi.PyEval_GetFrame
        get.restype = ctypes.py_object
        forge(get())
    """,
    # The test's `def check` drops the completion's last reference to its own `check`,
    # whose finaliser then puts a check that always passes in its place.
    "swapping check() from a finaliser": """
        class Swap:
            def __del__(self):
                globals()["check"] = lambda candidate: None
        check = Swap()
    """,
    # The harness's module is the program's to change (so are the builtins): its verdict must
    # not depend on anything looked up there once the program has started.
    "rebinding the harness's helpers": """
        import sys
        harness = sys.modules["__main__"]
        for name in ("_serve", "_policy", "_install", "_limit", "wire"):
            setattr(harness, name, lambda *args, **kwargs: None)
    """,
    "an always-equal return value": """
        class Yes:
            def __eq__(self, other):
                return True
        def f(x):
            return Yes()
    """,
    "an always-equal value whose metaclass claims int": ALWAYS_EQUAL
    + """
        def f(x):
            return Yes()
    """,
    "swapping check() through FunctionType's dict": LEAK + SWAP_CHECK,
    # str's methods rewritten (through the leak) so the hook's checks of "ctypes" pass.
    "ctypes past a rewritten str": LEAK
    + """
        import sys
        str.__dict__ == Leak()
        split, part, starts = leaked["split"], leaked["partition"], leaked["startswith"]
        leaked["split"] = lambda s, sep=None, maxsplit=-1: (
            [] if sep == "." and "ctypes" in s else split(s, sep, maxsplit))
        leaked["partition"] = lambda s, sep: ("ok", "", "") if starts(s, "_ctypes.") else part(s, sep)
        leaked["startswith"] = lambda s, p, *a: False if p == "ctypes." else starts(s, p, *a)
        sys._clear_type_cache()
        sys.modules.pop("ctypes", None)
        import ctypes
        get = ctypes.pythonapi.PyEval_GetFrame
        get.restype = ctypes.py_object
        forge(get())
    """,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(FORGERIES))
async def test_a_wrong_body_cannot_forge_the_proof(mode: str, name: str) -> None:
    result = await attack(mode, FORGERIES[name])
    assert not result.passed, result
    assert "0" * 8 not in result.reason  # no token-like text came back either


@pytest.mark.parametrize("mode", MODES)
async def test_shadowing_what_the_test_looks_up_changes_nothing(mode: str) -> None:
    # The test's abs is the checker's: the program's own abs, whatever it says, is not.
    test = "def check(candidate):\n    assert abs(candidate(3.5) - 3.5) < 1e-6\n"
    shadow = "abs = lambda value: 0\nimport builtins\nbuiltins.abs = abs\n"
    result = await attack(mode, shadow, tests=test)
    assert not result.passed and result.reason == "AssertionError", result


@pytest.mark.parametrize("mode", MODES)
async def test_stopiteration_does_not_end_the_tests_loop(mode: str) -> None:
    # Raised by the candidate inside `for ... in map(candidate, ...)`, a StopIteration would
    # end the loop as if every case were checked: the checker raises something else.
    test = "def check(candidate):\n    for value in map(candidate, [1, 2]):\n        assert value == 0\n"
    result = await attack(mode, "def f(x):\n    raise StopIteration\n", tests=test)
    assert not result.passed and result.reason == "StopIteration", result


# The reviewer's generic completions, one text for every task (ENTRY: its entry point): an
# always-equal object (once 154 of 161 passed), and check() swapped for a no-op (161 of 161).
GAMES = {
    "always equal": textwrap.dedent(ALWAYS_EQUAL) + "\ndef ENTRY(*args, **kwargs):\n    return Yes()\n",
    "check() swapped": textwrap.dedent(LEAK + SWAP_CHECK) + "\ndef ENTRY(*args, **kwargs):\n    return None\n",
}  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("game", list(GAMES))
async def test_generic_gaming_completions_resolve_nothing(
    mode: str, game: str, data_dir: Path
) -> None:
    task = HumanEval(data_dir, sandbox=sandbox(mode))
    samples = task.load_samples()[:6]
    checks = [
        await task.acheck(s, "```python\n" + GAMES[game].replace("ENTRY", s.meta["entry_point"]) + "```")
        for s in samples
    ]  # fmt: skip
    assert [c.detail for c in checks if c.resolved] == []


# What a program may not even reach, forged proof or not: each runs at the module's end of a
# right body, so only the attempt itself can fail it.
REFUSED = {
    "gc.get_referrers to the harness": (
        "import gc, sys\nharness = sys.modules['__main__'].__dict__\n"
        "assert any(callable(r) for r in gc.get_referrers(harness))\n",
        "blocked: heap introspection (gc.get_referrers)"),
    "gc.get_objects": ("import gc\nassert gc.get_objects()\n",
                       "blocked: heap introspection (gc.get_objects)"),
    "gc.set_debug(DEBUG_SAVEALL)": ("import gc\ngc.set_debug(gc.DEBUG_SAVEALL)\n",
                                    "blocked: gc.set_debug"),
    "sys._current_frames": ("import sys\nassert sys._current_frames()\n",
                            "blocked: frame introspection (sys._current_frames)"),
    "os.fork through posix": (
        "import posix\npid = posix.fork()\nif pid == 0:\n    posix._exit(0)\nposix.waitpid(pid, 0)\n",
        "blocked: os.fork"),
    # Past subprocess.Popen's audit event (the arguments are 3.11's; refused whatever they are).
    "_posixsubprocess.fork_exec": (
        "import _posixsubprocess, os\nr, w = os.pipe()\n"
        "pid = _posixsubprocess.fork_exec([b'/bin/true'], [b'/bin/true'], True, (), None, None,"
        " -1, -1, -1, -1, -1, -1, r, w, False, False, -1, None, None, None, -1, None, False)\n"
        "os.waitpid(pid, 0)\n", "blocked: subprocess"),
    "a subinterpreter": ("import _xxsubinterpreters\n", "blocked: importing _xxsubinterpreters"),
    "making code objects": ("(lambda: 0).__code__.replace(co_consts=(1,))\n",
                            "blocked: making code objects"),
    "marshal.loads of made-up bytecode": (
        "import marshal\nmarshal.loads(marshal.dumps(compile('1', 'x', 'eval')))\n",
        "blocked: marshal.loads"),
    "assigning __code__": ("g = lambda: 0\ng.__code__ = (lambda: 1).__code__\n",
                           "blocked: assigning __code__"),
    "a native module the program wrote": (
        "import _imp, _io, importlib.machinery, os, sys\n"
        "so = [p for p in os.listdir(sys.path[2]) if p.startswith('_heapq.')][0]\n"
        "_io.FileIO('mine.so', 'w').write(_io.FileIO(os.path.join(sys.path[2], so)).read())\n"
        "spec = importlib.machinery.ModuleSpec('_heapq', None, origin=os.path.abspath('mine.so'))\n"
        "_imp.create_dynamic(spec)\n",
        "loading"),
    "a fresh posix module": (
        "import _imp, importlib.machinery\n"
        "_imp.create_builtin(importlib.machinery.ModuleSpec('posix', None))\n",
        "making the module 'posix' afresh"),
    "reading /proc": ("import _io\nprint(_io.FileIO('/proc/self/status').read())\n", None),
}  # fmt: skip
# Attacks on the harness's own mechanisms (they did not exist before it).
REFUSED_TOO = {
    "_ctypes under another name": (
        "import _imp, importlib.machinery, os, sys\n"
        "so = [p for p in os.listdir(sys.path[2]) if p.startswith('_ctypes.')][0]\n"
        "origin = os.path.join(sys.path[2], so)\n"
        "_imp.create_dynamic(importlib.machinery.ModuleSpec('x._ctypes', None, origin=origin))\n",
        "making the module 'x._ctypes' afresh"),
    "driving a stand-in's generator": (
        "import _imp\n"
        "calls = [c.cell_contents for c in _imp.create_builtin.__closure__\n"
        "         if type(c.cell_contents).__name__ == 'generator'][0]\n"
        "call = next(calls)\nnext(call)\n"
        "call.send((type('Spec', (), {'name': '_signal'})(),))\n",
        "making the module '_signal' afresh"),
    "a stand-in's frame": (
        "import _imp\n"
        "calls = [c.cell_contents for c in _imp.create_builtin.__closure__\n"
        "         if type(c.cell_contents).__name__ == 'generator'][0]\n"
        "calls.gi_frame\n",
        "blocked: frame introspection (gi_frame)"),
    "the frame of the hook that refused": (
        "import sys\ntry:\n    sys._current_frames()\nexcept PermissionError as exc:\n"
        "    tb = exc.__traceback__\n    while tb.tb_next:\n        tb = tb.tb_next\n"
        "    tb.tb_frame\n",
        "blocked: frame introspection (tb_frame)"),
    "taking the checker's pipe as a socket": (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=int(sys.orig_argv[-4]))\n",
        "blocked: network access"),
    # Unaudited: a socket of its own, dup2'd over a descriptor to recvmsg what it carries.
    "_socket.socketpair": (
        "import _socket, os, sys\na, b = _socket.socketpair()\n"
        "os.dup2(int(sys.orig_argv[-4]), a.fileno())\na.recvmsg(1, _socket.CMSG_SPACE(4))\n",
        "blocked: network access (socketpair)"),
    # FileIO.readall rewritten (through the leak) to answer what the marshal check compares.
    "marshal.loads past a rewritten FileIO.readall": (textwrap.dedent(LEAK + """
        import sys, marshal, _io, os, importlib.util
        _io.FileIO.__dict__ == Leak()
        _io.FileIO(importlib.util.cache_from_source(os.__file__)).close()
        blob = marshal.dumps(compile("'forged code'", "x", "eval"))
        leaked["readall"] = lambda self: b"\\0" * 16 + blob
        sys._clear_type_cache()
        marshal.loads(blob)
    """), "blocked: marshal.loads"),
    "adding an audit hook": (
        "import sys\nseen = []\nsys.addaudithook(lambda event, args: seen.append(event))\n"
        "import fractions\nassert seen, 'the hook was not added'\n",
        "the hook was not added"),
}  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", [*REFUSED, *REFUSED_TOO])
async def test_the_harness_refuses(mode: str, name: str) -> None:
    code, reason = {**REFUSED, **REFUSED_TOO}[name]
    right = "def f(x):\n    return x\n\n"
    result = await sandbox(mode).run(right + code, entry_point="f", tests=TEST)
    assert not result.passed, result
    if reason is not None:
        assert reason in result.reason, result


def relative_to_cwd(path: Path) -> str:
    return os.path.relpath(path, os.getcwd())


@pytest.mark.parametrize("mode", MODES)
async def test_files_outside_are_neither_changed_nor_read(mode: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / ".env"
    secret.write_text("OPENAI_API_KEY=sk-beside-the-project")
    touched, written = outside / "touched", outside / "written"
    rel = relative_to_cwd(secret)  # through the parent's cwd, under /proc
    attempts = {
        "posix.system touch": f"import posix\nposix.system('touch {touched}')",
        "_io.FileIO write": f"import _io\n_io.FileIO({str(written)!r}, 'w').write(b'x')",
        "_io.FileIO read": f"import _io\nraise ValueError(_io.FileIO({str(secret)!r}).read())",
        "/proc/<ppid>/cwd read": (
            "import _io, os\n"
            f"raise ValueError(_io.FileIO(f'/proc/{{os.getppid()}}/cwd/{rel}').read())"),
        "/proc/<ppid>/root read": (
            "import _io, os\n"
            f"raise ValueError(_io.FileIO(f'/proc/{{os.getppid()}}/root{secret}').read())"),
        # str.startswith rewritten (through the leak) to tell the hook every path is at home.
        "past a rewritten str.startswith": textwrap.dedent(LEAK + f"""
        import os, sys, _io
        home = os.getcwd() + "/"
        str.__dict__ == Leak()
        real = leaked["startswith"]
        leaked["startswith"] = lambda s, p, *a: (
            True if p == home else False if p == "socket." else real(s, p, *a))
        sys._clear_type_cache()
        _io.FileIO({str(written)!r}, "w").write(b"x")
        raise ValueError(_io.FileIO({str(secret)!r}).read())
        """),
    }  # fmt: skip
    box = sandbox(mode)
    for name, code in attempts.items():
        result = await box.run(code)
        assert not result.passed, (name, result)
        assert "sk-beside" not in result.reason, (name, result)
        if mode == "fallback" and name == "past a rewritten str.startswith":
            assert result.reason.startswith("blocked: writing"), result  # the hook still holds
    assert not touched.exists() and not written.exists()


async def test_without_bubblewrap_descriptors_change_no_file_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the harness lets a program open to read (here: a stand-in for the standard library,
    # so that nothing real is at stake) it may not change through the descriptor.
    stdlib = tmp_path / "stdlib"
    stdlib.mkdir()
    victim = stdlib / "victim.py"
    victim.write_text("x = 1\n")
    victim.chmod(0o644)
    before = victim.stat()
    dynload = sandbox_bwrap.python_dirs()[1]
    monkeypatch.setattr(sandbox_bwrap, "python_dirs", lambda: (str(stdlib), dynload))
    box = sandbox("fallback")
    opened = "import os, sys\nfd = os.open(sys.orig_argv[-2] + '/victim.py', os.O_RDONLY)\n"
    for change, event in (("os.fchmod(fd, 0o777)", "os.chmod"), ("os.utime(fd, (0, 0))", "os.utime"),
                          ("os.setxattr(fd, 'user.hpt', b'planted')", "os.setxattr")):  # fmt: skip
        result = await box.run(opened + change)
        assert not result.passed and result.reason == f"blocked: {event} on a descriptor", result
    after = victim.stat()
    assert (after.st_mode, after.st_mtime_ns) == (before.st_mode, before.st_mtime_ns)
    assert os.listxattr(victim) == []


async def test_without_bubblewrap_c_code_writes_no_file_beside_the_standard_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # C code reports its open as ("path", "ab", 0): the mode, not the flags, says it writes.
    # ssl's keylog file was such a door into the standard library's folder (second review).
    stdlib = tmp_path / "stdlib"
    stdlib.mkdir()
    dynload = sandbox_bwrap.python_dirs()[1]
    monkeypatch.setattr(sandbox_bwrap, "python_dirs", lambda: (str(stdlib), dynload))
    box = sandbox("fallback")
    keylog = (
        "import ssl, sys\nctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n"
        "ctx.keylog_filename = sys.orig_argv[-2] + '/planted.py'\n"
    )
    result = await box.run(keylog)
    assert not result.passed and result.reason == "blocked: importing ssl", result
    hook = "import sys\nsys.audit('open', sys.orig_argv[-2] + '/planted.py', 'ab', 0)\n"
    result = await box.run(hook)
    assert not result.passed and "writing" in result.reason and "outside" in result.reason
    assert list(stdlib.iterdir()) == []


@pytest.mark.parametrize("mode", MODES)
async def test_signals_do_not_reach_the_parent(mode: str) -> None:
    received: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda number, frame: received.append(number))
    try:
        box = sandbox(mode)
        kill = await box.run("import posix, signal\nposix.kill(posix.getppid(), signal.SIGUSR1)")
        # Signal 0 delivers nothing: it only asks whether the parent's group could be signalled.
        killpg = await box.run("import posix\nposix.killpg(posix.getpgid(posix.getppid()), 0)")
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert received == []
    assert not kill.passed and "blocked: os.kill" in kill.reason, kill
    assert not killpg.passed and "blocked: os.killpg" in killpg.reason, killpg


async def test_under_bubblewrap_the_users_files_do_not_exist() -> None:
    box = sandbox("bubblewrap")
    probe = f"""
        import os, sys
        for path in ({str(REPO)!r}, {sys.prefix!r}, "/proc", "/tmp", "/etc/passwd", "/home"):
            assert not os.path.exists(path), path
        assert os.getcwd() == "/sandbox" and os.listdir(".") == []
        open("scratch.txt", "w").write("its own directory is writable")
        assert os.getppid() == 1  # its own PID namespace, under bwrap's init
    """
    result = await box.run(textwrap.dedent(probe))
    assert result.passed and result.isolation == "bubblewrap", result
    # The directory is a tmpfs of its own size, not the host's disk.
    small = Sandbox(SandboxLimits(disk_mb=1, file_mb=16))
    full = await small.run("open('big', 'wb').write(b'x' * (4 * 1024 * 1024))")
    assert not full.passed and "No space left on device" in full.reason, full


def test_without_bubblewrap_a_warning_once_and_the_isolation_recorded(tmp_path: Path) -> None:
    # A PATH without bwrap, in a process of its own: the probe and the warning are once per
    # process.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("unshare", "true"):  # what the fallback probes with
        if found := subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip():
            (bin_dir / tool).symlink_to(found)
    script = (
        "import asyncio\nfrom hpt.tasks.sandbox import Sandbox\n"
        "async def main():\n    box = Sandbox()\n"
        "    results = [await box.run('pass') for _ in range(3)]\n"
        "    print(sorted({r.isolation for r in results}), all(r.passed for r in results))\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, "PATH": str(bin_dir)},
    )
    assert done.returncode == 0, done.stderr
    fallback = "network namespace" if _unshare_prefix() else "python guard"
    assert done.stdout.strip() == f"['{fallback}'] True"
    warnings = [line for line in done.stderr.splitlines() if line.startswith("hpt: warning:")]
    assert len(warnings) == 1 and "bubblewrap (bwrap) is not installed" in warnings[0]
    assert "apt-get install bubblewrap" in warnings[0]


def test_the_wire_carries_plain_data_only() -> None:
    from hpt.tasks import sandbox_wire as wire

    def through(value: object) -> object:
        return wire.decode(wire.parse(wire.encode(value).rstrip(b"\n")))

    values = [None, True, 0, -(10**40), 1.5, -0.0, float("inf"), 2 - 3j, "é\udc80", b"\x00",
              bytearray(b"x"), range(1, 9, 2), [1, (2, "3")], {1: {2.5}}, frozenset({"a"})]  # fmt: skip
    for value in values:
        back = through(value)
        assert type(back) is type(value) and back == value, value
    assert list(through(iter([1, 2]))) == [1, 2]  # type: ignore[call-overload]
    nan = through(float("nan"))
    assert type(nan) is float and nan != nan

    class Int(int):
        pass

    class Meta(type):
        def __hash__(cls) -> int:
            return hash(int)

        def __eq__(cls, other: object) -> bool:
            return True

    class Claims(metaclass=Meta):
        pass

    for other, name in ((Int(3), "Int"), ([Claims()], "Claims"), ({1: object()}, "object")):
        with pytest.raises(TypeError, match=f"returned a {name} object"):
            through(other)
        with pytest.raises(wire.WireError):
            wire.encode(other, others=False)
    malformed = [b"[", b"{}", b'["int", "1_0"]', b'["int", " 1"]', b'["bool", 1]', b'["x"]',
                 b'["set", [["list", []]]]', b'["dict", [[["list", []], ["none"]]]]',
                 b'["int", "' + b"9" * 5000 + b'"]', b'["float", "nan", 1]', b'["range", "1", "2", "0"]',
                 b'["list", [' * 150 + b'["none"]' + b"]]" * 150]  # fmt: skip
    for line in malformed:
        with pytest.raises(wire.WireError):
            wire.decode(wire.parse(line))


@pytest.mark.parametrize("mode", MODES)
async def test_replies_the_checker_cannot_read_fail(mode: str) -> None:
    # The program writes its own "replies" down the pipe: junk, a line longer than allowed, a
    # value it claims is an int. None passes, whatever the program's exit.
    fd = "import sys, os\nfd = int(sys.orig_argv[-4])\n"
    junk = {
        "junk": fd + "os.write(fd, b'not json\\n')\nos._exit(0)\n",
        "too long": fd + "os.write(fd, b'[' * (33 * 1024 * 1024))\n",
        "a forged int": fd + 'os.write(fd, b\'{"ready":true}\\n{"value":["int","2 "]}\\n\')\nos._exit(0)\n',
    }  # fmt: skip
    for name, code in junk.items():
        result = await attack(mode, code)
        assert not result.passed, (name, result)
        assert "unreadable" in result.reason or "more than" in result.reason, (name, result)
