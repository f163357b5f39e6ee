"""Write packaging/constraints.txt: the exact versions `make test`, `make run` and CI install.

    python3 packaging/lock.py                   # `make lock`: re-resolve in a fresh venv
    python3 packaging/lock.py --from-venv .venv # freeze a working venv as it is

The first builds a throwaway venv, installs ``hpt[local,dev,dspy,ray,inspect,wandb,mlflow,docs]``
there with no constraints (so the newest versions pyproject.toml allows; llama-cpp-python
compiles ~10 minutes unless pip's cache holds that version's wheel) and freezes it. Either way
the lock is ``pip freeze --exclude-editable`` (hpt itself excluded) under a header that says
this.
Standard library only.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "packaging" / "constraints.txt"
EXTRAS = "local,dev,dspy,ray,inspect,wandb,mlflow,docs"

HEADER = f"""\
# What `make install`/`make run`, `make test` and CI install:
#   pip install -c packaging/constraints.txt -e '.[{EXTRAS}]'
# Every package of hpt[{EXTRAS}]'s dependency tree at the version tested (Python 3.11,
# Linux x86_64). Generated: do not edit by hand. Regenerate with `make lock`
# (python3 packaging/lock.py: a fresh venv, `pip install -e '.[{EXTRAS}]'`, then
# `pip freeze --exclude-editable`), or freeze a working venv as it is with
# `python3 packaging/lock.py --from-venv .venv`; then run `make test` (its
# tests/test_packaging.py checks every pin against pyproject.toml's bounds).
# llama_cpp_python is pinned exactly so that pip's cache of its built wheel (it compiles from
# source, ~10 minutes on 2 cores) keeps hitting.
"""


def freeze(python: Path) -> str:
    out = subprocess.run(
        [str(python), "-m", "pip", "freeze", "--exclude-editable", "--disable-pip-version-check"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    lines = [ln for ln in out.splitlines() if ln and not ln.lower().startswith("hpt==")]
    bad = [ln for ln in lines if "==" not in ln]
    if bad:
        raise SystemExit(f"not pinnable by version (installed from a path or URL?): {bad}")
    return "\n".join(sorted(lines, key=str.lower)) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from-venv", type=Path, help="freeze this venv instead of a fresh one")
    args = ap.parse_args(argv)
    if args.from_venv:
        body = freeze(args.from_venv / "bin" / "python")
    else:
        work = Path(tempfile.mkdtemp(prefix="hpt-lock-"))
        try:
            py = work / "venv" / "bin" / "python"
            subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
            pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
            subprocess.run([*pip, "--upgrade", "pip"], check=True)
            # inspect-ai first: resolved together with the rest, pip backtracks through
            # boto3/botocore releases until it gives up ("resolution-too-deep"); alone it
            # settles at once, and the second install keeps what it chose.
            subprocess.run([*pip, "-e", f"{REPO}[inspect]"], check=True)
            subprocess.run([*pip, "-e", f"{REPO}[{EXTRAS}]"], check=True)
            body = freeze(py)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    LOCK.write_text(HEADER + body)
    print(f"wrote {LOCK.relative_to(REPO)}: {body.count(chr(10))} pins")
    return 0


if __name__ == "__main__":
    sys.exit(main())
