"""Run config files, keys from the environment or .env, and the cache commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpt.orchestrator.config import ConfigError, load_run_config
from hpt.orchestrator.spec import RunSpec
from tests.servers.answer_key import KeyedResponder
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_cli import assert_user_error, hpt

TOML = """
[run]
dataset = "boolq"
model = "mine"
limit = 3
concurrency = 2
strategies = ["role", "zero_shot_cot"]

[run.params]
max_tokens = 64

[models.mine]
provider = "openai"
model = "test-model"
endpoints = ["{url}"]
api_key_env = "MY_SERVER_KEY"
max_concurrency = 4
requests_per_minute = 6000
tokens_per_minute = 1000000

[models.mine.retry]
max_attempts = 3
"""


def test_toml_and_yaml_give_the_same_config(tmp_path: Path) -> None:
    toml = tmp_path / "run.toml"
    toml.write_text(TOML.format(url="http://127.0.0.1:1/v1"))
    yml = tmp_path / "run.yaml"
    yml.write_text(
        "run: {dataset: boolq, model: mine, limit: 3, concurrency: 2,"
        " strategies: [role, zero_shot_cot], params: {max_tokens: 64}}\n"
        "models:\n  mine:\n    provider: openai\n    model: test-model\n"
        "    endpoints: ['http://127.0.0.1:1/v1']\n    api_key_env: MY_SERVER_KEY\n"
        "    max_concurrency: 4\n    requests_per_minute: 6000\n    tokens_per_minute: 1000000\n"
        "    retry: {max_attempts: 3}\n"
    )
    a, b = load_run_config(toml), load_run_config(yml)
    assert a == b
    assert a.models["mine"].limits.max_concurrency == 4 and a.models["mine"].retry.max_attempts == 3


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ('[models.m]\nprovider = "openai"\nmodel = "x"\nmax_concurrency = 0\n',
         ["run.toml", "models.m.max_concurrency", "greater than or equal to 1"]),
        ('[models.m]\nprovider = "openai"\nmodel = "x"\napi_key = "sk-123"\n',
         ["run.toml", "models.m", "keys never go in config files", "api_key_env"]),
        ('[models.m]\nprovider = "vertex"\nmodel = "x"\n', ["models.m.provider"]),
        ('[models.m]\nprovider = "tgi"\n', ["models.m", "needs 'endpoints'"]),
        ('[run]\nconcurency = 3\n', ["run.toml", "run.concurency", "Extra inputs"]),
        ('[run]\nlimit = "many"\n', ["run.limit", "valid integer"]),
        ('[runs]\n', ["run.toml", "runs", "Extra inputs"]),
        ('[run]\ntask_args = ["mode"]\n', ["run.toml", "run.task_args", "valid dictionary"]),
        ('[run]\ndepth_mode = "zero-shot"\n[run.task_args.depthqa]\nmode = "multi_turn"\n',
         ["run.toml", "depth_mode and task_args.depthqa.mode disagree", "give one"]),
        ('[run]\ndepth_mode = "sideways"\n',
         ["run.toml", "run.task_args.depthqa.mode.0", "(run.depth_mode stands for it)"]),
        ('[run.task_args.depthqa]\nmodes = "zero-shot"\n',
         ["run.toml", "run.task_args.depthqa.modes", "Extra inputs"]),
        ("[run\n", ["run.toml", "not valid TOML"]),
    ],
)  # fmt: skip
def test_config_errors_name_the_file_and_key(text: str, needles: list[str], tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_run_config(path)
    for needle in needles:
        assert needle in str(err.value)


def test_task_args_and_their_shorthands_in_a_config_file(tmp_path: Path) -> None:
    """[run.task_args.DATASET] holds a dataset's own arguments; depth_mode and graph, RunSpec's
    fields before them, are read as DepthQA's (the same value twice is no conflict)."""
    path = tmp_path / "run.toml"
    path.write_text('[run]\ndepth_mode = ["multi-turn"]\ngraph = "g"\n'
                    '[run.task_args.depthqa]\nmode = "multi_turn"\n')  # fmt: skip
    config = load_run_config(path)
    spec = RunSpec.model_validate({"dataset": "depthqa", **config.run})
    assert spec.task_args == {"depthqa": {"mode": ["multi-turn"], "graph": "g"}}


def test_missing_or_unknown_config_file(tmp_path: Path) -> None:
    assert_user_error(hpt("run", "--config", str(tmp_path / "nope.toml")), "does not exist")
    (tmp_path / "run.json").write_text("{}")
    assert_user_error(hpt("run", "--config", str(tmp_path / "run.json")), ".toml, .yaml or .yml")


