"""Prompting strategies: async functions registered by name, each one ladder node, each with
what it needs (``StrategySpec``).

A strategy renders its dataset's templates, calls models through ``ctx.ask`` (which records
every call) and returns the completion the task should check. Its registration says
everything else the house reads of it: its typed parameters, the prompt-file section it
reads (checked before a run starts), its description for the adaptive selector, and its
needs -- a saved program, a prompt model, logprobs -- which the runner, ``hpt list`` and the
planner read instead of lists of names. The built-in strategies register exactly as a
plugin's do (hpt.graphs.hpf, .self_consistency, .structured_strategies, .depth_strategies).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from hpt.errors import HptError, validation_message
from hpt.graphs.context import NoAnswer, NoParams, StrategyContext, StrategyFn

__all__ = [
    "DEFAULT_LADDER",
    "STRATEGIES",
    "Needs",
    "NoAnswer",
    "NoParams",
    "StrategyContext",
    "StrategyRegistrationError",
    "StrategySpec",
    "UnknownStrategyError",
    "ladder_needs",
    "ladder_strategies",
    "register_strategy",
    "resolve_strategies",
    "strategy",
    "strategy_params",
    "wrapped",
]

DEFAULT_LADDER = ("role", "zero_shot_cot", "three_shot_cot", "least_to_most", "generated_knowledge")

# What would break the command line's syntax: --strategies A,B, --strategy-arg NAME.FIELD=V,
# --program NAME:DATASET=FILE.
_BAD_NAME = re.compile(r"[\s,.:=]")


class UnknownStrategyError(HptError, ValueError):
    pass


class StrategyRegistrationError(HptError, ValueError):
    """A strategy registered under a name that is taken, or described wrongly."""


class Needs(BaseModel):
    """What a strategy needs beyond the evaluated model and its prompts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # It can load a saved program instead of making one (--program NAME=FILE).
    program: bool = False
    # It asks a second model to write its instructions (--prompt-model); the runner opens
    # that model only for the ladders that run such a strategy.
    prompt_model: bool = False
    # It asks for token logprobs (a backend without them gets its fallback rule).
    logprobs: bool = False

    def names(self) -> list[str]:
        """The needs as ``hpt list`` shows them: the option each one reads, or "logprobs"."""
        shown = {"program": "--program", "prompt_model": "--prompt-model"}
        return [shown.get(name, name) for name in type(self).model_fields if getattr(self, name)]

    @classmethod
    def union(cls, needs: Iterable[Needs]) -> Needs:
        needs = list(needs)
        return cls(**{name: any(getattr(n, name) for n in needs) for name in cls.model_fields})


NO_NEEDS = Needs()


