"""Prompting strategies: async functions registered by name, each one ladder node.

A strategy renders its dataset's templates, calls models through ``ctx.ask`` (which records
every call) and returns the completion the task should check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpt.backends import Backend, Completion, GenerationParams, Message
from hpt.errors import HptError, validation_message
from hpt.prompts import FieldValue
from hpt.results.records import Attempt, Call, Reading, mean_token_prob
from hpt.tasks import Sample, Task

if TYPE_CHECKING:
    from hpt.structured.runtime import CellRuntime


class NoParams(BaseModel):
    """The parameters of a strategy that takes none."""

    model_config = ConfigDict(extra="forbid", frozen=True)


P = TypeVar("P", bound=BaseModel)


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
    # Said about the attempt beyond its calls (e.g. which knowledge candidate was used).
    notes: dict[str, str] = field(default_factory=dict)
    # Keeps this sample's (and epoch's) cached answers apart from every other's.
    cache_seed: str = ""
    # The same without the sample's identity: for calls that depend only on what they ask
    # (DepthQA's shared predecessor questions), so identical prompts share one answer.
    shared_seed: str = ""
    calls: list[Call] = field(default_factory=list)
    # The strategy's parameters, validated against the model it registered
    # (--strategy-arg NAME.FIELD=VALUE); its defaults when none were given.
    args: BaseModel = field(default_factory=NoParams)
    # The cell beyond this sample (run directory, per-cell memo, prompt model, --program
    # files): what the DSPy strategies share across samples. None outside a run.
    run: CellRuntime | None = None
    # Readings the strategy makes beside the task's, by name (DSPy's "first_reply" when its
    # adapter fell back); the attempt records them with its alternatives.
    alternatives: dict[str, Reading] = field(default_factory=dict)

    def params_as(self, kind: type[P]) -> P:
        """The strategy's parameters as the model it registered (defaults when unset)."""
        return self.args if isinstance(self.args, kind) else kind()

    @property
    def fields(self) -> dict[str, FieldValue]:
        return dict(self.sample.fields)

    def render(self, strategy: str, key: str, **extra: FieldValue) -> str:
        prompts = self.task.prompts
        return prompts.render(strategy, prompts.text(strategy, key), {**self.fields, **extra})

    async def ask(
        self, messages: list[Message], purpose: str = "answer", model: Backend | None = None
    ) -> str:
        return (await self.draw(messages, purpose, model)).text

    async def draw(
        self,
        messages: list[Message],
        purpose: str = "answer",
        model: Backend | None = None,
        *,
        params: GenerationParams | None = None,
        index: int = 0,
    ) -> Completion:
        """One recorded call. ``index`` > 0 marks a further sample of the same prompt, which
        gets its own cache entry (and, under a fixed sampling seed, seed + index) instead of
        repeating the first."""
        backend = model or self.model
        seed = self.cache_seed if index == 0 else f"{self.cache_seed}#draw{index}"
        params = params or self.params
        if index and params.seed is not None:
            # A fixed sampling seed (--gen-seed) would make every further draw a copy.
            params = params.model_copy(update={"seed": params.seed + index})
        result = await backend.complete(messages, params, cache_seed=seed)
        self.calls.append(Call.of(purpose, backend.name, messages, result))
        return result


StrategyFn = Callable[[StrategyContext], Awaitable[str]]
STRATEGIES: dict[str, StrategyFn] = {}
# Each strategy's parameter model (NoParams when it takes none).
STRATEGY_PARAMS: dict[str, type[BaseModel]] = {}

DEFAULT_LADDER = ("role", "zero_shot_cot", "three_shot_cot", "least_to_most", "generated_knowledge")


class UnknownStrategyError(HptError, ValueError):
    pass


class NoAnswer(Exception):
    """The strategy's calls gave nothing for the task to read (DSPy parsed no reply into a
    prediction): the attempt is unresolved, with this message as its detail."""


def strategy(name: str, params: type[BaseModel] = NoParams) -> Callable[[StrategyFn], StrategyFn]:
    """Register ``fn`` as the strategy ``name``; name it in ``--strategies`` to use it.
    ``params``: a pydantic model of its settings (every field with a default), set with
    ``--strategy-arg NAME.FIELD=VALUE`` or ``[run.strategy_args.NAME]`` in a run config."""

    def register(fn: StrategyFn) -> StrategyFn:
        STRATEGIES[name] = fn
        STRATEGY_PARAMS[name] = params
        return fn

    return register


