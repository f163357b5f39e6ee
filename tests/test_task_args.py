"""A plugin's dataset declares its own typed arguments; ``--task-arg DATASET.FIELD=VALUE`` and
a config's ``[run.task_args.DATASET]`` reach it validated, with no edit to hpt; a field it
lacks or a value it refuses is one error line before any model is called."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from hpt.orchestrator.spec import SavedSpec
from hpt.tasks.base import NoArgs, Task
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_cli import assert_user_error, hpt

PLUGIN = '''
"""A toy dataset with arguments of its own: how many numbers it asks about, and which
answer it calls right."""
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hpt.tasks import Sample, Task, register_task


@register_task
class Toy(Task):
    name = "toy"
    title = "Toy"
    hub_id = "none"
    hub_split = "test"
    penalty = 1.0
    prompt_dir = Path(__file__).parent

    class Args(BaseModel):
        model_config = ConfigDict(extra="forbid")
        count: int = Field(4, ge=1)
        answer: Literal["even", "odd"] = "even"

    args: Args

    def load_samples(self):
        # range() takes the count only as a number: text would fail here.
        return [Sample(id=f"n{i}", fields={"n": str(i)}, target=self.args.answer)
                for i in range(self.args.count)]

    def load_exemplar_pool(self):
        return []

    def parse(self, completion, sample):
        words = completion.lower().split()
        return words[-1] if words else None
'''
PROMPTS = '[role]\nuser = "As a mathematician: is {n} even or odd?"\n'


@pytest.fixture
def toy(tmp_path: Path) -> Any:
    """The plugin's folder on PYTHONPATH and a server whose model always says "even"."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "toyplug.py").write_text(PLUGIN)
    (site / "toy.toml").write_text(PROMPTS)
    server = ServerThread(FakeOpenAI(lambda body: "It is even").app()).start()
    yield site, server
    server.stop()


def _run(toy: Any, out: Path, *extra: str) -> Any:
    site, server = toy
    return hpt("--plugin", "toyplug", "run", "--dataset", "toy", "--model", "openai:test-model",
               "--base-url", server.base_url, "--strategies", "role", "--out", str(out),
               "--no-cache", "--no-progress", *extra, env={"PYTHONPATH": str(site)})  # fmt: skip


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def test_task_args_from_the_command_line_reach_the_dataset_typed(toy: Any, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = _run(toy, out, "--task-arg", "toy.count=3", "--task-arg", "toy.answer=odd")
    assert result.returncode == 0, result.stderr
    records = _records(out)
    assert sorted(r["sample_id"] for r in records) == ["n0", "n1", "n2"]
    assert all(r["target"] == "odd" and r["resolved_level"] is None for r in records)
    spec = json.loads((out / "run.json").read_text())
    assert spec["task_args"] == {"toy": {"count": 3, "answer": "odd"}}
    assert "depth_mode" not in spec and "graph" not in spec
    # A resumed run reads them back from run.json.
    again = hpt("run", "--resume", str(out), "--trust-plugins", env={"PYTHONPATH": str(toy[0])})
    assert again.returncode == 0, again.stderr
    assert len(_records(out)) == 3


def test_task_args_from_a_config_file_and_the_flag_over_it(toy: Any, tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text('[run.task_args.toy]\ncount = 2\nanswer = "even"\n')
    out = tmp_path / "run"
    result = _run(toy, out, "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert all(r["resolved_level"] == 1 for r in _records(out)) and len(_records(out)) == 2
    # A flag wins over the file, field by field.
    out = tmp_path / "over"
    result = _run(toy, out, "--config", str(config), "--task-arg", "toy.answer=odd")
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "run.json").read_text())["task_args"] == {
        "toy": {"count": 2, "answer": "odd"}
    }


@pytest.mark.parametrize(
    ("flag", "needles"),
    [
        ("toy.count=0", ["--task-arg toy.count", "greater than or equal to 1", "count, answer"]),
        ("toy.count=many", ["--task-arg toy.count", "integer"]),
        ("toy.answer=maybe", ["--task-arg toy.answer", "'even' or 'odd'"]),
        ("toy.colour=red", ["--task-arg toy.colour", "(its arguments: count, answer)"]),
        ("boolq.count=2", ["task arguments", "for 'boolq'", "does not evaluate (toy)"]),
        ("toy.count", ["--task-arg", "expected DATASET.FIELD=VALUE"]),
    ],
)
def test_a_wrong_field_or_value_is_one_error_line(
    toy: Any, tmp_path: Path, flag: str, needles: list[str]
) -> None:
    out = tmp_path / "run"
    result = _run(toy, out, "--task-arg", flag)
    if flag == "toy.count":  # argparse's own usage error: exit 2 after the usage lines
        assert result.returncode == 2 and needles[1] in result.stderr
    else:
        assert_user_error(result, *needles)
    assert not (out / "samples.jsonl").exists()


def test_a_wrong_value_in_a_config_file_is_one_error_line(toy: Any, tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text("[run.task_args.toy]\ncount = -1\n")
    result = _run(toy, tmp_path / "run", "--config", str(config))
    assert_user_error(result, "toy.count", "greater than or equal to 1")


def test_a_task_declares_arguments_with_defaults_that_forbid_others() -> None:
    class Loose(BaseModel):
        count: int = 1

    class Required(NoArgs):
        count: int

    for args, problem in ((Loose, "must forbid extra fields"), (Required, "needs a default")):
        with pytest.raises(TypeError, match=problem):
            type("Bad", (Task,), {"Args": args})


def test_a_run_json_from_before_task_args_reads_back() -> None:
    """run.json files written before task_args kept DepthQA's settings at the top level;
    their empty defaults (every run had them) are dropped, set ones become task_args."""
    base = {"dataset": ["boolq", "depthqa"], "model": ["local"]}
    plain = SavedSpec.model_validate({**base, "depth_mode": [], "graph": None})
    assert plain.task_args == {}
    depth = SavedSpec.model_validate({**base, "depth_mode": ["multi-turn"], "graph": "g"})
    assert depth.task_args == {"depthqa": {"mode": ["multi-turn"], "graph": "g"}}
    assert "depth_mode" not in depth.model_dump() and "graph" not in depth.model_dump()
    # In a run without DepthQA they applied to nothing, and still do.
    boolq = {**base, "dataset": ["boolq"], "depth_mode": ["multi-turn"], "graph": "g"}
    assert SavedSpec.model_validate(boolq).task_args == {}


def test_hpt_list_shows_each_datasets_arguments(toy: Any) -> None:
    site, _ = toy
    listed = hpt("--plugin", "toyplug", "list", env={"PYTHONPATH": str(site)})
    assert listed.returncode == 0, listed.stderr
    text = " ".join(listed.stdout.split())  # the console wraps long lines
    line = text[text.index("datasets:") : text.index("strategies:")]
    assert "toy(count, answer) (none)" in line
    assert "depthqa(mode, graph) (kaist-ai/DepthQA)" in line and "boolq (google/boolq)" in line