class StrategySpec(BaseModel):
    """One strategy as registered: its node function and what the house reads of it."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str
    fn: StrategyFn
    # Its settings (every field with a default): --strategy-arg NAME.FIELD=VALUE.
    params: type[BaseModel] = NoParams
    # The prompt-file section it reads: a dataset without it is refused before the run.
    prompt_section: str | None = None
    # How the adaptive selector is shown it ("Label: what it does"); without one, its name.
    description: str = ""
    needs: Needs = NO_NEEDS
    # The parameter naming another strategy this one runs several times (self_consistency's
    # ``of``): that strategy's prompt section and needs become this one's.
    wraps: str | None = None
    # Whether running it again draws a fresh answer. False for strategies whose answers are
    # shared between identical prompts (DepthQA's), which a wrapper cannot sample again.
    redraws: bool = True

    @model_validator(mode="after")
    def _check(self) -> StrategySpec:
        if not self.name or _BAD_NAME.search(self.name):
            raise ValueError(f"strategy name {self.name!r}: use no spaces, ',', '.', ':' or '='")
        if self.wraps is not None and self.wraps not in self.params.model_fields:
            raise ValueError(
                f"strategy {self.name!r} wraps the strategy its parameter {self.wraps!r} names, "
                f"but {self.params.__name__} has no such field"
            )
        return self

    async def __call__(self, ctx: StrategyContext) -> str:
        return await self.fn(ctx)

    def shown(self) -> str:
        """How the adaptive selector is shown it: its description, or its name."""
        return self.description or self.name.replace("_", " ")

    def label(self) -> str:
        """Its name as the selector names it: what is shown up to the colon ("Role
        Prompting"), or, with no description, its name ("self consistency")."""
        return self.shown().split(":", 1)[0].strip()


# Every registered strategy by name, in registration order (built-ins first).
STRATEGIES: dict[str, StrategySpec] = {}


def register_strategy(spec: StrategySpec, *, replace: bool = False) -> StrategySpec:
    """Make ``spec`` a strategy ``--strategies`` can name. A name already registered is an
    error unless ``replace`` (a plugin overriding a strategy on purpose)."""
    known = STRATEGIES.get(spec.name)
    if known is not None and known != spec and not replace:
        raise StrategyRegistrationError(
            f"a strategy named {spec.name!r} is registered already; pass replace=True to replace it"
        )
    STRATEGIES[spec.name] = spec
    return spec


def strategy(
    name: str,
    params: type[BaseModel] = NoParams,
    *,
    prompt_section: str | None = None,
    description: str = "",
    needs: Needs = NO_NEEDS,
    wraps: str | None = None,
    redraws: bool = True,
    replace: bool = False,
) -> Callable[[StrategyFn], StrategyFn]:
    """Register the decorated function as the strategy ``name`` (see ``StrategySpec`` for
    the rest); name it in ``--strategies`` to use it. ``params``: a pydantic model of its
    settings, set with ``--strategy-arg NAME.FIELD=VALUE`` or ``[run.strategy_args.NAME]``."""

    def register(fn: StrategyFn) -> StrategyFn:
        try:
            spec = StrategySpec(name=name, fn=fn, params=params, prompt_section=prompt_section,
                                description=description, needs=needs, wraps=wraps,
                                redraws=redraws)  # fmt: skip
        except ValidationError as exc:
            raise StrategyRegistrationError(validation_message(exc, f"strategy {name!r}")) from None
        register_strategy(spec, replace=replace)
        return fn

    return register


def resolve_strategies(names: Sequence[str]) -> list[str]:
    if not names:
        raise UnknownStrategyError("the ladder needs at least one strategy")
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise UnknownStrategyError(
            f"unknown strategy {', '.join(map(repr, unknown))}; "
            f"registered strategies: {', '.join(STRATEGIES)}"
        )
    if len(set(names)) != len(names):
        raise UnknownStrategyError(f"a strategy appears twice in {','.join(names)}")
    return list(names)


def strategy_params(
    strategies: Sequence[str], given: Mapping[str, Mapping[str, Any]]
) -> dict[str, BaseModel]:
    """Each ladder strategy's validated parameters; a setting for a strategy that is not in
    the ladder, or a field it does not have, or a wrapped strategy it cannot run, is an error
    naming the setting."""
    stray = [name for name in given if name not in strategies]
    if stray:
        raise UnknownStrategyError(
            f"--strategy-arg names {', '.join(map(repr, stray))}, which is not in the ladder "
            f"({', '.join(strategies)})"
        )
    out: dict[str, BaseModel] = {}
    for name in resolve_strategies(strategies):
        spec = STRATEGIES[name]
        try:
            out[name] = spec.params.model_validate(dict(given.get(name, {})))
        except ValidationError as exc:
            fields = ", ".join(spec.params.model_fields) or "none"
            problem = validation_message(exc, prefix=name)
            raise UnknownStrategyError(
                f"--strategy-arg {problem} (its parameters: {fields})"
            ) from None
        if spec.wraps is not None:
            _check_wrapped(spec, out[name])
    return out


def wrapped(name: str, args: BaseModel | None = None) -> str | None:
    """The strategy ``name`` runs several times, given its parameters (its defaults when
    ``args`` is not its own); None when it wraps none."""
    spec = STRATEGIES[name]
    if spec.wraps is None:
        return None
    return str(getattr(args if isinstance(args, spec.params) else spec.params(), spec.wraps))


def _check_wrapped(spec: StrategySpec, args: BaseModel) -> None:
    inner = wrapped(spec.name, args)
    setting = f"--strategy-arg {spec.name}.{spec.wraps}={inner}"
    if inner not in STRATEGIES:
        raise UnknownStrategyError(
            f"{setting}: unknown strategy {inner!r}; registered strategies: {', '.join(STRATEGIES)}"
        )
    if inner == spec.name:
        raise UnknownStrategyError(f"{setting}: {spec.name} cannot run itself")
    if not STRATEGIES[inner].redraws:
        raise UnknownStrategyError(
            f"{setting}: {inner} shares one answer between identical prompts, so every draw "
            "would repeat it; name a strategy that draws afresh"
        )


def ladder_strategies(strategies: Sequence[str], args: Mapping[str, BaseModel]) -> list[str]:
    """The strategies a ladder runs: its levels, then those they wrap (each once). A wrapped
    strategy runs with its default parameters."""
    out = list(strategies)
    for name in strategies:
        inner = wrapped(name, args.get(name))
        while inner is not None and inner not in out:
            out.append(inner)
            inner = wrapped(inner)
    return out


def ladder_needs(strategies: Sequence[str], args: Mapping[str, BaseModel]) -> Needs:
    """What a ladder's strategies need, those they wrap included."""
    return Needs.union(STRATEGIES[name].needs for name in ladder_strategies(strategies, args))
