"""The sandbox's threat model, attack by attack (hpt/tasks/sandbox.py, sandbox_child.py).

Each attack runs under bubblewrap and under the fallback (no bubblewrap): the harness's
guarantees hold in both, and what only the OS boundary gives is asserted only under it. Every
forgery below resolved a wrong body before the sandbox was rebuilt, and every escape reached
the user's files or processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpt.tasks.sandbox import Sandbox, SandboxLimits, SandboxResult, _unshare_prefix, isolation

REPO = Path(__file__).resolve().parents[1]
MODES = ["bubblewrap", "fallback"]


def sandbox(mode: str) -> Sandbox:
    if mode == "bubblewrap" and isolation()[0] != "bubblewrap":
        pytest.skip(
            "bubblewrap cannot run here (make test installs it: apt-get install bubblewrap)"
        )
    return Sandbox(SandboxLimits(timeout_s=10), bubblewrap=mode == "bubblewrap")


# A wrong body and its test, as HumanEval builds a program: prompt + completion + test. The
# attack sits in the completion, where a model's text goes.
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


async def attack(mode: str, completion: str) -> SandboxResult:
    program = WRONG + FORGE + textwrap.dedent(completion) + TEST
    return await sandbox(mode).run(program, entry_point="f")


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
        for name in ("_describe", "_exit_status", "_test_check", "_plain_data"):
            setattr(harness, name, lambda *args, **kwargs: None)
    """,
    "an always-equal return value": """
        class Yes:
            def __eq__(self, other):
                return True
        def f(x):
            return Yes()
    """,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(FORGERIES))
async def test_a_wrong_body_cannot_forge_the_proof(mode: str, name: str) -> None:
    result = await attack(mode, FORGERIES[name])
    assert not result.passed, result
    assert "0" * 8 not in result.reason  # no token-like text came back either


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
    "taking the proof channel": (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=int(sys.orig_argv[-4]))\n",
        "blocked: network access"),
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
    result = await sandbox(mode).run(right + code + TEST, entry_point="f")
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
    }  # fmt: skip
    box = sandbox(mode)
    for name, code in attempts.items():
        result = await box.run(code)
        assert not result.passed, (name, result)
        assert "sk-beside" not in result.reason, (name, result)
    assert not touched.exists() and not written.exists()


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
