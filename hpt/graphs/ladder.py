"""The Hierarchical Prompting Framework as a LangGraph state machine.

One node per strategy in ladder order; after each node a conditional edge ends the run when
the task resolved the sample (or the model call failed) and otherwise moves one level up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel

from hpt.backends import Backend, BackendError, FatalBackendError, GenerationParams
from hpt.graphs.state import LadderState
from hpt.graphs.strategies import STRATEGIES, NoAnswer, StrategyContext, resolve_strategies
from hpt.results.records import Attempt, Call
from hpt.results.scoring import unjudged
from hpt.tasks import Check, Sample, Task
from hpt.tasks.cutoff import noted
from hpt.tasks.extractor import PURPOSE as EXTRACT
from hpt.tasks.extractor import AnswerExtractor

if TYPE_CHECKING:
    from hpt.structured.runtime import CellRuntime

# Edge labels. A failed model call ends the climb like a resolve does (the sample is then
# recorded as an error); one label keeps the drawn graph to one edge per pair of nodes.
STOP: Final = "resolved/error"
NEXT: Final = "unresolved"
Outcome = Literal["resolved/error", "unresolved"]


@dataclass
class LadderRuntime:
    """What the nodes need at run time; absent when the graph is only drawn."""

    task: Task
    model: Backend
    knowledge_model: Backend
    params: GenerationParams
    exemplar_pool: Sequence[Sample]
    # Part of every cache key: a new epoch asks the model afresh.
    epoch: int = 0
    # --extractor-model: reads each completion's answer instead of the rule reader.
    extractor: AnswerExtractor | None = None
    # Adaptive attempts reuse the standard ladder's cached completions (--share-completions).
    share_completions: bool = False
    # Each strategy's validated parameters (strategies.strategy_params); defaults if absent.
    strategy_args: Mapping[str, BaseModel] = field(default_factory=dict)
    # The cell's shared runtime (hpt.structured): per-cell memo, run directory, prompt model.
    run: CellRuntime | None = None


def cache_seed(sample_id: str, epoch: int, draw: int) -> str:
    """What keeps one climb's cached answers apart from every other climb's."""
    return f"{sample_id}#{epoch}" + (f"/{draw}" if draw else "")


def attempt_seed(base: str, iteration: int | None, tried: Sequence[int], level: int,
                 share: bool) -> str:  # fmt: skip
    """The cache seed of one attempt. A standard climb tries each level once: the base seed.
    An adaptive attempt carries its selector iteration, so a level chosen again is a fresh
    sample and adaptive runs do not replay the standard ladder's completions; with ``share``
    only a repeated level gets its own entry."""
    if iteration is None:
        return base
    if share:
        return base if level not in tried else f"{base}/it{iteration}"
    return f"{base}/adaptive/it{iteration}"


def _node(
    level: int, name: str, runtime: LadderRuntime | None, iteration_from: str | None = None
) -> Any:
    fn = STRATEGIES[name]

    async def run(state: LadderState) -> dict[str, list[Attempt]]:
        if runtime is None:
            raise RuntimeError("this ladder was built for drawing only")
        sample = state["sample"]
        # adaptive: the selector turn that chose this level
        iteration = len(state.get("selections", [])) if iteration_from is not None else None
        base = cache_seed(sample.id, runtime.epoch, state.get("draw", 0))
        tried = [a.level for a in state["attempts"]]
        ctx = StrategyContext(
            sample=sample,
            task=runtime.task,
            level=level,
            model=runtime.model,
            knowledge_model=runtime.knowledge_model,
            params=runtime.params,
            exemplar_pool=runtime.exemplar_pool,
            previous=state["attempts"],
            cache_seed=attempt_seed(base, iteration, tried, level, runtime.share_completions),
            shared_seed=attempt_seed(
                cache_seed("*", runtime.epoch, state.get("draw", 0)),
                iteration,
                tried,
                level,
                runtime.share_completions,
            ),
            run=runtime.run,
        )
        if name in runtime.strategy_args:
            ctx.args = runtime.strategy_args[name]
        # Built in one go: each assignment to a built model costs a validation on the hot path.
        outcome: dict[str, Any]
        try:
            completion = await fn(ctx)
            check = await _read(runtime, ctx, completion)
        except FatalBackendError:
            raise
        except BackendError as exc:
            outcome = {"error": str(exc)}
        except NoAnswer as exc:
            outcome = {"detail": str(exc), "alternatives": ctx.alternatives}
        else:
            ctx.notes.update(check.notes)
            outcome = {
                "completion": completion,
                "parsed": check.parsed,
                "resolved": check.resolved,
                "detail": check.detail,
                "score": check.score,
                "alternatives": {**check.alternatives, **ctx.alternatives},
                "verdict": check.verdict,
            }
        attempt = Attempt(
            level=level,
            strategy=name,
            iteration=iteration,
            calls=ctx.calls,
            notes=ctx.notes,
            **outcome,
        )
        return {"attempts": [attempt]}

    return run


async def _read(runtime: LadderRuntime, ctx: StrategyContext, completion: str) -> Check:
    """The task's check of ``completion``: by the rule reader, or by the extractor model with
    the rule reader's reading kept beside it."""
    check = await runtime.task.acheck_reply(ctx.sample, completion, ctx.calls, ctx.shared_seed)
    ctx.calls.extend(check.calls)  # a judge's calls belong to the attempt it judged
    extractor = runtime.extractor
    if extractor is None or not extractor.applies_to(runtime.task):
        return check
    # A reply cut off at the length limit: the extractor reads what the rule reader read, its
    # whole part; of a repeating loop (or nothing whole) there is nothing to read.
    part = runtime.task.reply_part(completion, ctx.calls)
    if part is not None and not part.text:
        return check
    text = completion if part is None else part.text
    seed = f"{ctx.cache_seed}#{EXTRACT}"
    extraction = await extractor.extract(runtime.task, ctx.sample, text, check, seed)
    ctx.calls.append(Call.of(EXTRACT, extractor.model.name, extraction.messages, extraction.result))
    if part is None:
        return extraction.check
    return extraction.check.model_copy(update={"detail": noted(extraction.check.detail, part.note)})


