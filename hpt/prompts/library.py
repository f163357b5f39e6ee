"""Prompt templates as data: one TOML file per dataset, one table per strategy.

Placeholders are ``{name}``; a value that is a list of (label, text) pairs is rendered as an
option list using the file's ``[options]`` table (``item``, ``separator``), which a strategy's
table may override with ``options_separator``.

Every render also says how much of its text is the same for every sample asked it
(``Rendered.shared_prefix``): the text before the first field whose value is the sample's.
That is where a provider's prompt cache can reuse what other samples already sent.
"""

from __future__ import annotations

import string
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from hpt.errors import HptError
from hpt.types import Message, Role

Options = Sequence[tuple[str, str]]
FieldValue = str | Options

_DEFAULT_OPTIONS = {"item": '{label}. "{text}"', "separator": ","}

# The fields whose value is the same for every sample asked a template: the three-shot
# exemplars (a dataset's fixed three, or its group's: an MMLU subject's, a MedCalc
# calculator's). Every other field of a ladder's templates is the sample's own; a caller
# that fills others that are not (the selector's {count}, the extractor's {form}) says so.
SHARED_FIELDS: frozenset[str] = frozenset({"exemplars"})


@dataclass(frozen=True, slots=True)
class Rendered:
    """A rendered prompt text and how many of its leading characters are the same for every
    sample asked it (``Message.shared_prefix``)."""

    text: str
    shared_prefix: int

    @classmethod
    def constant(cls, text: str) -> Rendered:
        """Text the same for every sample: wholly shared."""
        return cls(text, len(text))

    @property
    def whole(self) -> bool:
        return self.shared_prefix == len(self.text)

    def message(self, role: Role) -> Message:
        return Message(role=role, content=self.text, shared_prefix=self.shared_prefix)


def joined(parts: Sequence[Rendered], separator: str) -> Rendered:
    """``parts`` joined by ``separator``: shared through every part wholly shared and into
    the first that is not."""
    shared = 0
    for i, part in enumerate(parts):
        shared += (len(separator) if i else 0) + part.shared_prefix
        if not part.whole:
            break
    return Rendered(separator.join(p.text for p in parts), shared)


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
        return self.rendered(strategy, template, fields).text

    def rendered(
        self,
        strategy: str,
        template: str,
        fields: Mapping[str, FieldValue | Rendered],
        shared: Collection[str] = SHARED_FIELDS,
    ) -> Rendered:
        """``template`` filled from ``fields``, with its shared prefix: the text before the
        first field not named in ``shared`` (the same for every sample). A field given as
        ``Rendered`` (a prompt inside a prompt) is shared as far as its own prefix."""
        separator = self.section(strategy).get("options_separator", self._options["separator"])
        values: dict[str, str] = {}
        prefixes: dict[str, int] = {}
        for name in _placeholders(template):
            if name not in fields:
                raise PromptError(
                    f"{self.source}: [{strategy}] uses {{{name}}}, which is not among the "
                    f"fields provided here ({', '.join(sorted(fields)) or 'none'})"
                )
            value = fields[name]
            if isinstance(value, Rendered):
                values[name] = value.text
                prefixes[name] = len(value.text) if name in shared else value.shared_prefix
            else:
                values[name] = (
                    value if isinstance(value, str) else self.render_options(value, separator)
                )
                prefixes[name] = len(values[name]) if name in shared else 0
        return Rendered(template.format_map(values), _shared_length(template, values, prefixes))

    def constant(self, strategy: str, key: str) -> Rendered:
        """The text ``key`` of ``[strategy]`` as it stands (no fields): wholly shared."""
        return Rendered.constant(self.text(strategy, key))

    def render_options(self, options: Options, separator: str | None = None) -> str:
        item = self._options["item"]
        sep = self._options["separator"] if separator is None else separator
        return sep.join(item.format(label=label, text=text) for label, text in options)


_FORMATTER = string.Formatter()


@lru_cache(maxsize=4096)
def _parsed(template: str) -> tuple[tuple[str, str | None, str | None, str | None], ...]:
    """The template as literal text and fields, parsed once per template (every prompt of
    every climb renders one of a few dozen templates)."""
    return tuple(_FORMATTER.parse(template))


@lru_cache(maxsize=4096)
def _placeholders(template: str) -> tuple[str, ...]:
    """The template's field names."""
    return tuple(dict.fromkeys(name for _, name, _, _ in _parsed(template) if name is not None))


def _shared_length(template: str, values: Mapping[str, str], prefixes: Mapping[str, int]) -> int:
    """How many leading characters of ``template`` filled with ``values`` are shared: its
    literal text and its fields' values up to the first field shared only in part
    (``prefixes``: how much of each field's value is)."""
    length = 0
    for literal, name, spec, conversion in _parsed(template):
        length += len(literal)  # as rendered: "{{" reads "{"
        if name is None:
            continue
        if spec or conversion:
            return length  # a formatted field may not show its value as it stands
        length += prefixes[name]
        if prefixes[name] < len(values[name]):
            break
    return length


@cache
def _builtin(name: str) -> PromptSet:
    resource = resources.files("hpt.prompts") / "templates" / f"{name}.toml"
    if not resource.is_file():
        raise PromptError(f"hpt ships no prompts for dataset {name!r}")
    return PromptSet._parse(
        name, resource.read_text(encoding="utf-8"), f"hpt/prompts/templates/{name}.toml"
    )
