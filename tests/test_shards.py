"""Shards (``hpt run --shard I/N``) and ``hpt merge``: shards are disjoint and together the
whole campaign; their merge is the run one process makes (records, summary, report, compare,
resume), and merge refuses what is not one campaign or not all of it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import hpt
from hpt.cli.main import main
from hpt.orchestrator.budget import spend_of_records
from hpt.orchestrator.merge import MergeError, merge_shards
from hpt.orchestrator.spec import ConfigError, RunSpec, Shard
from hpt.results.lock import RunLock
from hpt.results.reader import read_records
from hpt.tasks.base import in_shard
from tests.backend_helpers import FAST_RETRY, serving
from tests.servers.answer_key import KeyedResponder
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_cli import HPT

MODELS = ("alpha", "beta")
LADDER = ["role", "zero_shot_cot", "three_shot_cot"]
LIMIT, DRAWS, SHARDS = 10, 2, 3
_QUESTION = re.compile(r"question: (?:\"([^\"]+)\"|'(.+?)' using)")


class Mixed:
    """A model per name that resolves each BoolQ sample from a level chosen by hashing the
    model and the question (some at level 1, 2 or 3, some never): cells whose figures vary."""

    def __init__(self, answers: dict[str, str], by_model_only: bool = False) -> None:
        self.levels = [KeyedResponder(answers, s) for s in (*LADDER, None)]
        self.by_model_only = by_model_only

    def __call__(self, body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"]
        questions = ["".join(g) for g in _QUESTION.findall(last)[-1:]]
        key = body["model"] + ("" if self.by_model_only else "".join(questions) or last)
        level = int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(self.levels)
        return self.levels[level](body)


def _models(base_url: str) -> dict[str, Any]:
    return {
        name: {"provider": "openai", "model": name, "endpoints": [base_url], "retry": FAST_RETRY}
        for name in MODELS
    }


def _campaign(base_url: str, data_dir: Path, out: Path, **extra: Any) -> Any:
    settings: dict[str, Any] = dict(
        datasets=["boolq", "csqa"], models=list(MODELS), model_configs=_models(base_url),
        limit=LIMIT, samples_per_task=DRAWS, strategies=LADDER, data_dir=data_dir, out=out,
        cache=False, concurrency=4,
    )  # fmt: skip
    return asyncio.run(hpt.evaluate(**{**settings, **extra}))


@pytest.fixture(scope="module")
def server(boolq_answers: dict[str, str]) -> Iterator[ServerThread]:
    with serving(FakeOpenAI(Mixed(boolq_answers), model_ids=MODELS).app()) as srv:
        yield srv


@pytest.fixture(scope="module")
def runs(server: ServerThread, data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One campaign run whole (``single``) and as three shards (``s1``..``s3``)."""
    base = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "test-key")
        _campaign(server.base_url, data_dir, base / "single")
        for i in range(1, SHARDS + 1):
            _campaign(server.base_url, data_dir, base / f"s{i}", shard=f"{i}/{SHARDS}")
    return base


@pytest.fixture
def shards(runs: Path, tmp_path: Path) -> list[Path]:
    """Copies of the three shards, for a test to change."""
    return [Path(shutil.copytree(runs / f"s{i}", tmp_path / f"s{i}")) for i in (1, 2, 3)]


def _keys(out: Path) -> list[tuple[Any, ...]]:
    return [r.key for r in read_records(out)]


def _plain(value: Any) -> Any:
    """A record's JSON without its timings (wall_s, latency_s), which no two runs share."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in ("wall_s", "latency_s")}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _records(out: Path) -> list[str]:
    lines = (out / "samples.jsonl").read_text().splitlines()
    return sorted(json.dumps(_plain(json.loads(line)), sort_keys=True) for line in lines)


def _summary(out: Path) -> Any:
    return json.loads((out / "summary.json").read_text())


def _approx(value: Any) -> Any:
    """Floats compared to the last bits a different order of adding them may change."""
    if isinstance(value, dict):
        return {k: _approx(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_approx(v) for v in value]
    if isinstance(value, float):
        return pytest.approx(value, rel=1e-12)
    return value


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}  # fmt: skip


Invoke = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """``hpt ARGS...`` in this process: its exit status, stdout and stderr."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")

    def invoke(*argv: object) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return subprocess.CompletedProcess(argv, code, captured.out, captured.err)

    return invoke


