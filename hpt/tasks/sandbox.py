"""Running generated code: a separate process per program, with limits, no network, a fresh
temporary working directory, no secrets in its environment, and no way out of its files.

Every outcome is a ``SandboxResult`` with a reason a person can read; a program that loops,
forks, allocates without end, touches files elsewhere or opens sockets fails with its cause.

The exit status alone never passes a program. The harness (``sandbox_child.py``) proves that
the program ran to its end and ``check(entry_point)`` returned by writing back a per-run
random token, which it took from stdin before the program started, down a pipe of its own;
a program that exits early (``sys.exit(0)``, ``os._exit(0)``, ``unittest.main()``, an
``atexit`` hook) or prints a success marker has no token to show and fails with the reason.
See the child's docstring for the threat model.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

PROGRAM = "program.py"
CHILD = Path(__file__).with_name("sandbox_child.py")
OUTPUT_CAP = 16_384  # bytes of each stream kept for the reason; the rest is read and dropped
PROOF_CAP = 4_096  # bytes kept of the proof pipe: the token, or the harness's reason


class SandboxLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(10.0, gt=0)  # wall clock
    cpu_s: int = Field(10, ge=1)
    memory_mb: int = Field(1024, ge=64)  # address space
    file_mb: int = Field(16, ge=1)  # largest file it may write (in its own directory)


class SandboxResult(BaseModel):
    passed: bool
    reason: str  # "passed", or why not: "timed out after 10 s", "AssertionError", ...
    duration_s: float
    isolation: str  # what kept the network out: "network namespace" or "python guard"


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
        return "blocked: " + line.split("hpt sandbox:", 1)[1].strip()
    return None


def _verdict(
    returncode: int, proof: bytes, token: bytes, stderr: str, limits: SandboxLimits, goal: str
) -> tuple[bool, str]:
    """Passed only on the harness's exact token and exit status 0; else why not.

    ``proof`` is what came down the proof pipe: the token, or the harness's reason.
    """
    if returncode == 0 and proof == token:
        return True, "passed"
    if returncode == -signal.SIGXCPU:
        return False, f"CPU time limit ({limits.cpu_s} s) exceeded"
    if returncode == -signal.SIGXFSZ:
        return False, f"file size limit ({limits.file_mb} MB) exceeded"
    if token in proof and proof != token:
        return False, "the program wrote into the harness's proof pipe"
    said = "" if proof == token else proof.decode("utf-8", "replace").strip()
    if said:  # the harness's reason (or whatever the program wrote down the pipe)
        return False, _classify(said, limits) or said[:300]
    if returncode < 0:
        return False, f"killed by signal {signal.Signals(-returncode).name}"
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    if known := _classify(last, limits):
        return False, known
    if last:
        return False, last[:300]
    if returncode == 0:  # no word from the harness: the program closed the proof pipe
        return False, f"exit status 0 without the harness's proof that {goal} completed"
    return False, f"exit status {returncode}"


class Sandbox:
    """Runs programs, at most ``parallel`` at once (default: one per core)."""

    def __init__(self, limits: SandboxLimits | None = None, parallel: int | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self._slots = asyncio.Semaphore(parallel or os.cpu_count() or 1)

    async def run(self, code: str, entry_point: str | None = None) -> SandboxResult:
        """Runs ``code`` as a module (not ``__main__``, stdin at end of file). Without an
        entry point it passes when the code runs to its end; with one, only when the
        harness's own ``check(entry_point)`` call then returns."""
        if entry_point is not None and not entry_point.isidentifier():
            raise ValueError(f"entry point {entry_point!r} is not a Python name")
        async with self._slots:
            workdir = await asyncio.to_thread(tempfile.mkdtemp, prefix="hpt-sandbox-")
            try:
                return await self._run_in(Path(workdir), code, entry_point)
            finally:
                await asyncio.to_thread(shutil.rmtree, workdir, True)

    async def _run_in(self, workdir: Path, code: str, entry_point: str | None) -> SandboxResult:
        limits = self.limits
        await asyncio.to_thread((workdir / PROGRAM).write_text, code, "utf-8")
        prefix = _unshare_prefix()
        env = {  # nothing of the caller's: no keys, no PYTHON* settings
            "PATH": "/usr/bin:/bin",
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",
        }
        # The proof that check() returned: a fresh token the harness reads from stdin before
        # the program exists, and writes back down its own pipe only once check() returned.
        token = secrets.token_hex(16).encode()
        token_r, token_w = os.pipe()
        proof_r, proof_w = os.pipe()
        try:
            os.write(token_w, token + b"\n")  # far below a pipe's buffer: never blocks
        finally:
            os.close(token_w)
        argv = [
            *prefix,
            sys.executable,
            "-I",  # isolated: no user site, no PYTHON* variables, no script dir on sys.path
            "-B",
            str(CHILD),
            str(limits.cpu_s),
            str(limits.memory_mb * 1024 * 1024),
            str(limits.file_mb * 1024 * 1024),
            PROGRAM,
            str(proof_w),
            entry_point or "",
        ]
        proof_reader = asyncio.StreamReader()
        proof_file = os.fdopen(proof_r, "rb", 0)
        try:
            proof_transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(proof_reader), proof_file
            )
        except BaseException:
            proof_file.close()
            os.close(token_r)
            os.close(proof_w)
            raise
        try:
            started = time.perf_counter()
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    cwd=workdir,
                    env=env,
                    stdin=token_r,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    pass_fds=(proof_w,),
                    start_new_session=True,  # its own process group, killed whole
                )
            finally:
                os.close(token_r)
                os.close(proof_w)  # the child's copy is the only writer left
            drains = asyncio.gather(
                _drain(proc.stdout), _drain(proc.stderr), _drain(proof_reader, PROOF_CAP)
            )
            timed_out = False
            try:
                await asyncio.wait_for(proc.wait(), limits.timeout_s)
            except TimeoutError:
                timed_out = True
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # stragglers too
                await proc.wait()
            _, err, proof = await drains
        finally:
            proof_transport.close()
        duration = time.perf_counter() - started
        isolation = "network namespace" if prefix else "python guard"
        if timed_out:
            passed, reason = False, f"timed out after {limits.timeout_s:g} s"
        else:
            goal = "check()" if entry_point else "the program"
            err_text = err.decode("utf-8", "replace")
            passed, reason = _verdict(proc.returncode or 0, proof, token, err_text, limits, goal)
        return SandboxResult(passed=passed, reason=reason, duration_s=duration, isolation=isolation)
