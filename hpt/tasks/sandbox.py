"""Running generated code: a separate, confined process per program, with limits, no network,
a private working directory, nothing of the caller's environment, and none of the user's files.

Every outcome is a ``SandboxResult`` with a reason a person can read and the isolation it ran
under; a program that loops, forks, allocates without end, touches files elsewhere or opens
sockets fails with its cause.

Threat model, from the outside in:

1. The boundary is bubblewrap (``sandbox_bwrap.py``): new user, PID, IPC, network, UTS and
   cgroup namespaces, a root holding only the interpreter and the system's libraries
   (read-only), a size-limited private tmpfs as the working directory, no ``/proc``, no
   capabilities, a cleared environment, its own session, death with its parent. The user's
   files, the project, the virtual environment, other processes and the network are not there
   to be read, changed or signalled. Where bubblewrap cannot run, that is said once, loudly
   (stderr), and programs run with today's fallback — ``unshare -rn`` (a network namespace) or
   nothing — plus the harness's Python-level checks; every result records which
   (``isolation``: "bubblewrap", "network namespace" or "python guard").
2. Limits: CPU time, address space, file size and no core files (rlimits), a wall-clock
   timeout, the process group killed whole (with bubblewrap, the PID namespace with it), at
   most ``OUTPUT_CAP`` bytes of each output stream kept.
3. The verdict comes from a process that never runs generated code. The program (for
   HumanEval: the prompt and the completion, without the test) runs in the sandbox under the
   harness (``sandbox_child.py``), which then only answers calls of its entry point. The
   checker (``sandbox_checker.py``: plain ``python -I -S``, outside the sandbox, under the same
   rlimits, running only the dataset's text) builds the prompt's namespace and the test in a
   process of its own, with the entry point a proxy that sends each call's arguments to the
   program over a pipe and decodes the reply as plain data (``sandbox_wire.py``: tagged JSON,
   types by identity; anything else raises), and writes a fresh per-run token to its own pipe
   only when ``check(proxy)`` returned. A sample passes only on that exact token and the
   checker's exit status 0; the program's status does not count, and both are killed at the
   end. Shadowed builtins, a redefined ``check``, objects that equal anything, frames, the heap
   and rewritten types stay in the program's interpreter; what crosses is bytes.

What remains: the program sees the arguments the test passes (so one that knows a dataset's
tests by heart can answer them from a table), and its answers are what it chose to return;
a test that relies on the candidate changing its arguments in place sees copies. A whole
program (no entry point) passes on its own word that it ran to its end: nothing of a dataset's
is run then. Without
bubblewrap, the harness's Python-level checks are all that keeps the program from the user's
files: best effort.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from functools import cache
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from hpt.tasks import sandbox_bwrap
from hpt.tasks.sandbox_checker import NO_WORD

CHILD = Path(__file__).with_name("sandbox_child.py")
CHECKER = Path(__file__).with_name("sandbox_checker.py")
OUTPUT_CAP = 16_384  # bytes of each stream kept for the reason; the rest is read and dropped
PROOF_CAP = 4_096  # bytes kept of the proof pipe: the token, or the checker's reason
MB = 1024 * 1024
GRACE_S = 1.0  # how long a failed check waits for the program to end by itself (its reason)


class SandboxLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(10.0, gt=0)  # wall clock
    cpu_s: int = Field(10, ge=1)
    memory_mb: int = Field(1024, ge=64)  # address space
    file_mb: int = Field(16, ge=1)  # largest file it may write (in its own directory)
    disk_mb: int = Field(64, ge=1)  # all it may write, together (the size of its tmpfs)


class SandboxResult(BaseModel):
    passed: bool
    reason: str  # "passed", or why not: "timed out after 10 s", "AssertionError", ...
    duration_s: float
    isolation: str  # what contained it: "bubblewrap", "network namespace" or "python guard"


@cache
def _unshare_prefix() -> tuple[str, ...]:
    """``unshare -rn`` (a user + network namespace) where the kernel allows it."""
    tool = shutil.which("unshare")
    if tool is None:
        return ()
    import subprocess  # once, at first use, before any sandbox runs

    try:
        ok = subprocess.run([tool, "-rn", "true"], capture_output=True, timeout=10).returncode
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return (tool, "-rn") if ok == 0 else ()


@cache
def _warn_without_bubblewrap(why: str, fallback: str) -> None:
    """Once per process: generated code is about to run without the OS sandbox."""
    print(
        f"hpt: warning: {why}, so generated code (HumanEval) runs with weaker isolation "
        f"({fallback} and Python-level checks): it could read or change your files; "
        "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) to contain it",
        file=sys.stderr,
        flush=True,
    )


_choosing = threading.Lock()  # one probe, one warning, however many runs start at once


def isolation(bubblewrap: bool = True) -> tuple[str, str | None, tuple[str, ...]]:
    """``(name, bwrap or None, unshare prefix)``: the strongest isolation that works here
    (bubblewrap unless told not to). Blocking: the first call probes (tens of ms)."""
    with _choosing:
        if bubblewrap:
            bwrap, why = sandbox_bwrap.probe(CHILD)
            if bwrap is not None:
                return "bubblewrap", bwrap, ()
        prefix = _unshare_prefix()
        name = "network namespace" if prefix else "python guard"
        if bubblewrap:
            _warn_without_bubblewrap(why, name)
        return name, None, prefix


async def _feed(stream: asyncio.StreamWriter | None, data: bytes) -> None:
    """The program, or the checker's token and job, on a child's stdin (more than a pipe
    holds: written as it reads); a child that died early just leaves the rest unread."""
    if stream is None:
        return
    with contextlib.suppress(ConnectionError):
        stream.write(data)
        await stream.drain()
    stream.close()
    with contextlib.suppress(ConnectionError):
        await stream.wait_closed()


async def _drain(stream: asyncio.StreamReader | None, cap: int = OUTPUT_CAP) -> bytes:
    if stream is None:
        return b""
    kept = bytearray()
    while chunk := await stream.read(65536):
        if len(kept) < cap:
            kept += chunk[: cap - len(kept)]
    return bytes(kept)


def _classify(line: str, limits: SandboxLimits) -> str | None:
    """A limit or guard named by an exception line, else None."""
    if "MemoryError" in line:
        return f"memory limit ({limits.memory_mb} MB) exceeded: MemoryError"
    if "File too large" in line:
        return f"file size limit ({limits.file_mb} MB) exceeded"
    if "hpt sandbox:" in line:
        return "blocked: " + line.split("hpt sandbox:", 1)[1].strip().removesuffix(" is blocked")
    return None


def _verdict(
    returncode: int, proof: bytes, token: bytes, stderr: str, limits: SandboxLimits, goal: str
) -> tuple[bool, str]:
    """Passed only on the checker's exact token and exit status 0; else why not.

    ``proof`` is what came down the proof pipe: the token, or the checker's reason.
    """
    if returncode == 0 and proof == token:
        return True, "passed"
    if returncode == -signal.SIGXCPU:
        return False, f"CPU time limit ({limits.cpu_s} s) exceeded"
    if returncode == -signal.SIGXFSZ:
        return False, f"file size limit ({limits.file_mb} MB) exceeded"
    said = "" if proof == token else proof.decode("utf-8", "replace").strip()
    if said:  # the checker's reason
        return False, _classify(said, limits) or said[:300]
    if returncode < 0:
        return False, f"killed by signal {signal.Signals(-returncode).name}"
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    if known := _classify(last, limits):
        return False, known
    if last:
        return False, last[:300]
    if returncode == 0:  # no word from the checker (it cannot happen: belt and braces)
        return False, f"exit status 0 without the checker's proof that {goal} completed"
    return False, f"exit status {returncode}"


def _ended(status: int, stderr: str, limits: SandboxLimits) -> str:
    """Why the program stopped answering the checker: a limit, a signal, or its last word."""
    if status == -signal.SIGXCPU:
        return f"CPU time limit ({limits.cpu_s} s) exceeded"
    if status == -signal.SIGXFSZ:
        return f"file size limit ({limits.file_mb} MB) exceeded"
    if status < 0:
        return f"killed by signal {signal.Signals(-status).name}"
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    if last.startswith('{"ended":'):  # what the harness could not send the checker
        with contextlib.suppress(ValueError, AttributeError):
            last = str(json.loads(last).get("ended"))
    if last:
        return _classify(last, limits) or last[:300]
    return f"{NO_WORD} (exit status {status})"


class Sandbox:
    """Runs programs, at most ``parallel`` at once (default: one per core), under bubblewrap
    where it works (``bubblewrap=False``: the fallback, as without it)."""

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        parallel: int | None = None,
        bubblewrap: bool = True,
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.bubblewrap = bubblewrap
        self._slots = asyncio.Semaphore(parallel or os.cpu_count() or 1)

    async def run(
        self, code: str, entry_point: str | None = None, tests: str = "", context: str = ""
    ) -> SandboxResult:
        """Runs ``code`` (the generated program: for HumanEval the prompt and the completion,
        no test) as a module (not ``__main__``, stdin at end of file). Without an entry point
        it passes when the code runs to its end. With one, the checker runs ``context`` (the
        dataset's prompt: imports, helpers) and ``tests`` (the dataset's test code, which
        defines ``check``) in a process of its own and passes only when its
        ``check(entry_point)`` returned, each call of the candidate answered by the program."""
        if entry_point is not None and not entry_point.isidentifier():
            raise ValueError(f"entry point {entry_point!r} is not a Python name")
        name, bwrap, prefix = await asyncio.to_thread(isolation, self.bubblewrap)
        job = _Job(code, entry_point, tests, context)
        async with self._slots:
            if bwrap is not None:
                argv = sandbox_bwrap.bwrap_argv(bwrap, CHILD, self.limits.disk_mb * MB)
                return await self._run_in(None, argv, sandbox_bwrap.HARNESS, name, job)
            workdir = await asyncio.to_thread(tempfile.mkdtemp, prefix="hpt-sandbox-")
            try:
                return await self._run_in(Path(workdir), [*prefix], str(CHILD), name, job)
            finally:
                await asyncio.to_thread(shutil.rmtree, workdir, True)

    async def _run_in(
        self, workdir: Path | None, prefix: list[str], harness: str, isolation: str, job: _Job
    ) -> SandboxResult:
        limits = self.limits
        env = {  # nothing of the caller's: no keys, no PYTHON* settings (bwrap clears even these)
            "PATH": "/usr/bin:/bin",
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "LANG": "C.UTF-8",
        }
        # The checker's calls go down one pipe to the program and its answers come up another;
        # the verdict, a fresh token the checker writes only when check() returned, comes up a
        # third that only the checker holds.
        token = secrets.token_hex(16).encode()
        proof_r, proof_w = os.pipe()
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        stdlib, dynload = sandbox_bwrap.python_dirs()
        program_argv = [
            *prefix,
            sandbox_bwrap.interpreter(),
            "-I",  # isolated: no user site, no PYTHON* variables, no script dir on sys.path
            "-S",  # no site-packages: the standard library only
            "-B",
            harness,
            str(limits.cpu_s),
            str(limits.memory_mb * MB),
            str(limits.file_mb * MB),
            str(request_r),
            str(reply_w),
            job.entry_point or "",
            stdlib,
            dynload,
        ]
        checker_argv = [
            sandbox_bwrap.interpreter(), "-I", "-S", "-B", str(CHECKER),
            str(limits.cpu_s), str(limits.memory_mb * MB),
            str(proof_w), str(request_w), str(reply_r),
        ]  # fmt: skip
        config = {"entry_point": job.entry_point, "context": job.context, "tests": job.tests}
        checker_input = token + b"\n" + json.dumps(config).encode()
        proof_reader = asyncio.StreamReader()
        proof_file = os.fdopen(proof_r, "rb", 0)
        procs: list[asyncio.subprocess.Process] = []
        try:
            proof_transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(proof_reader), proof_file
            )
        except BaseException:
            proof_file.close()
            for fd in (proof_w, request_r, request_w, reply_r, reply_w):
                os.close(fd)
            raise
        try:
            started = time.perf_counter()
            try:
                for argv, fds, cwd, environment in (
                    (program_argv, (request_r, reply_w), workdir,
                     env if workdir is not None else {}),
                    (checker_argv, (proof_w, request_w, reply_r), "/", {"LANG": "C.UTF-8"}),
                ):  # fmt: skip
                    procs.append(
                        await asyncio.create_subprocess_exec(
                            *argv,
                            cwd=cwd,
                            env=environment,
                            stdin=asyncio.subprocess.PIPE,
                            stdout=asyncio.subprocess.PIPE,
                            stderr=asyncio.subprocess.PIPE,
                            pass_fds=fds,
                            start_new_session=True,  # its own process group, killed whole
                        )
                    )
            finally:
                for fd in (proof_w, request_r, request_w, reply_r, reply_w):
                    os.close(fd)  # the children's copies are the only ones left
            program, checker = procs
            feeds = asyncio.gather(
                _feed(program.stdin, job.code.encode("utf-8", "surrogatepass")),
                _feed(checker.stdin, checker_input),
            )
            drains = asyncio.gather(
                _drain(program.stdout),
                _drain(program.stderr),
                _drain(checker.stdout),
                _drain(checker.stderr),
                _drain(proof_reader, PROOF_CAP),
            )
            timed_out = False
            try:
                await asyncio.wait_for(checker.wait(), limits.timeout_s)
                if checker.returncode:  # a moment for the program to end by itself, if it is
                    left = limits.timeout_s - (time.perf_counter() - started)  # why it failed
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(program.wait(), min(GRACE_S, max(left, 0)))
            except TimeoutError:
                timed_out = True
            finally:
                await _kill(procs)
            await feeds
            _, err, _, checker_err, proof = await drains
        finally:
            await _kill(procs)  # (when a start failed: the one that did start)
            proof_transport.close()
        duration = time.perf_counter() - started
        status = program.returncode or 0
        if workdir is None and status > 128:  # bwrap reports a child killed by signal N as 128+N
            status = 128 - status
        if timed_out:
            passed, reason = False, f"timed out after {limits.timeout_s:g} s"
        else:
            goal = "check()" if job.entry_point else "the program"
            passed, reason = _verdict(
                checker.returncode or 0, proof, token, checker_err.decode("utf-8", "replace"),
                limits, goal)  # fmt: skip
            if not passed and reason == NO_WORD:  # the program's own exit says why
                reason = _ended(status, err.decode("utf-8", "replace"), limits)
        return SandboxResult(passed=passed, reason=reason, duration_s=duration, isolation=isolation)


async def _kill(procs: list[asyncio.subprocess.Process]) -> None:
    """Each process group, whole: the program is done once the checker is."""
    for proc in procs:  # stragglers too (pidfd-less: a reaped leader's group may be gone)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    for proc in procs:
        await proc.wait()


class _Job(NamedTuple):
    code: str
    entry_point: str | None
    tests: str
    context: str
