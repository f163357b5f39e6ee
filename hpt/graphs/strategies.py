"""Prompting strategies: async functions registered by name, each one ladder node.

A strategy renders its dataset's templates, calls models through ``ctx.ask`` (which records
every call) and returns the completion the task should check.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from hpt.backends import Backend, GenerationParams, Message
from hpt.graphs.state import Attempt, Call
from hpt.prompts import FieldValue
from hpt.tasks import Sample, Task


@dataclass
class StrategyContext:
    sample: Sample
    task: Task
    level: int
    model: Backend
    knowledge_model: Backend
    params: GenerationParams
    exemplar_pool: Sequence[Sample]
    previous: Sequence[Attempt]
    # Keeps this sample's (and epoch's) cached answers apart from every other's.
    cache_seed: str = ""
    calls: list[Call] = field(default_factory=list)

    @property
    def fields(self) -> dict[str, FieldValue]:
        return dict(self.sample.fields)

    def render(self, strategy: str, key: str, **extra: FieldValue) -> str:
        prompts = self.task.prompts
        return prompts.render(strategy, prompts.text(strategy, key), {**self.fields, **extra})

    async def ask(
        self, messages: list[Message], purpose: str = "answer", model: Backend | None = None
    ) -> str:
        backend = model or self.model
        result = await backend.complete(messages, self.params, cache_seed=self.cache_seed)
        self.calls.append(
            Call(
                purpose=purpose,
                model=backend.name,
                messages=messages,
                completion=result.text,
                finish_reason=result.finish_reason,
                usage=result.usage,
                latency_s=result.latency_s,
                cached=result.cached,
            )
        )
        return result.text


StrategyFn = Callable[[StrategyContext], Awaitable[str]]
STRATEGIES: dict[str, StrategyFn] = {}

DEFAULT_LADDER = ("role", "zero_shot_cot", "three_shot_cot", "least_to_most", "generated_knowledge")


class UnknownStrategyError(ValueError):
    pass


def strategy(name: str) -> Callable[[StrategyFn], StrategyFn]:
    """Register ``fn`` as the strategy ``name``; name it in ``--strategies`` to use it."""

    def register(fn: StrategyFn) -> StrategyFn:
        STRATEGIES[name] = fn
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


def _user(text: str) -> list[Message]:
    return [Message(role="user", content=text)]


@strategy("role")
async def role(ctx: StrategyContext) -> str:
    return await ctx.ask(_user(ctx.render("role", "user")))


@strategy("zero_shot_cot")
async def zero_shot_cot(ctx: StrategyContext) -> str:
    return await ctx.ask(_user(ctx.render("zero_shot_cot", "user")))


@strategy("three_shot_cot")
async def three_shot_cot(ctx: StrategyContext) -> str:
    prompts = ctx.task.prompts
    shots = []
    for ex in ctx.task.exemplars_for(ctx.sample, ctx.exemplar_pool):
        fields = {**ex.fields, "answer": ex.shown_answer or ex.target}
        text = prompts.render("three_shot_cot", prompts.text("three_shot_cot", "exemplar"), fields)
        why = ctx.task.explanation(ex)
        suffix = prompts.optional_text("three_shot_cot", "explanation")
        if why and suffix:
            text += prompts.render("three_shot_cot", suffix, {"explanation": why})
        shots.append(text)
    return await ctx.ask(_user(ctx.render("three_shot_cot", "user", exemplars=" ".join(shots))))


@strategy("least_to_most")
async def least_to_most(ctx: StrategyContext) -> str:
    # One conversation: every step sees all earlier steps and answers, and {previous} names
    # the latest answer explicitly, as the paper's templates do.
    steps = ctx.task.prompts.texts("least_to_most", "steps")
    history: list[Message] = []
    previous = ""
    for i, template in enumerate(steps, 1):
        prompt = ctx.task.prompts.render(
            "least_to_most", template, {**ctx.fields, "previous": previous}
        )
        history = [*history, Message(role="user", content=prompt)]
        previous = await ctx.ask(history, purpose=f"step {i}/{len(steps)}")
        history = [*history, Message(role="assistant", content=previous)]
    return previous


@strategy("generated_knowledge")
async def generated_knowledge(ctx: StrategyContext) -> str:
    knowledge = await ctx.ask(
        _user(ctx.render("generated_knowledge", "knowledge")),
        purpose="knowledge",
        model=ctx.knowledge_model,
    )
    return await ctx.ask(_user(ctx.render("generated_knowledge", "user", knowledge=knowledge)))