# Edge functions are coroutines: LangGraph runs a plain function in a worker thread, one
# thread hop (and its synchronisation objects) per edge of every climb.
async def _outcome(state: LadderState) -> Outcome:
    return STOP if attempt_ends_climb(state["attempts"][-1]) else NEXT


def attempt_ends_climb(last: Attempt) -> bool:
    """Whether the climb ends after ``last``, whatever level or selector turn would come
    next: it resolved, failed, or a judge gave no valid score -- that leaves the climb
    unscorable (hpt.results.scoring.unjudged), so further levels would spend calls on
    nothing."""
    return last.resolved or last.error is not None or unjudged([last])


def build_ladder(strategies: Sequence[str], runtime: LadderRuntime | None = None) -> Any:
    """Compile the ladder over ``strategies`` (registered names, lowest level first)."""
    names = resolve_strategies(strategies)
    graph: StateGraph[LadderState] = StateGraph(LadderState)
    for level, name in enumerate(names, 1):
        graph.add_node(name, _node(level, name, runtime))
    graph.add_edge(START, names[0])
    for i, name in enumerate(names):
        after = names[i + 1] if i + 1 < len(names) else END
        graph.add_conditional_edges(name, _outcome, {STOP: END, NEXT: after})
    return graph.compile()


def recursion_limit(levels: int) -> int:
    return levels + 5


def mermaid(strategies: Sequence[str], adaptive: bool = False) -> str:
    """The ladder's Mermaid diagram, drawn locally (no mermaid.ink call)."""
    if adaptive:
        from hpt.graphs.adaptive import build_adaptive  # it builds on this module

        return str(build_adaptive(strategies).get_graph().draw_mermaid())
    return str(build_ladder(strategies).get_graph().draw_mermaid())
