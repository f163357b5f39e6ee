"""Declared-minimums job: does hpt still work with the lowest versions pyproject.toml allows?

Pins every direct dependency of the core (``[project].dependencies``; not the ``local``
extra: llama-cpp-python only builds from source, ~10 minutes) to its declared lower bound,
installs hpt (the wheel, not editable) with those pins into a throwaway venv, plus the test
tools of the ``dev`` extra at their locked versions, and then

1. checks that pip installed exactly the lower bounds and that ``pip check`` is clean;
2. imports every module of ``hpt`` and loads a dataset split through ``datasets`` (offline,
   from a local file) the way ``hpt.tasks.sources.load_hub`` does;
3. runs the tests that need no embedded model and together import every backend and run the
   real CLI against the local fake servers (TESTS below).

Dependencies of the pinned packages are left to the resolver (newest compatible), as
``uv --resolution lowest-direct`` would. Standard library only, so any Python >= 3.11 runs it:

    python3 packaging/min_versions.py             # the whole job (``make test-min``)
    python3 packaging/min_versions.py --resolve   # only resolve the pins (under a minute)
    python3 packaging/min_versions.py --keep      # keep the venv (path printed)
    python3 packaging/min_versions.py -x -k cli   # other arguments go to pytest

Exit status: 0 when everything passed. Wall time ~5 minutes on 2 cores with a warm pip cache.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"
LOCK = REPO / "packaging" / "constraints.txt"

# The dev extra's test tools (not the linters, type stubs or the browser driver).
TEST_TOOLS = ("pytest", "pytest-asyncio", "jsonschema")

# Every backend (openai SDK and lean aiohttp clients, anthropic, tgi/hf), the CLI end to end
# against the fake servers, both graphs, text metrics, reports and plots, config and .env,
# the progress display and the rate limiter.
TESTS = (
    "tests/test_cli.py",
    "tests/test_backends.py",
    "tests/test_runs_resilient.py",
    "tests/test_ladder.py",
    "tests/test_adaptive.py",
    "tests/test_generation_tasks.py",
    "tests/test_report.py",
    "tests/test_config.py",
    "tests/test_progress.py",
    "tests/test_limits.py",
    # Records, cache keys and inline thinking: serialisation rules the oldest pydantic must keep.
    "tests/test_records_stable.py",
    "tests/test_thinking_split.py",
)

# NAME[extras] >=VERSION [, more specifiers] [; marker]: the only form the core may use.
_LOWER = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*"
    r"(?:[^;]*?,\s*)?>=\s*(?P<version>[0-9][A-Za-z0-9.+!-]*)"
)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def same_version(a: str | None, b: str) -> bool:
    """``1.0 == 1.0.0`` (PEP 440 pads releases with zeros); other forms compare as text."""
    if a is None:
        return False
    if re.fullmatch(r"[0-9]+(\.[0-9]+)*", a) and re.fullmatch(r"[0-9]+(\.[0-9]+)*", b):
        x, y = [int(i) for i in a.split(".")], [int(i) for i in b.split(".")]
        n = max(len(x), len(y))
        return x + [0] * (n - len(x)) == y + [0] * (n - len(y))
    return a == b


def lower_bounds(pyproject: Path = PYPROJECT) -> dict[str, str]:
    """``{distribution: declared lower bound}`` for the core dependencies."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    bounds = {}
    for dep in deps:
        m = _LOWER.match(dep)
        if m is None:
            raise SystemExit(f"{pyproject.name}: {dep!r} declares no lower bound (>=)")
        bounds[m["name"]] = m["version"]
    return bounds


def locked(names: tuple[str, ...], lock: Path = LOCK) -> dict[str, str]:
    """The versions the lock file pins for ``names``."""
    pins = {}
    for line in lock.read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            pins[canonical(name)] = version.strip()
    missing = [n for n in names if canonical(n) not in pins]
    if missing:
        raise SystemExit(f"{lock}: no pin for {', '.join(missing)}")
    return {n: pins[canonical(n)] for n in names}


def run(cmd: list[str], **kw: object) -> None:
    print("+", " ".join("<script>" if "\n" in c else c for c in cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


SMOKE = """
import importlib, pathlib, pkgutil, sys, tempfile
import hpt
from hpt.exports import FORMATS
# An export format of an optional extra (inspect_ai, wandb, mlflow) is loaded only by name.
extra = {f.module for f in FORMATS.values() if f.extra is not None}
mods = [m.name for m in pkgutil.walk_packages(hpt.__path__, "hpt.") if m.name not in extra]
for name in mods:
    importlib.import_module(name)
from hpt.tasks.sources import load_hub
with tempfile.TemporaryDirectory() as d:
    pathlib.Path(d, "validation.jsonl").write_text('{"question": "q", "answer": true}\\n')
    rows = load_hub(d, None, "validation")
assert rows == [{"question": "q", "answer": True}], rows
print(f"imported {len(mods)} hpt modules; datasets loaded a split")
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resolve", action="store_true", help="only resolve the pins (dry run)")
    ap.add_argument("--keep", action="store_true", help="keep the throwaway venv")
    args, pytest_args = ap.parse_known_args(argv)  # the rest goes to pytest (e.g. -k, -x)
    start = time.monotonic()

    bounds = lower_bounds()
    tools = locked(TEST_TOOLS)
    work = Path(tempfile.mkdtemp(prefix="hpt-min-versions-"))
    constraints = work / "min-constraints.txt"
    constraints.write_text(
        "# hpt's core dependencies at their declared lower bounds (packaging/min_versions.py)\n"
        + "".join(f"{n}=={v}\n" for n, v in bounds.items())
        + "# test tools at their locked versions\n"
        + "".join(f"{n}=={v}\n" for n, v in tools.items())
    )
    print(constraints.read_text(), flush=True)
    venv = work / "venv"
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    ok = False
    try:
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(py), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], env=env)
        install = [str(py), "-m", "pip", "install", "--quiet", "-c", str(constraints)]
        if args.resolve:
            run([*install, "--dry-run", str(REPO), *tools], env=env)
            ok = True
            return 0
        run([*install, str(REPO), *tools], env=env)
        run([str(py), "-m", "pip", "check"], env=env)

        listed = subprocess.run(
            [str(py), "-m", "pip", "list", "--format", "json"],
            check=True, capture_output=True, text=True, env=env,
        )  # fmt: skip
        have = {canonical(d["name"]): d["version"] for d in json.loads(listed.stdout)}
        wrong = {
            n: have.get(canonical(n))
            for n, v in bounds.items()
            if not same_version(have.get(canonical(n)), v)
        }
        if wrong:
            print(f"installed versions differ from the lower bounds: {wrong}", file=sys.stderr)
            return 1
        print(f"installed at their lower bounds: {len(bounds)} core dependencies", flush=True)

        run([str(py), "-c", SMOKE], env=env, cwd=work)
        # Optional extras are not installed here: their tests stay out with the embedded ones.
        skip = "not embedded and not dspy and not sentence_transformers"
        cmd = [str(py), "-m", "pytest", "-m", skip, "-q", "-p", "no:cacheprovider"]
        run([*cmd, *TESTS, *pytest_args], env=env, cwd=REPO)
        ok = True
        return 0
    except subprocess.CalledProcessError as exc:
        print(f"failed ({exc.returncode}): {' '.join(map(str, exc.cmd))[:300]}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {venv}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        print(
            f"min-versions job {'passed' if ok else 'FAILED'} in {time.monotonic() - start:.0f} s"
        )


if __name__ == "__main__":
    sys.exit(main())
