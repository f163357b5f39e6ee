"""Opening a run's cells: each distinct model's backend once, the instruments (judge,
extractor, selector, knowledge and prompt models) each cell calls, and each cell's graph;
the settings every backend is given, checked before any call."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Sequence
from dataclasses import dataclass

from hpt.backends import ResponseCache, SettingRefused
from hpt.backends.base import GenerationParams
from hpt.backends.batching import BatchOptions
from hpt.backends.gate import CallGate
from hpt.backends.managed import ManagedBackend
from hpt.graphs import LadderRuntime, build_ladder, ladder_needs
from hpt.graphs.adaptive import build_adaptive
from hpt.graphs.context import helper_params
from hpt.graphs.walk import GraphWalker
from hpt.orchestrator.models import ModelBackends
from hpt.orchestrator.planning import CellPlan
from hpt.orchestrator.spec import RunSpec
from hpt.structured.runtime import CellRuntime, ProgramStore
from hpt.tasks.extractor import AnswerExtractor


@dataclass
class OpenCells:
    """The backends opened (``stats`` for the progress display) and what to say once at
    the start: each a ``MODEL: SENTENCE`` warning."""

    backends: ModelBackends
    notes: list[str]


async def open_cells(
    spec: RunSpec,
    plans: list[CellPlan],
    stack: contextlib.AsyncExitStack,
    programs: ProgramStore,
    *,
    gate: CallGate | None = None,
    batch: BatchOptions | None = None,
) -> OpenCells:
    """Open every backend ``plans`` call (on ``stack``) and build each plan's graph; a
    setting a model cannot take raises ``SettingRefused`` before any call."""
    cache = await stack.enter_async_context(ResponseCache()) if spec.cache else None
    # Backends first: an unreachable endpoint or a bad key leaves no run directory behind.
    # One backend (one set of limits) per distinct model, whatever roles it plays.
    backends = ModelBackends(stack, cache, gate=gate, batch=batch,
                             direct_concurrency=spec.concurrency)  # fmt: skip

    async def backend(name: str) -> ManagedBackend:
        return await backends.open(spec.resolve(name))

    # Judges, the answer extractor and MIPROv2's instruction proposer are instruments, not
    # the evaluated model: they are given the run's settings without a cell's reasoning
    # effort or thinking budget (the spec keeps those as dimensions, never in its params),
    # so every cell is measured by the same instrument. The knowledge model and the
    # adaptive selector are part of the climb evaluated: the cell's settings, reasoning
    # included, where they are the evaluated model itself; a model of their own is not
    # the one evaluated at those settings and gets them without (helper_params).
    # The backends and the settings each is given, checked before anything is written.
    given: list[Given] = []
    extractor = extracting = None
    if spec.extractor_model:
        extracting = await backend(spec.extractor_model)
        extractor = AnswerExtractor(extracting, spec.params)
        given.append(Given(extracting, extractor.params, "extractor model"))
    for p in plans:
        model = p.model = await backend(p.model_name)
        knowledge = await backend(spec.knowledge_model) if spec.knowledge_model else model
        given.append(Given(model, p.params))
        p.backends = [model] if extracting is None else [model, extracting]
        needs = ladder_needs(p.strategies, p.args)
        if needs.logprobs:
            p.backends.append(knowledge)
            # Generated knowledge: its knowledge model is asked with logprobs.
            asked = helper_params(p.params, knowledge, model)
            given.append(Given(knowledge, asked.model_copy(update={"logprobs": True}),
                               "knowledge model"))  # fmt: skip
        if p.task.needs_judge:  # each cell its own judge: by default its evaluated model
            p.task = copy.copy(p.task)
            judge = await backend(spec.judge_model or p.model_name)
            p.backends.append(judge)
            p.task.bind_judge(judge, p.params.without_reasoning())
            # Its notes unsaid: a judge asks at its own temperature, not these params'.
            given.append(Given(judge, p.params.without_reasoning(), "judge model", said=False))
        # The instruction proposer (MIPROv2's): opened only for a ladder whose strategies
        # (or those they wrap) register that they need it.
        proposer = model
        if needs.prompt_model:
            if spec.prompt_model:
                proposer = await backend(spec.prompt_model)
            p.backends.append(proposer)
            given.append(Given(proposer, p.params.without_reasoning(), "prompt model"))
        cell = CellRuntime(p.cell.dataset, p.cell.model, programs, proposer, spec.epoch,
                           reasoning=p.cell.reasoning_label)  # fmt: skip
        runtime = LadderRuntime(
            p.task,
            model,
            knowledge,
            p.params,
            p.pool,
            spec.epoch,
            extractor=extractor,
            share_completions=spec.share_completions,
            strategy_args=p.args,
            run=cell,
        )
        if p.cell.mode == "adaptive":
            selector = await backend(spec.selector_model) if spec.selector_model else model
            p.backends.append(selector)
            asked = helper_params(p.params, selector, model)
            given.append(Given(selector, asked, "selector model"))
            graph = build_adaptive(p.strategies, runtime, selector)
        else:
            graph = build_ladder(p.strategies, runtime)
        # The same graph, walked without Pregel's per-step cost (hpt.graphs.walk).
        p.graph = GraphWalker.of(graph) or graph
    return OpenCells(backends, [*settings_notes(given), *backends.unbatched_notes()])


# The flag that names each model a run gives a part besides the evaluated one.
ROLE_FLAGS = {
    "knowledge model": "--knowledge-model",
    "selector model": "--selector-model",
    "judge model": "--judge-model",
    "extractor model": "--extractor-model",
    "prompt model": "--prompt-model",
}
# Said of a model given a reasoning setting by a transport without ``sent_params`` (a
# plugin's): nothing checked the setting, and nothing says how it goes on the wire.
UNSAID = ("its transport does not say what it sends; the reasoning settings are passed on as "
          "GenerationParams.reasoning_effort and thinking_budget, unchecked")  # fmt: skip


@dataclass(frozen=True)
class Given:
    """A backend and settings a run gives it. ``role``: the part it plays (``ROLE_FLAGS``)
    where it is not asked as the evaluated model; ``said``: whether what it does not send as
    asked is said at the start."""

    backend: ManagedBackend
    params: GenerationParams
    role: str | None = None
    said: bool = True


def settings_notes(given: Sequence[Given]) -> list[str]:
    """Check that each backend can take the settings it is given, before any call: a setting
    its model cannot take raises ``SettingRefused`` (the run stops with its one line, naming
    the role and its flag where the model plays one). What it sends otherwise than asked (a
    paper setting a reasoning model does not take): one ``MODEL: SENTENCE`` per distinct
    sentence, to be said once at the start."""
    notes: dict[str, None] = {}
    checked: set[tuple[int, str]] = set()
    # The evaluated models first: a setting refused to one is its own, whatever else it plays.
    for g in sorted(given, key=lambda g: (g.role is not None, not g.said)):
        key = (id(g.backend), g.params.model_dump_json())
        if key in checked:
            continue
        checked.add(key)
        try:
            sent = g.backend.sent_params(g.params)
        except SettingRefused as exc:
            if g.role is None:
                raise
            raise SettingRefused(
                f"the {g.role} {g.backend.name} ({ROLE_FLAGS[g.role]}): {exc}"
            ) from exc
        if not g.said:
            continue
        said = g.backend.param_notes(g.params)
        reasoning = g.params.reasoning_effort is not None or g.params.thinking_budget is not None
        if sent is None and reasoning:
            said = [*said, UNSAID]
        notes.update(dict.fromkeys(f"{g.backend.name}: {n}" for n in said))
    return list(notes)