def test_run_from_config_with_key_from_dotenv(
    data_dir: Path, tmp_path: Path, boolq_answers
) -> None:
    secret = "sk-config-test-9f8e7d6c"
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "zero_shot_cot"), api_key=secret)
    server = ServerThread(fake.app()).start()
    try:
        (tmp_path / "run.toml").write_text(TOML.format(url=server.base_url))
        (tmp_path / ".env").write_text(f"MY_SERVER_KEY={secret}\n")
        out = tmp_path / "out"
        result = hpt("run", "--config", "run.toml", "--data-dir", str(data_dir), "--out", str(out),
                     "--limit", "4", cwd=tmp_path)  # fmt: skip
        assert result.returncode == 0, result.stderr
    finally:
        server.stop()
    recs = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(recs) == 4 and all(r["resolved_level"] == 2 for r in recs)  # --limit beat [run]
    assert all(r["model"] == "mine" for r in recs)
    assert all(body["max_tokens"] == 64 for body in fake.requests)
    for path in out.iterdir():
        assert secret not in path.read_text(), path
    saved = json.loads((out / "run.json").read_text())
    assert saved["models"]["mine"]["api_key_env"] == "MY_SERVER_KEY"


def test_unset_key_variable_is_one_clear_error(data_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text(TOML.format(url="http://127.0.0.1:1/v1"))
    result = hpt("run", "--config", "run.toml", "--data-dir", str(data_dir), cwd=tmp_path)
    assert_user_error(result, "MY_SERVER_KEY is not set")


def test_a_key_echoed_by_a_server_is_redacted(data_dir: Path, tmp_path: Path) -> None:
    secret = "sk-echoed-0123456789"
    fake = FakeOpenAI(lambda body: "x", api_key="another-key")
    server = ServerThread(fake.app()).start()
    try:
        result = hpt("run", "--dataset", "boolq", "--model", "openai:test-model", "--base-url",
                     server.base_url, "--data-dir", str(data_dir), "--out", str(tmp_path / "r"),
                     env={"OPENAI_API_KEY": secret})  # fmt: skip
    finally:
        server.stop()
    assert_user_error(result, "refused our credentials")
    assert secret not in result.stderr + result.stdout


def test_cache_stats_and_clear(
    fake_openai, data_dir: Path, tmp_path: Path, _private_cache: Path
) -> None:
    _, server = fake_openai
    result = hpt("run", "--dataset", "boolq", "--model", "openai:test-model", "--base-url",
                 server.base_url, "--data-dir", str(data_dir), "--out", str(tmp_path / "r"),
                 "--limit", "2", "--strategies", "role")  # fmt: skip
    assert result.returncode == 0, result.stderr
    stats = hpt("cache", "stats")
    assert stats.returncode == 0 and "entries: 2" in stats.stdout
    assert str(_private_cache) in stats.stdout and "openai:test-model: 2" in stats.stdout
    cleared = hpt("cache", "clear")
    assert cleared.returncode == 0 and "removed 2 cached responses" in cleared.stdout
    assert "entries: 0" in hpt("cache", "stats").stdout


def test_unwritable_cache_is_one_clear_error(fake_openai, data_dir: Path, tmp_path: Path) -> None:
    _, server = fake_openai
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = hpt("run", "--dataset", "boolq", "--model", "openai:test-model", "--base-url",
                 server.base_url, "--data-dir", str(data_dir), "--out", str(tmp_path / "r"),
                 env={"HPT_CACHE_DIR": str(blocker / "sub")})  # fmt: skip
    assert_user_error(result, "cannot open the response cache", "--no-cache")


def test_run_level_overrides_keep_the_models_other_settings() -> None:
    from hpt.orchestrator import RunSpec

    spec = RunSpec.model_validate({
        "dataset": "boolq", "model": "m", "requests_per_minute": 60,
        "models": {"m": {"provider": "openai", "model": "x", "tokens_per_minute": 5000,
                         "retry": {"max_total_s": 900, "max_attempts": 3}}},
        "retry": {"max_attempts": 9},
    })  # fmt: skip
    resolved = spec.resolve("m")
    label, config = resolved.label, resolved.config
    assert label == "m"
    assert (config.retry.max_attempts, config.retry.max_total_s) == (9, 900)
    assert (config.requests_per_minute, config.tokens_per_minute) == (60, 5000)
