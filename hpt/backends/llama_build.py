"""llama.cpp's ``llama-server``, which serves the embedded model: where hpt finds it, and how
it is built.

hpt builds it from the llama.cpp sources vendored in the llama-cpp-python sdist of version
``LLAMA_CPP_PYTHON`` (one reviewed llama.cpp commit per release; pip fetches the sdist
through its cache), with cmake, only the ``llama-server`` target: about 7 minutes on 2 cores.
The build needs no network beyond that download (no web UI assets, no curl, no OpenSSL) and
links llama.cpp statically. It is compiled for this machine's CPU (llama.cpp's default,
``-march=native``) and kept once per version under ``~/.cache/hpt/llama-server/VERSION/``
(``$XDG_CACHE_HOME`` if set), so a second virtualenv reuses it; the running virtualenv also
gets a copy in its ``bin/``.

    python -m hpt.backends.llama_build [--jobs N] [--force] [--sdist FILE]

``make install``/``make run``/``make test`` run it. hpt looks for the binary, in order: the
file ``$HPT_LLAMA_SERVER`` names, the virtualenv's ``bin/``, ``PATH``, the cache.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from hpt.backends.errors import FatalBackendError

# The llama-cpp-python release whose vendored llama.cpp is built (tests/test_llama_build.py
# checks that the `bench` extra, which installs that release's library, pins the same).
LLAMA_CPP_PYTHON = "0.3.36"
BINARY = "llama-server"
BINARY_ENV = "HPT_LLAMA_SERVER"
BUILD_COMMAND = "python -m hpt.backends.llama_build"
# Only the server, statically linked, without anything fetched at build time: the web UI
# (downloaded from Hugging Face by default) and HTTPS support are not needed on loopback.
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",  # the server is one of the tools: their directory must be read
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DGGML_CCACHE=OFF",
)
_STEP = re.compile(rb"^\[(\d+)/(\d+)\]")  # ninja's progress prefix


class LlamaServerMissing(FatalBackendError):
    """No llama-server binary where hpt looks; the message says how to build one."""


class LlamaBuildError(FatalBackendError):
    """The build failed; the message names its log."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "hpt" / BINARY


def cached_binary(version: str = LLAMA_CPP_PYTHON) -> Path:
    return cache_root() / version / BINARY


def scripts_dir() -> Path:
    """The running interpreter's ``bin/`` (a virtualenv's, where hpt's own script is)."""
    return Path(sysconfig.get_path("scripts"))


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_llama_server() -> Path:
    """The llama-server binary: ``$HPT_LLAMA_SERVER``, the virtualenv's ``bin/``, ``PATH``,
    then the cache of the pinned version."""
    named = os.environ.get(BINARY_ENV, "").strip()
    if named:
        path = Path(named).expanduser()
        if not _runnable(path):
            raise LlamaServerMissing(f"{BINARY_ENV}={named}: not an executable file")
        return path
    on_path = shutil.which(BINARY)
    for found in (scripts_dir() / BINARY, Path(on_path) if on_path else None, cached_binary()):
        if found is not None and _runnable(found):
            return found
    raise LlamaServerMissing(
        f"the embedded model's server (llama.cpp's {BINARY}) is not built; build it (about 7 "
        f"minutes on 2 cores, once per machine) with: {sys.executable} -m "
        f"hpt.backends.llama_build, or set {BINARY_ENV} to a {BINARY} binary"
    )


def _tool(name: str) -> str | None:
    """A build tool: the virtualenv's (the `local` extra installs cmake and ninja), else
    ``PATH``'s."""
    own = scripts_dir() / name
    return str(own) if _runnable(own) else shutil.which(name)


def _download_sdist(version: str, into: Path) -> Path:
    """The llama-cpp-python sdist, through pip (and so its cache)."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--no-binary", ":all:", f"llama_cpp_python=={version}", "-d", str(into)],
        check=True,
    )  # fmt: skip
    found = sorted(into.glob("llama_cpp_python-*.tar.gz"))
    if not found:
        raise LlamaBuildError(f"pip downloaded no llama_cpp_python-{version} sdist")
    return found[0]


def _extract_llama_cpp(sdist: Path, into: Path) -> Path:
    """Only ``vendor/llama.cpp`` of the sdist; returns that directory."""
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/", 1)[0]
        prefix = f"{top}/vendor/llama.cpp/"
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        if not members:
            raise LlamaBuildError(f"{sdist.name} holds no vendor/llama.cpp")
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuse links out of ``into``
            tar.extractall(into, members=members, filter="data")
        else:
            tar.extractall(into, members=members)
    return into / top / "vendor" / "llama.cpp"


def _run_logged(cmd: Sequence[str], log: Path, on_step: Callable[[int, int], None]) -> None:
    """Run ``cmd`` with its output appended to ``log``, reporting ninja's ``[k/n]`` steps."""
    with log.open("ab") as out:
        out.write(b"$ " + " ".join(cmd).encode() + b"\n")
        out.flush()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            step = _STEP.match(line)
            if step:
                on_step(int(step[1]), int(step[2]))
        if proc.wait() != 0:
            out.flush()
            tail = log.read_bytes().decode(errors="replace").strip().splitlines()[-25:]
            raise LlamaBuildError(
                f"building {BINARY} failed ({Path(cmd[0]).name} exited {proc.returncode}); "
                f"its log: {log}\n" + "\n".join(tail)
            )


