"""The bubblewrap boundary around generated code: what a program sees of the machine.

``bwrap`` (Debian's ``bubblewrap``, the tool Flatpak runs apps in) starts the harness in new
user, PID, IPC, network, UTS and cgroup namespaces, with a root of its own that holds only:

- read-only: the system's shared libraries (``/usr/lib*`` and the ``/lib*`` links or
  directories), ``/etc/ld.so.cache``, the base interpreter's executable, its ``libpython``
  and its standard library; the interpreter's site-packages are covered by empty directories
  and the extension modules that reach below Python or past the harness's checks (``_ctypes``,
  ``_testcapi``, subinterpreters, ``_tkinter``, ``_sqlite3``, …) by ``/dev/null``;
- read-only: the harness, at ``/hpt/sandbox_child.py``, and its codec, ``/hpt/sandbox_wire.py``;
- writable: ``/sandbox``, a size-limited tmpfs (its working directory, HOME and TMPDIR);
- bubblewrap's minimal ``/dev`` (null, zero, full, random, urandom, tty, an empty shm) and no
  ``/proc`` at all.

Everything else — the user's home, the project, the virtual environment, ``/tmp``, ``/etc``
(but the loader's cache),
other processes, the network — does not exist in there. The environment is cleared, every
capability dropped, no further user namespace may be made, the program gets a session of its
own (no terminal to inject keystrokes into) and dies with its parent.
"""

from __future__ import annotations

import glob
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from functools import cache
from pathlib import Path

from hpt.tasks.sandbox_child import HIDDEN_MODULES

HARNESS = "/hpt/sandbox_child.py"
WIRE = "/hpt/sandbox_wire.py"  # beside the harness, which imports it
HOME = "/sandbox"
PROBE_TIMEOUT_S = 10.0


@cache
def interpreter() -> str:
    """The base interpreter (a venv's ``python`` is a link to it, or a copy beside a
    pyvenv.cfg that points at it), resolved so it can be bound at its own path."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


@cache
def python_dirs() -> tuple[str, str]:
    """The base interpreter's standard library and extension-module directories."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    stdlib = os.path.realpath(sysconfig.get_path("stdlib", vars=base))
    dynload = sysconfig.get_config_var("DESTSHARED") or os.path.join(stdlib, "lib-dynload")
    return stdlib, os.path.realpath(dynload)


def _libpython() -> str | None:
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return None
    libdir, name = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    path = os.path.join(libdir or "", name or "")
    return os.path.realpath(path) if libdir and name and os.path.isfile(path) else None


@cache
def _view() -> tuple[str, ...]:
    """What the sandbox holds of the machine (computed once: it does not change)."""
    return (*_system_libraries(), *_python_view())


def _system_libraries() -> list[str]:
    args: list[str] = []
    for path in ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libx32"):
        if os.path.isdir(path) and not os.path.islink(path):
            args += ["--ro-bind", path, path]
    for path in ("/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(path):  # merged /usr: /lib -> usr/lib
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    if os.path.isfile("/etc/ld.so.cache"):
        args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    return args


def _python_view() -> list[str]:
    stdlib, dynload = python_dirs()
    args: list[str] = []
    for path in (interpreter(), _libpython(), stdlib, dynload):
        if path is not None:
            args += ["--ro-bind", path, path]
    # The packages installed into the interpreter (not the project's: its venv is not bound).
    for packages in site.getsitepackages([sys.base_prefix]):
        real = os.path.realpath(packages)
        if os.path.isdir(real) and any(real.startswith(d + os.sep) for d in (stdlib, "/usr/lib")):
            args += ["--tmpfs", real, "--remount-ro", real]
    for name in sorted(HIDDEN_MODULES):
        for path in sorted(glob.glob(os.path.join(glob.escape(dynload), name + ".*so"))):
            args += ["--ro-bind", "/dev/null", path]
    return args


def bwrap_argv(bwrap: str, harness: Path, home_bytes: int) -> list[str]:
    """``bwrap`` and its options, up to (not including) the interpreter's command line."""
    return [
        bwrap,
        "--unshare-all",
        "--unshare-user",  # also when run by root, so that capabilities mean nothing outside
        "--disable-userns",
        "--cap-drop", "ALL",
        "--die-with-parent",
        "--new-session",
        "--hostname", "sandbox",
        "--clearenv",
        "--setenv", "HOME", HOME,
        "--setenv", "TMPDIR", HOME,
        "--setenv", "LANG", "C.UTF-8",
        *_view(),
        "--ro-bind", str(harness), HARNESS,
        "--ro-bind", str(harness.with_name("sandbox_wire.py")), WIRE,
        "--dev", "/dev",
        "--size", str(home_bytes), "--tmpfs", HOME,
        "--chdir", HOME,
        "--remount-ro", "/",
    ]  # fmt: skip


@cache
def probe(harness: Path) -> tuple[str | None, str]:
    """``(path of bwrap, "")`` when bubblewrap runs the interpreter here, else
    ``(None, why not)``. A sandbox's start (some tens of ms): once per process."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, "bubblewrap (bwrap) is not installed"
    argv = bwrap_argv(bwrap, harness, 1 << 20)
    try:
        done = subprocess.run(
            [*argv, interpreter(), "-I", "-S", "-c", "pass"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            env={},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bwrap could not start ({exc})"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, f"bwrap failed here ({said[-1] if said else f'exit status {done.returncode}'})"
    return bwrap, ""