def strategy_params(
    strategies: Sequence[str], given: Mapping[str, Mapping[str, Any]]
) -> dict[str, BaseModel]:
    """Each ladder strategy's validated parameters; a setting for a strategy that is not in
    the ladder, or a field it does not have, is an error naming the setting."""
    stray = [name for name in given if name not in strategies]
    if stray:
        raise UnknownStrategyError(
            f"--strategy-arg names {', '.join(map(repr, stray))}, which is not in the ladder "
            f"({', '.join(strategies)})"
        )
    out: dict[str, BaseModel] = {}
    for name in strategies:
        kind = STRATEGY_PARAMS.get(name, NoParams)
        try:
            out[name] = kind.model_validate(dict(given.get(name, {})))
        except ValidationError as exc:
            fields = ", ".join(kind.model_fields) or "none"
            problem = validation_message(exc, prefix=name)
            raise UnknownStrategyError(
                f"--strategy-arg {problem} (its parameters: {fields})"
            ) from None
    return out


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


def choose_knowledge(candidates: Sequence[Completion]) -> tuple[int, str]:
    """The candidate to use and the rule that chose it (GKP: highest mean token probability
    when every candidate has logprobs, else the first)."""
    scores = [mean_token_prob(c.logprobs) for c in candidates]
    if not scores or any(s is None for s in scores):
        return 0, "first candidate (the backend returned no logprobs)"
    known = [s for s in scores if s is not None]
    best = max(range(len(known)), key=lambda i: known[i])
    shown = ", ".join(f"{s:.3f}" for s in known)
    return best, f"candidate {best + 1} of {len(known)} by mean token probability ({shown})"


class GeneratedKnowledgeParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # The paper samples three knowledge candidates and keeps the most probable one.
    candidates: int = Field(3, ge=1, le=20)


@strategy("generated_knowledge", GeneratedKnowledgeParams)
async def generated_knowledge(ctx: StrategyContext) -> str:
    n = ctx.params_as(GeneratedKnowledgeParams).candidates
    prompt = _user(ctx.render("generated_knowledge", "knowledge"))
    with_logprobs = ctx.params.model_copy(update={"logprobs": True})
    candidates = [
        await ctx.draw(
            prompt,
            purpose=f"knowledge {i + 1}/{n}",
            model=ctx.knowledge_model,
            params=with_logprobs,
            index=i,
        )
        for i in range(n)
    ]
    chosen, rule = choose_knowledge(candidates)
    ctx.notes["knowledge"] = rule
    knowledge = candidates[chosen].text
    return await ctx.ask(_user(ctx.render("generated_knowledge", "user", knowledge=knowledge)))


class SelfConsistencyParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Sampled answers; unset: the dataset's ``samples`` in its prompt file's
    # ``[self_consistency]`` table, else 5.
    n: int | None = Field(None, ge=1, le=100)


SELF_CONSISTENCY_SAMPLES = 5


@strategy("self_consistency", SelfConsistencyParams)
async def self_consistency(ctx: StrategyContext) -> str:
    """Self-consistency (Wang et al., 2023): several sampled chain-of-thought answers to the
    zero-shot CoT prompt, and the answer most of them reach. Not one of the paper's five
    levels; name it anywhere in ``--strategies``; ``--strategy-arg self_consistency.n=7``
    sets how many."""
    prompts = ctx.task.prompts
    n = ctx.params_as(SelfConsistencyParams).n
    if n is None:
        n = SELF_CONSISTENCY_SAMPLES
        if prompts.has("self_consistency"):
            n = int(prompts.section("self_consistency").get("samples", n))
    prompt = _user(ctx.render("zero_shot_cot", "user"))
    drawn = [await ctx.draw(prompt, purpose=f"sample {i + 1}/{n}", index=i) for i in range(n)]
    answers = [ctx.task.parse(c.text, ctx.sample) for c in drawn]
    votes = Counter(a for a in answers if a is not None)
    unreadable = sum(a is None for a in answers)
    tally = ", ".join(f"{a!r}: {k}" for a, k in votes.most_common())
    ctx.notes["votes"] = f"{tally or 'none'}; unreadable: {unreadable}"
    if not votes:
        return drawn[0].text
    # Most votes; a tie goes to the answer drawn first.
    top = max(votes.values())
    winner = next(a for a in answers if a is not None and votes[a] == top)
    return next(c.text for c, a in zip(drawn, answers, strict=True) if a == winner)
