"""What a strategy is given (``StrategyContext``: the sample, the task, the models, its
parameters) and what it may raise (``NoAnswer``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ConfigDict

from hpt.backends import Backend, Completion, GenerationParams, Message
from hpt.prompts import FieldValue
from hpt.prompts.library import Rendered
from hpt.results.records import Attempt, Call, Reading
from hpt.tasks import Sample, Task
from hpt.types import Role

if TYPE_CHECKING:
    from hpt.structured.runtime import CellRuntime


class NoParams(BaseModel):
    """The parameters of a strategy that takes none."""

    model_config = ConfigDict(extra="forbid", frozen=True)


P = TypeVar("P", bound=BaseModel)


def helper_params(params: GenerationParams, helper: Backend, model: Backend) -> GenerationParams:
    """What a model helping the climb (the knowledge model, the adaptive selector) is asked
    with, given the cell's ``params`` and its evaluated ``model``: the cell's settings,
    reasoning included, where it is that model itself; else the run's without the cell's
    reasoning settings, which are the evaluated model's dimension (and which a model that
    does not reason would refuse)."""
    return params if helper is model else params.without_reasoning()


class NoAnswer(Exception):
    """The strategy's calls gave nothing for the task to read (DSPy parsed no reply into a
    prediction): the attempt is unresolved, with this message as its detail."""


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
    # The call the strategy's answer comes from, where no call's completion is that answer as
    # it stands (self-consistency's winning draw): whether it was cut off at the token limit
    # is the attempt's (hpt.graphs.node.truncation).
    answer_call: Call | None = None

    @property
    def knowledge_params(self) -> GenerationParams:
        """What the knowledge model is asked with (``helper_params``)."""
        return helper_params(self.params, self.knowledge_model, self.model)

    def params_as(self, kind: type[P]) -> P:
        """The strategy's parameters as the model it registered (defaults when unset)."""
        return self.args if isinstance(self.args, kind) else kind()

    @property
    def fields(self) -> dict[str, FieldValue]:
        return dict(self.sample.fields)

    def render(self, strategy: str, key: str, **extra: FieldValue) -> str:
        return self.rendered(strategy, key, **extra).text

    def rendered(self, strategy: str, key: str, **extra: FieldValue) -> Rendered:
        """The template ``key`` of ``[strategy]`` filled for this sample, with the part every
        sample shares (``Rendered.message`` carries it to the backend, where a provider's
        prompt cache may use it)."""
        prompts = self.task.prompts
        return prompts.rendered(strategy, prompts.text(strategy, key), {**self.fields, **extra})

    def message(self, strategy: str, key: str, role: Role = "user", **extra: FieldValue) -> Message:
        """``rendered(...)`` as one message of ``role``."""
        return self.rendered(strategy, key, **extra).message(role)

    def seeded(
        self, index: int, params: GenerationParams | None = None
    ) -> tuple[str, GenerationParams]:
        """The cache seed and generation parameters of the ``index``-th draw of the same
        thing: index 0 is the attempt's own; a further one gets its own cache entry and,
        under a fixed sampling seed (--gen-seed), seed + index instead of a copy."""
        params = params or self.params
        if not index:
            return self.cache_seed, params
        if params.seed is not None:
            params = params.model_copy(update={"seed": params.seed + index})
        return f"{self.cache_seed}#draw{index}", params

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
        """One recorded call. ``index`` > 0 marks a further sample of the same prompt
        (``seeded``), not a repeat of the first."""
        backend = model or self.model
        seed, params = self.seeded(index, params)
        result = await backend.complete(messages, params, cache_seed=seed)
        self.calls.append(Call.of(purpose, backend.name, messages, result))
        return result


StrategyFn = Callable[[StrategyContext], Awaitable[str]]
