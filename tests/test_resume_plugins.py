"""``--resume`` runs no code a run directory names unless told to: the plugins in its
run.json are imported only with ``--trust-plugins``, or when each is an installed entry point
or given on the command line with ``--plugin``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hpt
from hpt.plugins import PluginError
from tests.run_faults import one_error_line
from tests.run_fixtures import write_run
from tests.test_cli import hpt as run_hpt
from tests.test_plugins import PLUGIN, PROMPTS

# Importing it leaves a mark: how a test sees that the plugin's code ran.
MARKING = PLUGIN + '\nimport os\nopen(os.environ["PLUGIN_MARK"], "a").write("imported\\n")\n'


@pytest.fixture
def plugin_run(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """A finished run made with the plugin, the environment that finds it, and its mark."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "parityplug.py").write_text(MARKING)
    (site / "parity.toml").write_text(PROMPTS)
    mark = tmp_path / "imported"
    env = {"PYTHONPATH": str(site), "PLUGIN_MARK": str(mark)}
    out = tmp_path / "run"
    made = run_hpt("--plugin", "parityplug", "run", "--dataset", "parity", "--model",
                   "echo:even", "--strategies", "role", "--out", str(out), "--no-cache",
                   env=env)  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert json.loads((out / "run.json").read_text())["plugins"] == ["parityplug"]
    mark.unlink()
    return out, env, mark


def test_resume_refuses_to_import_a_run_directorys_plugins(
    plugin_run: tuple[Path, dict[str, str], Path],
) -> None:
    out, env, mark = plugin_run
    refused = run_hpt("run", "--resume", str(out), env=env)
    assert refused.returncode == 2, refused.stderr
    one_error_line(refused.stderr, f"{out / 'run.json'}", "parityplug", "--trust-plugins")
    assert not mark.exists(), "the plugin's code ran"


def test_resume_imports_them_when_trusted(plugin_run: tuple[Path, dict[str, str], Path]) -> None:
    out, env, mark = plugin_run
    trusted = run_hpt("run", "--resume", str(out), "--trust-plugins", env=env)
    assert trusted.returncode == 0, trusted.stderr
    assert mark.read_text() == "imported\n"


def test_resume_imports_a_plugin_given_with_plugin(
    plugin_run: tuple[Path, dict[str, str], Path],
) -> None:
    out, env, mark = plugin_run
    given = run_hpt("--plugin", "parityplug", "run", "--resume", str(out), env=env)
    assert given.returncode == 0, given.stderr
    assert mark.read_text() == "imported\n"


def test_resume_imports_an_installed_entry_point(
    plugin_run: tuple[Path, dict[str, str], Path],
) -> None:
    out, env, mark = plugin_run
    info = Path(env["PYTHONPATH"]) / "parityplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: parityplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[hpt.plugins]\nparity = parityplug\n")
    installed = run_hpt("run", "--resume", str(out), env=env)
    assert installed.returncode == 0, installed.stderr
    assert mark.read_text() == "imported\n"


def test_trust_plugins_only_with_resume() -> None:
    result = run_hpt("run", "--dataset", "boolq", "--trust-plugins")
    assert result.returncode == 2
    one_error_line(result.stderr, "--trust-plugins applies only with --resume DIR")


async def test_the_api_resume_refuses_them_too(tmp_path: Path) -> None:
    out = write_run(tmp_path / "run", [], {"dataset": ["boolq"], "plugins": ["hpt_no_such_plug"]})
    with pytest.raises(PluginError, match=r"hpt_no_such_plug.*--trust-plugins"):
        await hpt.resume(out)
