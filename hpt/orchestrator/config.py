"""Run config files (TOML or YAML): a ``[run]`` table of RunSpec fields and ``[models.NAME]``
entries. Every problem is reported with the file and the key it concerns."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpt.backends import AnyModelConfig
from hpt.errors import validation_message
from hpt.orchestrator.spec import SHORTHANDS, ConfigError, RunSpec
from hpt.tasks import TaskArgError, UnknownTaskError, task_class

__all__ = ["ConfigError", "RunConfigFile", "load_run_config"]


class RunConfigFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, AnyModelConfig] = Field(default_factory=dict)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line, with the place it names."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem or exc.context} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(exc).split())


def _read(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"run config {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read run config {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {raw[exc.start]:#04x} on line {line}); a run config "
            "is a TOML or YAML text file"
        ) from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            return tomllib.loads(text)
        if suffix in (".yaml", ".yml"):
            return yaml.safe_load(text) or {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {_yaml_problem(exc)}") from None
    raise ConfigError(f"{path}: a run config must end in .toml, .yaml or .yml")


def load_run_config(path: Path) -> RunConfigFile:
    data = _read(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected tables 'run' and 'models' at the top level")
    try:
        config = RunConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, str(path))) from None
    if "models" in config.run:
        raise ConfigError(f"{path}: run.models: models are [models.NAME] tables, not in [run]")
    # Check the run table's fields now, so its errors name this file: with the datasets the
    # shorthands stand for, so that theirs are checked too (a file may name no dataset).
    datasets = config.run.get("dataset", "-")
    datasets = [datasets] if isinstance(datasets, str) else datasets
    if isinstance(datasets, list):
        datasets = [*datasets, *(dataset for dataset, _ in SHORTHANDS.values())]
    try:
        spec = RunSpec.model_validate({**config.run, "dataset": datasets, "models": config.models})
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, str(path), prefix="run")) from None
    for name, fields in spec.task_args.items():
        _check_task_args(path, config.run, name, fields)
    return config


def _check_task_args(path: Path, run: dict[str, Any], name: str, fields: dict[str, Any]) -> None:
    """One dataset's arguments against its declared model, the error naming this file. A
    dataset only a plugin registers (loaded after the file is read) is checked when the run
    starts."""
    try:
        cls = task_class(name)
    except UnknownTaskError:
        return
    try:
        cls.arguments(fields, where=f"{path}: run.task_args.")
    except TaskArgError as exc:
        shorthands = [f"run.{key}" for key, (dataset, _) in SHORTHANDS.items()
                      if dataset == cls.name and key in run]  # fmt: skip
        verb = "stands" if len(shorthands) == 1 else "stand"
        note = f" ({' and '.join(shorthands)} {verb} for it)" if shorthands else ""
        raise ConfigError(f"{exc}{note}") from None
