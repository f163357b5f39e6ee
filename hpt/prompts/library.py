"""Prompt templates as data: one TOML file per dataset, one table per strategy.

Placeholders are ``{name}``; a value that is a list of (label, text) pairs is rendered as an
option list using the file's ``[options]`` table (``item``, ``separator``), which a strategy's
table may override with ``options_separator``.
"""

from __future__ import annotations

import string
import tomllib
from collections.abc import Mapping, Sequence
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from hpt.errors import HptError

Options = Sequence[tuple[str, str]]
FieldValue = str | Options

_DEFAULT_OPTIONS = {"item": '{label}. "{text}"', "separator": ","}


class PromptError(HptError, LookupError):
    """A template is missing, malformed, or asks for a field the task does not provide."""


class PromptSet:
    """The templates of one dataset."""

    def __init__(self, name: str, data: Mapping[str, Any], source: str) -> None:
        self.name = name
        self.source = source
        self._data = data
        self._options = {**_DEFAULT_OPTIONS, **data.get("options", {})}

    @classmethod
    def load(cls, name: str, directory: Path | None = None) -> PromptSet:
        """Load ``NAME.toml`` from ``directory`` or from the templates shipped with hpt."""
        if directory is not None:
            path = directory / f"{name}.toml"
            if not path.is_file():
                raise PromptError(f"no prompt file {path}")
            text, source = path.read_text(encoding="utf-8"), str(path)
        else:
            return _builtin(name)
        return cls._parse(name, text, source)

    @classmethod
    def _parse(cls, name: str, text: str, source: str) -> PromptSet:
        try:
            return cls(name, tomllib.loads(text), source)
        except tomllib.TOMLDecodeError as exc:
            raise PromptError(f"{source}: {exc}") from exc

    def has(self, strategy: str) -> bool:
        return strategy in self._data

    def section(self, strategy: str) -> Mapping[str, Any]:
        try:
            section = self._data[strategy]
        except KeyError:
            raise PromptError(
                f"{self.source} has no [{strategy}] table: the {self.name} dataset has no "
                f"prompts for strategy {strategy!r}"
            ) from None
        if not isinstance(section, Mapping):
            raise PromptError(f"{self.source}: [{strategy}] must be a table")
        return section

    def text(self, strategy: str, key: str) -> str:
        value = self.section(strategy).get(key)
        if not isinstance(value, str):
            raise PromptError(f"{self.source}: [{strategy}] needs a string {key!r}")
        return value

    def optional_text(self, strategy: str, key: str) -> str | None:
        value = self.section(strategy).get(key)
        return value if isinstance(value, str) else None

    def texts(self, strategy: str, key: str) -> list[str]:
        value = self.section(strategy).get(key)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise PromptError(
                f"{self.source}: [{strategy}] needs a non-empty list of strings {key!r}"
            )
        return list(value)

    def render(self, strategy: str, template: str, fields: Mapping[str, FieldValue]) -> str:
        separator = self.section(strategy).get("options_separator", self._options["separator"])
        values: dict[str, str] = {}
        for name in _placeholders(template):
            if name not in fields:
                raise PromptError(
                    f"{self.source}: [{strategy}] uses {{{name}}}, which is not among the "
                    f"fields provided here ({', '.join(sorted(fields)) or 'none'})"
                )
            value = fields[name]
            values[name] = (
                value if isinstance(value, str) else self.render_options(value, separator)
            )
        return template.format_map(values)

    def render_options(self, options: Options, separator: str | None = None) -> str:
        item = self._options["item"]
        sep = self._options["separator"] if separator is None else separator
        return sep.join(item.format(label=label, text=text) for label, text in options)


@lru_cache(maxsize=4096)
def _placeholders(template: str) -> tuple[str, ...]:
    """The template's field names, parsed once per template (every prompt of every climb
    renders one of a few dozen templates)."""
    names = (name for _, name, _, _ in string.Formatter().parse(template) if name is not None)
    return tuple(dict.fromkeys(names))


@cache
def _builtin(name: str) -> PromptSet:
    resource = resources.files("hpt.prompts") / "templates" / f"{name}.toml"
    if not resource.is_file():
        raise PromptError(f"hpt ships no prompts for dataset {name!r}")
    return PromptSet._parse(
        name, resource.read_text(encoding="utf-8"), f"hpt/prompts/templates/{name}.toml"
    )
