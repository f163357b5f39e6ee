"""Running generated code: a separate process per program, with limits, no network, a fresh
temporary working directory, no secrets in its environment, and no way out of its files.

Every outcome is a ``SandboxResult`` with a reason a person can read; a program that loops,
forks, allocates without end, touches files elsewhere or opens sockets fails with its cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
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


async def _drain(stream: asyncio.StreamReader | None) -> bytes:
    if stream is None:
        return b""
    kept = bytearray()
    while chunk := await stream.read(65536):
        if len(kept) < OUTPUT_CAP:
            kept += chunk[: OUTPUT_CAP - len(kept)]
    return bytes(kept)


def _reason(returncode: int, stderr: str, limits: SandboxLimits) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    if "MemoryError" in last:
        return f"memory limit ({limits.memory_mb} MB) exceeded: MemoryError"
    if returncode == -signal.SIGXCPU:
        return f"CPU time limit ({limits.cpu_s} s) exceeded"
    if returncode == -signal.SIGXFSZ or "File too large" in last:
        return f"file size limit ({limits.file_mb} MB) exceeded"
    if "hpt sandbox:" in last:
        return "blocked: " + last.split("hpt sandbox:", 1)[1].strip()
    if returncode < 0:
        return f"killed by signal {signal.Signals(-returncode).name}"
    return last[:300] or f"exit status {returncode}"


class Sandbox:
    """Runs programs, at most ``parallel`` at once (default: one per core)."""

    def __init__(self, limits: SandboxLimits | None = None, parallel: int | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self._slots = asyncio.Semaphore(parallel or os.cpu_count() or 1)

    async def run(self, code: str) -> SandboxResult:
        async with self._slots:
            workdir = await asyncio.to_thread(tempfile.mkdtemp, prefix="hpt-sandbox-")
            try:
                return await self._run_in(Path(workdir), code)
            finally:
                await asyncio.to_thread(shutil.rmtree, workdir, True)

    async def _run_in(self, workdir: Path, code: str) -> SandboxResult:
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
        ]
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=workdir,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, killed whole
        )
        drains = asyncio.gather(_drain(proc.stdout), _drain(proc.stderr))
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), limits.timeout_s)
        except TimeoutError:
            timed_out = True
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers too
            await proc.wait()
        _, err = await drains
        duration = time.perf_counter() - started
        isolation = "network namespace" if prefix else "python guard"
        if timed_out:
            reason, passed = f"timed out after {limits.timeout_s:g} s", False
        elif proc.returncode == 0:
            reason, passed = "passed", True
        else:
            reason = _reason(proc.returncode or 0, err.decode("utf-8", "replace"), limits)
            passed = False
        return SandboxResult(passed=passed, reason=reason, duration_s=duration, isolation=isolation)
