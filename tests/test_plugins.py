"""Open registries: one plugin module brings a dataset, a model provider with its own typed
config and a strategy with typed parameters; it works from ``--plugin MODULE`` and from a
throwaway package installed by pip that declares an ``hpt.plugins`` entry point."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.test_cli import assert_user_error, hpt

PLUGIN = '''
"""A toy dataset, a toy provider and a parameterised strategy."""
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hpt.backends import (Completion, GenerationParams, Message, ModelConfig, SimpleProvider,
                          Usage, register_provider)
from hpt.graphs import strategy
from hpt.results import Column, ReportTable
from hpt.tasks import Sample, Task, register_task

HERE = Path(__file__).parent


@register_task
class Parity(Task):
    name = "parity"
    title = "Parity"
    hub_id = "none"
    hub_split = "test"
    penalty = 1.5
    prompt_dir = HERE
    report_table = ReportTable(
        key="parity", title="Parity · HPI", order=9, layout="cells",
        columns=(Column(label="HPI", value="hpi"), Column(label="acc %", value="accuracy",
                                                          percent=True)),
    )

    def load_samples(self):
        return [Sample(id=f"n{i}", fields={"n": str(i)}, target="even" if i % 2 == 0 else "odd")
                for i in range(4)]

    def load_exemplar_pool(self):
        return []

    def parse(self, completion, sample):
        words = completion.lower().split()
        return words[-1] if words else None


class EchoConfig(ModelConfig):
    provider: Literal["echo"] = "echo"
    model: str = "echo"
    # The toy's own setting: the word it ends every answer with.
    says: Literal["even", "odd"] = "even"


class EchoTransport:
    provider = "echo"
    endpoint = "memory"
    suggested_concurrency = None

    def __init__(self, config):
        self.model = config.model
        self.says = config.says

    async def start(self):
        pass

    async def send(self, messages, params):
        return Completion(text=f"I think {self.says}", finish_reason="stop",
                          usage=Usage(prompt_tokens=5, completion_tokens=3))

    async def aclose(self):
        pass


class Echo(SimpleProvider):
    name = "echo"
    config = EchoConfig
    spec_help = "echo:WORD"

    def from_spec(self, rest):
        return EchoConfig(model=rest, says=rest)

    def make_transport(self, config):
        return EchoTransport(config)


register_provider(Echo(), replace=True)


class AskParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    times: int = Field(1, ge=1, le=5)


@strategy("ask_again", AskParams)
async def ask_again(ctx):
    text = ""
    for i in range(ctx.params_as(AskParams).times):
        text = (await ctx.draw([Message(role="user", content=ctx.render("ask_again", "user"))],
                               purpose=f"ask {i + 1}", index=i)).text
    return text
'''

PROMPTS = """
[ask_again]
user = "Is {n} even or odd?"
[role]
user = "As a mathematician: is {n} even or odd?"
"""


def _write_plugin(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "parityplug.py").write_text(PLUGIN)
    (folder / "parity.toml").write_text(PROMPTS)
    return folder


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def _check_run(out: Path, times: int) -> None:
    recs = _records(out)
    assert len(recs) == 4 and {r["dataset"] for r in recs} == {"parity"}
    for r in recs:
        first = r["attempts"][0]
        assert first["strategy"] == "ask_again" and len(first["calls"]) == times
        assert r["resolved_level"] == (1 if r["target"] == "even" else None)
    run = json.loads((out / "run.json").read_text())
    assert run["models"] == {} and run["strategy_args"] == {"ask_again": {"times": times}}
    assert run["tasks"]["parity"]["table"]["title"] == "Parity · HPI"


def test_plugin_module_brings_dataset_provider_and_strategy(tmp_path: Path) -> None:
    site = _write_plugin(tmp_path / "plug")
    env = {"PYTHONPATH": str(site)}
    out = tmp_path / "run"
    result = hpt("--plugin", "parityplug", "run", "--dataset", "parity", "--model", "echo:even",
                 "--strategies", "ask_again,role", "--strategy-arg", "ask_again.times=3",
                 "--out", str(out), "--no-cache", env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    _check_run(out, times=3)
    # The run remembers its plugin: resuming needs no --plugin, only the user's word that the
    # directory's code may run.
    assert json.loads((out / "run.json").read_text())["plugins"] == ["parityplug"]
    again = hpt("run", "--resume", str(out), "--trust-plugins", env=env)
    assert again.returncode == 0, again.stderr
    # Reported by the table the dataset declared, with no plugin loaded at all.
    report = hpt("report", str(out), "--no-plots")
    assert report.returncode == 0, report.stderr
    # n0 and n2 resolve at level 1; n1 and n3 never: (1 + 1 + 2 x (2 + 1.5)) / 4 = 2.25.
    assert "## Parity · HPI" in report.stdout and "| model | HPI | acc % |" in report.stdout
    assert "| echo:even | 2.25 [" in report.stdout and "| 50.00 [" in report.stdout


def test_provider_config_is_typed_and_strategy_args_are_checked(tmp_path: Path) -> None:
    site = _write_plugin(tmp_path / "plug")
    env = {"PYTHONPATH": str(site)}
    config = tmp_path / "models.toml"
    config.write_text('[models.parrot]\nprovider = "echo"\nsays = "sometimes"\n')
    base = ["--plugin", "parityplug", "run", "--dataset", "parity", "--no-cache",
            "--out", str(tmp_path / "r")]  # fmt: skip
    bad_field = hpt(*base, "--config", str(config), "--model", "parrot", env=env)
    assert_user_error(bad_field, "models.parrot", "says")
    bad_arg = hpt(*base, "--model", "echo:odd", "--strategies", "ask_again",
                  "--strategy-arg", "ask_again.times=9", env=env)  # fmt: skip
    assert_user_error(bad_arg, "ask_again.times", "less than or equal to 5")
    unknown = hpt(*base, "--model", "echo:odd", "--strategy-arg", "ask_again.times=2", env=env)
    assert_user_error(unknown, "'ask_again', which is not in the ladder")
    typo = hpt(*base, "--model", "echo:odd", "--strategies", "ask_again",
               "--strategy-arg", "ask_again.tims=2", env=env)  # fmt: skip
    assert_user_error(typo, "ask_again.tims", "its parameters: times")
    malformed = hpt("run", "--dataset", "boolq", "--strategy-arg", "n=7")
    assert malformed.returncode == 2 and "STRATEGY.FIELD=VALUE" in malformed.stderr
    assert not (tmp_path / "r").exists()


def _wheel(folder: Path) -> Path:
    """A throwaway distribution 'parityplug' whose entry point registers the plugin."""
    wheel = folder / "parityplug-0.1-py3-none-any.whl"
    info = "parityplug-0.1.dist-info"
    files = {
        "parityplug.py": PLUGIN,
        "parity.toml": PROMPTS,
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: parityplug\nVersion: 0.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        f"{info}/entry_points.txt": "[hpt.plugins]\nparity = parityplug\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        zf.writestr(f"{info}/RECORD", record)
    return wheel


def test_installed_package_registers_through_its_entry_point(tmp_path: Path) -> None:
    folder = tmp_path / "dist"
    folder.mkdir()
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--target", str(site), str(_wheel(folder))],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    env = {"PYTHONPATH": str(site)}
    listing = hpt("list", env=env)
    assert listing.returncode == 0, listing.stderr
    assert "parity" in listing.stdout and "echo" in listing.stdout
    assert "ask_again(times)" in listing.stdout and "parity (parityplug)" in listing.stdout
    out = tmp_path / "run"
    result = hpt("run", "--dataset", "parity", "--model", "echo:even", "--strategies",
                 "ask_again", "--strategy-arg", "ask_again.times=2", "--out", str(out),
                 "--no-cache", env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    _check_run(out, times=2)


def test_a_broken_plugin_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('half-written plugin')\n")
    result = hpt("--plugin", "broken", "list", env={"PYTHONPATH": str(tmp_path)})
    assert_user_error(result, "plugin 'broken' failed while loading", "half-written plugin")
