"""One strategy as a graph node: what the nodes need at run time (``LadderRuntime``), the
cache seed of each attempt, and the node that runs a strategy and has the task read its
answer. The ladder and the adaptive graph both build on it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from hpt.backends import Backend, BackendError, FatalBackendError, GenerationParams
from hpt.graphs.state import LadderState
from hpt.graphs.strategies import STRATEGIES, NoAnswer, StrategyContext
from hpt.results.records import Attempt, Call, Truncation
from hpt.results.scoring import unjudged
from hpt.tasks import Check, Sample, Task
from hpt.tasks.cutoff import noted
from hpt.tasks.extractor import PURPOSE as EXTRACT
from hpt.tasks.extractor import AnswerExtractor

if TYPE_CHECKING:
    from hpt.structured.runtime import CellRuntime


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


def strategy_node(
    level: int, name: str, runtime: LadderRuntime | None, iteration_from: str | None = None
) -> Any:
    """The node of strategy ``name`` at ``level``: one attempt, read by the task.
    ``iteration_from``: the adaptive selector's node, whose turns number the attempts."""
    fn = STRATEGIES[name].fn

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
            # Before the reading: an extractor's or a judge's calls are not the answer's.
            cut = truncation(completion, ctx.calls)
            check = await _read(runtime, ctx, completion)
        except FatalBackendError:
            raise
        except BackendError as exc:
            outcome = {"error": str(exc)}
        except NoAnswer as exc:
            # A structured strategy cut off at the token limit parses nothing: say why.
            cut = ctx.calls[-1].truncation if ctx.calls else None
            why = str(exc) if cut is None else noted(str(exc), TRUNCATED[cut])
            outcome = {"detail": why, "alternatives": ctx.alternatives, "truncated": cut}
        else:
            ctx.notes.update(check.notes)
            alternatives = {**check.alternatives, **ctx.alternatives}
            detail: str | None = check.detail
            if cut is not None:
                # Cut off at the token limit, the answer is unfinished or missing: whatever a
                # reader reads in it, it did not resolve the sample (no reader's either, or
                # the readers' comparison would count the cut as their disagreement).
                alternatives = {k: r.model_copy(update={"resolved": False})
                                for k, r in alternatives.items()}  # fmt: skip
                # Cut before any answer, the reader's own reason (it read nothing) says less.
                detail = TRUNCATED[cut] if cut == "thinking" else noted(detail, TRUNCATED[cut])
            outcome = {
                "completion": completion,
                "parsed": check.parsed,
                "resolved": check.resolved and cut is None,
                "detail": detail,
                "score": check.score,
                "alternatives": alternatives,
                "verdict": check.verdict,
                "truncated": cut,
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


# The detail of a truncated attempt, by where it was cut.
TRUNCATED: dict[Truncation, str] = {
    "thinking": "truncated: cut off at the token limit while thinking, before any answer",
    "answer": "truncated: cut off at the token limit inside its answer; unresolved whatever "
    "it read",
}


def truncation(completion: str, calls: Sequence[Call]) -> Truncation | None:
    """Where the call that wrote ``completion`` was cut off at the token limit (see
    ``Call.truncation``): the last of ``calls`` whose answer it is, else, for a strategy that
    returns what it read out of its reply (DSPy's parsed field), its last call."""
    call = next((c for c in reversed(calls) if c.completion == completion), None)
    if call is None and calls:
        call = calls[-1]
    return None if call is None else call.truncation


def attempt_ends_climb(last: Attempt) -> bool:
    """Whether the climb ends after ``last``, whatever level or selector turn would come
    next: it resolved, failed, or a judge gave no valid score -- that leaves the climb
    unscorable (hpt.results.scoring.unjudged), so further levels would spend calls on
    nothing."""
    return last.resolved or last.error is not None or unjudged([last])