def _error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused command prints."""
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpt: error: "), result.stderr
    return lines[0]


# -- shards ------------------------------------------------------------------------------


def test_shards_are_disjoint_and_together_the_whole_campaign(runs: Path) -> None:
    whole = _keys(runs / "single")
    # Two datasets x two models, --limit 10, two draws each.
    assert len(whole) == len(set(whole)) == 2 * 2 * LIMIT * DRAWS
    parts = [set(_keys(runs / f"s{i}")) for i in range(1, SHARDS + 1)]
    assert sum(len(p) for p in parts) == len(whole) and set().union(*parts) == set(whole)
    for i, part in enumerate(parts, 1):
        saved = json.loads((runs / f"s{i}" / "run.json").read_text())
        assert saved["shard"] == {"index": i, "count": SHARDS}
        assert part, "every shard holds some samples"
        for key in part:  # every cell's samples, every draw of a sample, in its hash's shard
            sample_id = key[-2]
            assert in_shard(0, sample_id, i, SHARDS)
    # All draws of a sample, in every cell, go to the one shard.
    owner: dict[str, set[int]] = {}
    for i, part in enumerate(parts, 1):
        for key in part:
            owner.setdefault(key[-2], set()).add(i)
    assert all(len(held) == 1 for held in owner.values())
    assert "shard" not in json.loads((runs / "single" / "run.json").read_text())


def test_shard_parse_and_the_title() -> None:
    assert Shard.parse("2/8") == Shard(index=2, count=8)
    spec = RunSpec(dataset=["boolq"], model=["alpha"], shard="2/8")
    assert spec.shard == Shard(index=2, count=8) and spec.title.endswith("· shard 2/8")
    assert RunSpec(dataset=["boolq"], model=["alpha"]).title == "boolq · alpha"
    for bad in ("2", "a/b", "0/4", "5/4", "1/0", "-1/4"):
        with pytest.raises(ConfigError):
            Shard.parse(bad)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("2", "give INDEX/COUNT, e.g. --shard 2/8"),
        ("two/8", "give INDEX/COUNT"),
        ("0/4", "shards count from 1 to COUNT (1/4 .. 4/4)"),
        ("5/4", "shards count from 1 to COUNT"),
    ],
)
def test_shard_flag_errors_are_one_line(
    given: str, says: str, cli: Invoke, data_dir: Path, tmp_path: Path
) -> None:
    result = cli("run", "--dataset", "boolq", "--model", "openai:m", "--data-dir",
                     str(data_dir), "--out", str(tmp_path / "r"), "--shard", given)  # fmt: skip
    line = _error_line(result)
    assert f"--shard {given!r}" in line or f"--shard {given}" in line
    assert says in line
    assert not (tmp_path / "r").exists()


def test_a_config_file_names_the_shard(
    server: ServerThread, cli: Invoke, data_dir: Path, tmp_path: Path
) -> None:
    config = tmp_path / "run.toml"
    config.write_text(f'[run]\ndataset = "boolq"\nlimit = 6\nshard = "2/3"\nstrategies = '
                      f'["role"]\n[models.alpha]\nprovider = "openai"\nmodel = "alpha"\n'
                      f'endpoints = ["{server.base_url}"]\n')  # fmt: skip
    out = tmp_path / "r"
    result = cli("run", "--config", str(config), "--model", "alpha", "--data-dir",
                     str(data_dir), "--out", str(out), "--no-progress")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "run.json").read_text())["shard"] == {"index": 2, "count": 3}
    assert "shard 2/3 of its campaign" in result.stdout and "hpt merge" in result.stdout
    assert all(in_shard(0, r.sample_id, 2, 3) for r in read_records(out))
    # The flag over the file's; a bad value in the file names the file.
    config.write_text(config.read_text().replace('"2/3"', '"4/3"'))
    bad = cli("run", "--config", str(config), "--model", "alpha", "--data-dir",
                  str(data_dir), "--out", str(tmp_path / "bad"))  # fmt: skip
    line = _error_line(bad)
    assert str(config) in line and "shard" in line and "1/3 .. 3/3" in line


def test_resume_keeps_the_shard_and_refuses_another(
    server: ServerThread, cli: Invoke, data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "r"
    started = cli("run", "--dataset", "boolq", "--model", "alpha", "--config",
                      str(_config(tmp_path, server)), "--data-dir", str(data_dir), "--limit",
                      "6", "--shard", "1/2", "--out", str(out), "--no-progress")  # fmt: skip
    assert started.returncode == 0, started.stderr
    before = _keys(out)
    # The same shard (an array job's script repeats it) is the run's own.
    again = cli("run", "--resume", str(out), "--shard", "1/2", "--no-progress")
    assert again.returncode == 0, again.stderr
    assert _keys(out) == before
    assert json.loads((out / "run.json").read_text())["shard"] == {"index": 1, "count": 2}
    line = _error_line(cli("run", "--resume", str(out), "--shard", "2/2"))
    assert f"--shard 2/2: {out} holds shard 1/2 of its campaign" in line
    assert "give --shard 1/2, or none" in line


def _config(tmp_path: Path, server: ServerThread) -> Path:
    config = tmp_path / "models.toml"
    config.write_text("".join(
        f'[models.{name}]\nprovider = "openai"\nmodel = "{name}"\nendpoints = '
        f'["{server.base_url}"]\n' for name in MODELS
    ))  # fmt: skip
    return config


# -- merge -----------------------------------------------------------------------------


def test_merge_is_the_single_process_run(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    shards = [runs / f"s{i}" for i in (3, 1, 2)]  # any order
    before = {s: _files(s) for s in shards}
    result = merge_shards(shards, tmp_path / "merged")
    merged = tmp_path / "merged"
    assert result.complete and result.merged == [1, 2, 3] and not result.missing
    assert result.records == 2 * 2 * LIMIT * DRAWS
    # Records equal as sets (timings aside), in a deterministic order: shard 1's first.
    assert _records(merged) == _records(runs / "single")
    assert _keys(merged) == [k for i in (1, 2, 3) for k in _keys(runs / f"s{i}")]
    # The summary recomputed from the records, cells in the run's order.
    assert _summary(merged) == _approx(_summary(runs / "single"))
    assert _summary(merged)["complete"] is True
    spec, single = (json.loads((d / "run.json").read_text()) for d in (merged, runs / "single"))
    assert "shard" not in spec and spec["out"] == str(merged)
    differ = {k for k in {*spec, *single} if spec.get(k) != single.get(k)}
    assert differ - {"started_at", "command"} == {"out", "merged_from"}
    assert [(m["index"], m["count"], m["complete"]) for m in spec["merged_from"]] == [
        (i, SHARDS, True) for i in (1, 2, 3)
    ]
    assert spec["merged_from"][0]["directory"] == str(runs / "s1")
    assert [before[s] == _files(s) for s in shards] == [True] * 3, "an input was changed"
    assert not list(tmp_path.glob(".merged.merging-*"))
    # Resuming a whole merged run has nothing to do.
    assert asyncio.run(hpt.resume(merged)).complete
    assert len(_keys(merged)) == result.records


async def test_a_merged_run_resumes_exactly_what_it_lacks(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    merged = tmp_path / "merged"
    await asyncio.to_thread(merge_shards, [runs / f"s{i}" for i in (1, 2, 3)], merged)
    # Shard 2's records taken out of the merged run: a resume runs exactly them.
    lines = (merged / "samples.jsonl").read_text().splitlines(keepends=True)
    kept = [ln for ln in lines if not in_shard(0, json.loads(ln)["sample_id"], 2, SHARDS)]
    (merged / "samples.jsonl").write_text("".join(kept))
    result = await hpt.resume(merged)
    assert result.complete
    after = _keys(merged)
    assert len(after) == len(set(after)) == len(lines)
    assert set(after[len(kept) :]) == set(_keys(runs / "s2"))
    assert _records(merged) == _records(runs / "single")


async def test_a_partial_merge_names_what_it_lacks_and_resumes_to_the_whole(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    merged = tmp_path / "merged"
    with pytest.raises(MergeError, match=r"shard 2/3 missing; finish each") as refused:
        merge_shards([runs / "s1", runs / "s3"], merged)
    assert "--partial" in str(refused.value) and not merged.exists()
    result = await asyncio.to_thread(merge_shards, [runs / "s1", runs / "s3"], merged, partial=True)
    assert not result.complete and result.missing == ["shard 2/3 missing"]
    assert _summary(merged)["complete"] is False
    assert [m["index"] for m in json.loads((merged / "run.json").read_text())["merged_from"]] == [
        1,
        3,
    ]
    finished = await hpt.resume(merged)
    assert finished.complete
    assert _records(merged) == _records(runs / "single")
    assert _summary(merged) == _approx(_summary(runs / "single"))


def test_merge_refuses_an_unfinished_shard_by_name(
    runs: Path, shards: list[Path], tmp_path: Path
) -> None:
    (shards[1] / "summary.json").unlink()  # killed before it ended
    with pytest.raises(MergeError) as refused:
        merge_shards(shards, tmp_path / "m")
    assert f"shard 2/3 ({shards[1]}) has no summary.json (it stopped before it ended)" in str(
        refused.value
    )
    assert merge_shards(shards, tmp_path / "partial", partial=True).missing == [
        f"shard 2/3 ({shards[1]}) has no summary.json (it stopped before it ended)"
    ]
    summary = json.loads((shards[0] / "summary.json").read_text())
    summary["complete"] = False
    (shards[0] / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(MergeError, match=r"shard 1/3 \(.*\) is not finished"):
        merge_shards(shards, tmp_path / "m")
    # A finished summary over fewer records (a resume dropped errored records, then died).
    summary["complete"] = True
    (shards[0] / "summary.json").write_text(json.dumps(summary))
    samples = shards[0] / "samples.jsonl"
    samples.write_text("".join(samples.read_text().splitlines(keepends=True)[1:]))
    shutil.copy(runs / "s2" / "summary.json", shards[1] / "summary.json")
    with pytest.raises(MergeError) as refused:
        merge_shards(shards, tmp_path / "m")
    held = len(_keys(shards[0]))
    assert f"shard 1/3 ({shards[0]}) holds {held} records where its summary.json counts " in str(
        refused.value
    )
    assert not (tmp_path / "m").exists() and not list(tmp_path.glob(".m.merging-*"))


def test_merge_refuses_overlapping_shards(runs: Path, tmp_path: Path) -> None:
    s1, s2 = runs / "s1", runs / "s2"
    with pytest.raises(MergeError, match=f"{s1} is given twice"):
        merge_shards([s1, s2, s1], tmp_path / "m")
    copy = shutil.copytree(s2, tmp_path / "copy")
    with pytest.raises(MergeError, match="both hold shard 2/3"):
        merge_shards([s1, s2, copy], tmp_path / "m")


def test_merge_refuses_a_record_outside_its_shard(shards: list[Path], tmp_path: Path) -> None:
    stray = (shards[0] / "samples.jsonl").read_text().splitlines(keepends=True)[0]
    with (shards[1] / "samples.jsonl").open("a") as fh:
        fh.write(stray)
    sample = json.loads(stray)["sample_id"]
    with pytest.raises(MergeError) as refused:
        merge_shards(shards, tmp_path / "m")
    assert f"sample {sample} of " in str(refused.value)
    assert "is in shard 1/3, not 2/3: this directory was not made by hpt run --shard" in str(
        refused.value
    )
    assert not (tmp_path / "m").exists()


def test_merge_checks_depth_records_by_key_not_by_slice(shards: list[Path], tmp_path: Path) -> None:
    """DepthQA shards by its question graph's components, which merge does not load: a node's
    record may be outside its id's slice, but never in two shards."""
    lines = (shards[0] / "samples.jsonl").read_text().splitlines(keepends=True)
    node = {**json.loads(lines[0]), "kind": "depth", "node_id": "n1", "qid": "q1", "depth": 1}
    depth = json.dumps(node) + "\n"
    (shards[0] / "samples.jsonl").write_text("".join(lines[1:]))
    (shards[1] / "samples.jsonl").write_text((shards[1] / "samples.jsonl").read_text() + depth)
    moved = merge_shards(shards, tmp_path / "moved", partial=True)
    assert moved.records == 2 * 2 * LIMIT * DRAWS
    (shards[2] / "samples.jsonl").write_text((shards[2] / "samples.jsonl").read_text() + depth)
    with pytest.raises(MergeError) as refused:
        merge_shards(shards, tmp_path / "twice", partial=True)
    assert f"{shards[2] / 'samples.jsonl'}: node {node['sample_id']} of " in str(refused.value)
    assert "is in shard 2/3 too" in str(refused.value)
    assert not (tmp_path / "twice").exists()