def _compile(src: Path, build: Path, jobs: int, log: Path, say: Callable[[str], None]) -> Path:
    cmake = _tool("cmake")
    if cmake is None:
        raise LlamaBuildError(f"building {BINARY} needs cmake: pip install cmake")
    ninja = _tool("ninja")
    generator = ("-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}") if ninja else ()
    shown = [0]

    def progress(k: int, n: int) -> None:
        tenth = 10 * k // n
        if tenth > shown[0]:
            shown[0] = tenth
            say(f"  {10 * tenth}% ({k}/{n} steps)")

    _run_logged([cmake, "-S", str(src), "-B", str(build), *generator, *CMAKE_FLAGS], log,
                progress)  # fmt: skip
    _run_logged([cmake, "--build", str(build), "--target", BINARY, "-j", str(jobs)], log, progress)
    return build / "bin" / BINARY


def _place(binary: Path, target: Path) -> None:
    """Copy ``binary`` to ``target`` atomically (a run may be starting the old one)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    shutil.copy2(binary, partial)
    os.replace(partial, target)


def build(
    version: str = LLAMA_CPP_PYTHON,
    *,
    jobs: int | None = None,
    force: bool = False,
    sdist: Path | None = None,
    say: Callable[[str], None] = print,
) -> Path:
    """The cached binary of ``version``, built first unless it is there (or ``force``)."""
    target = cached_binary(version)
    if _runnable(target) and not force:
        return target
    jobs = jobs or int(os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or os.cpu_count() or 1)
    target.parent.mkdir(parents=True, exist_ok=True)
    log = target.parent / "build.log"
    log.write_bytes(b"")
    started = time.monotonic()
    say(f"building {BINARY} from llama-cpp-python {version}'s llama.cpp ({jobs} jobs; "
        f"about 7 minutes on 2 cores); log: {log}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="hpt-llama-build-") as tmp:
        work = Path(tmp)
        try:
            archive = sdist or _download_sdist(version, work)
        except subprocess.CalledProcessError as exc:
            raise LlamaBuildError(
                f"pip could not download llama_cpp_python=={version}'s sdist (exit "
                f"{exc.returncode}); see pip's message above"
            ) from None
        src = _extract_llama_cpp(archive, work / "src")
        binary = _compile(src, work / "build", jobs, log, say)
        check = subprocess.run([str(binary), "--version"], capture_output=True, text=True)
        if check.returncode != 0:
            raise LlamaBuildError(f"the built {BINARY} does not run: {check.stderr.strip()}")
        _place(binary, target)
    say(f"built {target} in {time.monotonic() - started:.0f} s")
    return target


def in_virtualenv() -> bool:
    return sys.prefix != sys.base_prefix


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=BUILD_COMMAND, description=__doc__.splitlines()[0])
    ap.add_argument("--llama-cpp-python", default=LLAMA_CPP_PYTHON, metavar="VERSION",
                    help=f"the sdist whose llama.cpp is built ({LLAMA_CPP_PYTHON})")  # fmt: skip
    ap.add_argument("--jobs", type=int,
                    help="compile jobs ($CMAKE_BUILD_PARALLEL_LEVEL, else every core)")  # fmt: skip
    ap.add_argument("--force", action="store_true", help="build even if the cache holds it")
    ap.add_argument("--sdist", type=Path, help="a llama_cpp_python-VERSION.tar.gz to build from "
                    "instead of pip's download (offline)")  # fmt: skip
    args = ap.parse_args(argv)
    try:
        binary = build(args.llama_cpp_python, jobs=args.jobs, force=args.force, sdist=args.sdist)
    except FatalBackendError as exc:
        print(f"hpt: error: {exc}", file=sys.stderr)
        return 1
    if in_virtualenv():
        own = scripts_dir() / BINARY
        if not (own.is_file() and own.read_bytes() == binary.read_bytes()):
            _place(binary, own)
        binary = own
    print(f"{BINARY}: {binary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
