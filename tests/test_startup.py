"""Start-up: `hpt --version` answers without importing what runs models."""

from __future__ import annotations

import subprocess
import sys

from hpt import __version__
from tests.test_cli import hpt


def test_version_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from hpt.cli import main\n"
        "assert main(['--version']) == 0\n"
        "heavy = sorted(m for m in ('langgraph', 'aiohttp', 'openai', 'hpt.tasks', "
        "'hpt.backends', 'pydantic') if m in sys.modules)\n"
        "print('heavy:', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [f"hpt {__version__}", "heavy: []"]


def test_version_from_the_script() -> None:
    result = hpt("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"hpt {__version__}")