def test_a_partial_merge_without_summaries_refuses_cells_outside_the_spec(
    shards: list[Path], tmp_path: Path
) -> None:
    for shard in shards:  # every shard killed before it ended: no plan's cells to go by
        (shard / "summary.json").unlink()
    assert merge_shards(shards, tmp_path / "m", partial=True).records == 2 * 2 * LIMIT * DRAWS
    samples = shards[0] / "samples.jsonl"
    whole = samples.read_text()
    record = json.loads(whole.splitlines()[0])
    # Another model, and the spec's dataset, model and mode at a threshold boolq has none of.
    for stray, title in ((dict(model="gamma"), "gamma"), (dict(threshold=0.15), "@0.15")):
        samples.write_text(whole + json.dumps({**record, **stray}) + "\n")
        with pytest.raises(MergeError) as refused:
            merge_shards(shards, tmp_path / "stray", partial=True)
        said = str(refused.value)
        assert said.startswith(f"{samples} (shard 1/3): a record of ") and title in said
        assert "which the campaign's spec does not include" in said
        assert not (tmp_path / "stray").exists()


def test_merge_refuses_a_shard_written_to_during_the_merge(
    shards: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished shard holds no lock: a resume may start in it while it is merged."""
    import hpt.orchestrator.merge as merging

    copy = merging._copy_programs

    def resumed_meanwhile(*args: Any) -> None:
        copy(*args)
        with (shards[1] / "samples.jsonl").open("a") as fh:
            fh.write((shards[1] / "samples.jsonl").read_text().splitlines(keepends=True)[0])

    monkeypatch.setattr(merging, "_copy_programs", resumed_meanwhile)
    with pytest.raises(MergeError) as refused:
        merge_shards(shards, tmp_path / "m")
    assert f"shard 2/3 ({shards[1]}) was written to during the merge" in str(refused.value)
    assert not (tmp_path / "m").exists() and not list(tmp_path.glob(".m.merging-*"))


def test_merge_refuses_foreign_shards(
    runs: Path, server: ServerThread, data_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    s1, s2 = runs / "s1", runs / "s2"

    def other(name: str, **extra: Any) -> Path:
        settings: dict[str, Any] = {"shard": f"3/{SHARDS}", **extra}
        _campaign(server.base_url, data_dir, tmp_path / name, **settings)
        return tmp_path / name

    cases = [
        (other("seed", seed=1), "their seed differs (0 and 1)"),
        (other("dataset", datasets=["boolq"]), "their dataset differs"),
        (other("model", models=["alpha"]), "their model differs"),
        (other("count", shard="3/4"), "holds shard 1/3 and"),
        (runs / "single", "holds a whole run, not a shard"),
    ]
    for foreign, says in cases:
        with pytest.raises(MergeError, match=re.escape(says)):
            merge_shards([s1, s2, foreign], tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_merge_warns_of_other_versions_and_differs_only_in_pacing(
    shards: list[Path], tmp_path: Path
) -> None:
    spec = json.loads((shards[2] / "run.json").read_text())
    spec.update(hpt_version="0.0.1", concurrency=1, python="3.99.0", command=["elsewhere"])
    (shards[2] / "run.json").write_text(json.dumps(spec))
    result = merge_shards(shards, tmp_path / "m")
    assert result.complete and len(result.warnings) == 1
    assert "shard 3/3: hpt 0.0.1" in result.warnings[0]
    saved = json.loads((tmp_path / "m" / "run.json").read_text())
    assert saved["concurrency"] == 4 and saved["merged_from"][2]["python"] == "3.99.0"
    assert saved["merged_from"][2]["command"] == ["elsewhere"]


def test_merge_takes_shards_that_reached_their_models_and_files_elsewhere(
    shards: list[Path], tmp_path: Path
) -> None:
    """A Slurm array whose jobs each serve their own vLLM, with the --program file and
    DepthQA's --graph copied to each node's disk: one campaign. Their contents are compared."""
    graph_files = ("questions.jsonl", "nodes.jsonl", "node_to_q.jsonl")
    for i, shard in enumerate(shards, 1):
        node = tmp_path / f"node{i}"
        (node / "graph").mkdir(parents=True)
        for name in graph_files:
            (node / "graph" / name).write_text(f'{{"file": "{name}"}}\n')
        (node / "program.json").write_text('{"predict": {"demos": []}}')
        spec = json.loads((shard / "run.json").read_text())
        url = f"http://node{i}:8000/v1"
        for config in spec["models"].values():
            config["endpoints"] = [url]
            config["timeout_s"] = 60.0 * i
        spec.update(base_url=url, cache=i == 2, programs={"dspy_cot": str(node / "program.json")},
                    task_args={"depthqa": {"graph": str(node / "graph")}})  # fmt: skip
        (shard / "run.json").write_text(json.dumps(spec))
    assert merge_shards(shards, tmp_path / "m").complete
    saved = json.loads((tmp_path / "m" / "run.json").read_text())
    assert saved["base_url"] == "http://node1:8000/v1"  # the first shard's, as for pacing
    # Another program, or another graph, under the same name: not one campaign.
    (tmp_path / "node3" / "program.json").write_text('{"predict": {"demos": [1]}}')
    with pytest.raises(MergeError, match="not shards of one campaign: their programs differs"):
        merge_shards(shards, tmp_path / "other")
    (tmp_path / "node3" / "program.json").write_text('{"predict": {"demos": []}}')
    (tmp_path / "node2" / "graph" / "nodes.jsonl").write_text("{}\n")
    with pytest.raises(MergeError, match="not shards of one campaign: their task_args differs"):
        merge_shards(shards, tmp_path / "other")
    # Another model behind the same name is not a difference of endpoints.
    (tmp_path / "node2" / "graph" / "nodes.jsonl").write_text('{"file": "nodes.jsonl"}\n')
    spec = json.loads((shards[2] / "run.json").read_text())
    spec["models"]["alpha"]["model"] = "gamma"
    (shards[2] / "run.json").write_text(json.dumps(spec))
    with pytest.raises(MergeError, match="not shards of one campaign: their models differs"):
        merge_shards(shards, tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_merge_refuses_an_existing_out_and_one_inside_a_shard(runs: Path, tmp_path: Path) -> None:
    shards = [runs / f"s{i}" for i in (1, 2, 3)]
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    with pytest.raises(MergeError, match="already exists and is not empty"):
        merge_shards(shards, taken)
    assert (taken / "notes.txt").read_text() == "mine"
    with pytest.raises(MergeError, match="never writes into the shards' directories"):
        merge_shards(shards, runs / "s1" / "merged")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert merge_shards(shards, empty).complete  # an empty directory is taken


def test_merge_refuses_a_shard_being_written(runs: Path, tmp_path: Path) -> None:
    shards = [Path(shutil.copytree(runs / f"s{i}", tmp_path / f"s{i}")) for i in (1, 2, 3)]
    lock = RunLock.take(shards[1])
    try:
        with pytest.raises(MergeError, match=f"{shards[1]} is being written by an hpt process"):
            merge_shards(shards, tmp_path / "m")
    finally:
        lock.release()
    assert merge_shards(shards, tmp_path / "m").complete


def test_merge_joins_spend_and_batch_journals(shards: list[Path], tmp_path: Path) -> None:
    for shard in shards:  # a bound of each shard's own
        spec = json.loads((shard / "run.json").read_text())
        spec["max_calls"] = 100
        (shard / "run.json").write_text(json.dumps(spec))
    spends = [(0.5, 3), (0.25, 2)]
    for shard, (usd, calls) in zip(shards, spends, strict=False):
        ledger = {
            "spent_usd": usd,
            "calls": calls,
            "by_model": {"alpha": {"usd": usd, "calls": calls}},
            "batches": [shard.name],
        }
        (shard / "spend.json").write_text(json.dumps(ledger))  # fmt: skip
        entry = {"local_id": f"b-{shard.name}", "state": "collected", "provider": "openai"}
        (shard / "batches.json").write_text(json.dumps({"batches": [entry]}))
        (shard / "batches").mkdir()
        (shard / "batches" / f"b-{shard.name}.jsonl").write_text("{}\n")
    merge_shards(shards, tmp_path / "m")
    merged = tmp_path / "m"
    spend = json.loads((merged / "spend.json").read_text())
    # Shard 3 kept no ledger: its records' calls (unpriced: free) are counted, as a resume
    # of it would count them.
    third = spend_of_records(read_records(shards[2]), {})
    assert third.calls == sum(r.calls for r in read_records(shards[2])) > 0
    assert spend["spent_usd"] == 0.75 and spend["calls"] == 5 + third.calls
    assert spend["by_model"]["alpha"] == {"usd": 0.75, "calls": 5 + third.by_model["alpha"].calls}
    assert spend["by_model"]["beta"] == {"usd": 0.0, "calls": third.by_model["beta"].calls}
    assert spend["batches"] == ["s1", "s2"]
    journal = json.loads((merged / "batches.json").read_text())
    assert [b["local_id"] for b in journal["batches"]] == ["b-s1", "b-s2"]
    assert sorted(p.name for p in (merged / "batches").iterdir()) == ["b-s1.jsonl", "b-s2.jsonl"]
    # The bound of each shard's: the merged run's is their sum.
    assert json.loads((merged / "run.json").read_text())["max_calls"] == 300


def test_merge_refuses_shards_that_optimised_different_programs(
    shards: list[Path], tmp_path: Path
) -> None:
    def program(shard: Path, instructions: str, version: str) -> None:
        directory = shard / "programs"
        directory.mkdir(exist_ok=True)
        state = {"predict": {"signature": {"instructions": instructions}, "demos": []},
                 "metadata": {"dependency_versions": {"dspy": version}}}  # fmt: skip
        (directory / "boolq__alpha__dspy_cot.json").write_text(json.dumps(state))
        (directory / "boolq__alpha__dspy_cot.meta.json").write_text(json.dumps({"s": shard.name}))
        usage = {"boolq__alpha__dspy_cot": {"optimisation": {"calls": 2, "prompt_tokens": 10}}}
        (directory / "usage.json").write_text(json.dumps(usage))

    # The same program, saved on machines with other versions: one program, kept once.
    for shard, version in zip(shards, ("3.0", "3.1", "3.0"), strict=True):
        program(shard, "Answer.", version)
    merge_shards(shards, tmp_path / "same")
    kept = tmp_path / "same" / "programs"
    assert sorted(p.name for p in kept.iterdir()) == [
        "boolq__alpha__dspy_cot.json", "boolq__alpha__dspy_cot.meta.json", "usage.json"
    ]  # fmt: skip
    assert json.loads((kept / "boolq__alpha__dspy_cot.meta.json").read_text()) == {"s": "s1"}
    usage = json.loads((kept / "usage.json").read_text())
    assert usage["boolq__alpha__dspy_cot"]["optimisation"] == {"calls": 6, "prompt_tokens": 30}
    program(shards[2], "Think, then answer.", "3.0")
    with pytest.raises(MergeError) as refused:
        merge_shards(shards, tmp_path / "other")
    assert "optimised different DSPy programs (programs/boolq__alpha__dspy_cot.json)" in str(
        refused.value
    )
    assert "--program" in str(refused.value) and not (tmp_path / "other").exists()


def test_merge_cli_errors_are_one_line(runs: Path, cli: Invoke, tmp_path: Path) -> None:
    line = _error_line(cli("merge", str(runs / "s1"), str(runs / "s3"), "--out",
                               str(tmp_path / "m")))  # fmt: skip
    assert "the shards are not the whole campaign: shard 2/3 missing" in line
    line = _error_line(cli("merge", str(runs / "s1"), str(tmp_path / "none"), "--out",
                               str(tmp_path / "m")))  # fmt: skip
    assert f"{tmp_path / 'none'} is not a run directory (no run.json)" in line
    partial = cli("merge", str(runs / "s1"), str(runs / "s3"), "--out", str(tmp_path / "m"),
                      "--partial")  # fmt: skip
    assert partial.returncode == 0, partial.stderr
    assert "merged shards 1/3, 3/3" in partial.stdout
    assert "the merged run is incomplete: shard 2/3 missing; finish it with: hpt run --resume" in (
        partial.stderr
    )


# -- shards as separate processes --------------------------------------------------------


def test_shard_processes_merge_into_what_one_process_runs(
    cli: Invoke, boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    """Two shard processes at once, each with its own response cache (as on two machines),
    and one process running the whole campaign: the merge reports, compares and views as the
    single run does."""
    # Each model resolves every sample at one level of its own: reports whose intervals do
    # not depend on the order records were written in.
    fake = FakeOpenAI(Mixed(boolq_answers, by_model_only=True), model_ids=MODELS)
    with serving(fake.app()) as srv:
        config = _config(tmp_path, srv)

        def command(out: Path, *extra: str) -> list[str]:
            return [HPT, "run", "--dataset", "boolq,csqa", "--model", "alpha", "--model", "beta",
                    "--config", str(config), "--data-dir", str(data_dir), "--limit", "12",
                    "--strategies", ",".join(LADDER), "--out", str(out), "--no-progress",
                    *extra]  # fmt: skip

        def env(cache: str) -> dict[str, str]:
            return {**os.environ, "OPENAI_API_KEY": "test-key",
                    "HPT_CACHE_DIR": str(tmp_path / cache)}  # fmt: skip

        procs = [
            subprocess.Popen(command(tmp_path / f"s{i}", "--shard", f"{i}/2"), env=env(f"c{i}"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in (1, 2)
        ]  # fmt: skip
        whole = subprocess.run(command(tmp_path / "single"), env=env("c0"), capture_output=True,
                               text=True, timeout=120)  # fmt: skip
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        assert whole.returncode == 0, whole.stderr
    merged = tmp_path / "merged"
    done = cli("merge", str(tmp_path / "s2"), str(tmp_path / "s1"), "--out", str(merged))
    assert done.returncode == 0, done.stderr
    assert "merged shards 1/2, 2/2: 48 records" in done.stdout
    single = tmp_path / "single"
    assert _records(merged) == _records(single)
    assert _summary(merged) == _approx(_summary(single))
    for kind in ("report", "compare"):
        shown = []
        for run in (single, merged):
            folder = tmp_path / f"{kind}-{run.name}"
            done = cli(kind, str(run), "--no-plots", "--out", str(folder))
            assert done.returncode == 0, done.stderr
            page = done.stdout[: done.stdout.rindex("wrote ")]  # the files' paths differ
            files = {p.name: p.read_text() for p in sorted(folder.iterdir())}
            shown.append(json.loads(json.dumps([page, files]).replace(str(run), "RUN")))
        assert shown[0] == shown[1], kind
        assert "comparisons.json" in shown[0][1], "two models: paired comparisons"
    for run in (single, merged):
        viewed = cli("view", str(run), "--no-open", "--out", str(tmp_path / f"{run.name}.html"))
        assert viewed.returncode == 0 and "(48 samples" in viewed.stdout, viewed.stderr
