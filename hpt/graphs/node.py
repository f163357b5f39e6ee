"""One strategy as a graph node: what the nodes need at run time (``LadderRuntime``), the
cache seed of each attempt, and the node that runs a strategy and has the task read its
answer. The ladder and the adaptive graph both build on it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from hpt.backends import Backend, BackendError, FatalBackendError, GenerationParams
from hpt.graphs.listener import attempt_finished
from hpt.graphs.state import LadderState
from hpt.graphs.strategies import STRATEGIES, NoAnswer, StrategyContext
from hpt.results.records import Attempt, Call, Reading, Truncation
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
            cut = truncation(completion, ctx.calls, ctx.answer_call)
            check = await _read(runtime, ctx, completion, cut)
        except FatalBackendError:
            raise
        except BackendError as exc:
            outcome = {"error": str(exc)}
        except NoAnswer as exc:
            # A structured strategy cut off at the token limit parses nothing: say why.
            cut = ctx.calls[-1].truncation if ctx.calls else None
            why = str(exc) if cut is None else noted(str(exc), TRUNCATED[cut])
            outcome = {"detail": why, "alternatives": _unresolved(ctx.alternatives, cut),
                       "truncated": cut}  # fmt: skip
        else:
            ctx.notes.update(check.notes)
            detail: str | None = check.detail
            if cut is not None:
                # Cut before any answer, the reader's own reason (it read nothing) says less.
                detail = TRUNCATED[cut] if cut == "thinking" else noted(detail, TRUNCATED[cut])
            outcome = {
                "completion": completion,
                "parsed": check.parsed,
                # Cut off at the token limit, the answer is unfinished or missing: whatever it
                # reads, it did not resolve the sample.
                "resolved": check.resolved and cut is None,
                "detail": detail,
                "score": check.score,
                "alternatives": _unresolved({**check.alternatives, **ctx.alternatives}, cut),
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
        attempt_finished(attempt)
        return {"attempts": [attempt]}

    return run


def _unresolved(readings: dict[str, Reading], cut: Truncation | None) -> dict[str, Reading]:
    """``readings`` of an attempt cut off at the token limit resolve nothing either, or the
    readers' comparison would count the cut as their disagreement."""
    if cut is None:
        return readings
    return {k: r.model_copy(update={"resolved": False}) for k, r in readings.items()}


async def _read(
    runtime: LadderRuntime, ctx: StrategyContext, completion: str, cut: Truncation | None
) -> Check:
    """The task's check of ``completion``: by the rule reader, or by the extractor model with
    the rule reader's reading kept beside it. A reply cut off at the token limit is not put
    to a judge or the extractor (it resolves nothing, whatever they say): a judged task
    scores it by its own rule (``Task.cut_check``)."""
    task = runtime.task
    ruled = task.cut_check() if cut is not None else None
    if ruled is not None:
        return ruled
    # How the reply ended is its answering call's, where the strategy named it.
    written_by = [ctx.answer_call] if ctx.answer_call is not None else ctx.calls
    check = await task.acheck_reply(ctx.sample, completion, written_by, ctx.shared_seed)
    ctx.calls.extend(check.calls)  # a judge's calls belong to the attempt it judged
    extractor = runtime.extractor
    if extractor is None or cut is not None or not extractor.applies_to(task):
        return check
    # A reply cut off at the length limit: the extractor reads what the rule reader read, its
    # whole part; of a repeating loop (or nothing whole) there is nothing to read.
    part = task.reply_part(completion, written_by)
    if part is not None and not part.text:
        return check
    text = completion if part is None else part.text
    seed = f"{ctx.cache_seed}#{EXTRACT}"
    extraction = await extractor.extract(task, ctx.sample, text, check, seed)
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


def truncation(
    completion: str, calls: Sequence[Call], answer_call: Call | None = None
) -> Truncation | None:
    """Where the call that wrote ``completion`` was cut off at the token limit (see
    ``Call.truncation``): the call the strategy named (``StrategyContext.answer_call``), else
    the last of ``calls`` whose completion it is, else, for a strategy that returns what it
    read out of its reply (DSPy's parsed field), its last call."""
    call = answer_call or next((c for c in reversed(calls) if c.completion == completion), None)
    if call is None and calls:
        call = calls[-1]
    return None if call is None else call.truncation


def attempt_ends_climb(last: Attempt) -> bool:
    """Whether the climb ends after ``last``, whatever level or selector turn would come
    next: it resolved, failed, or a judge gave no valid score -- that leaves the climb
    unscorable (hpt.results.scoring.unjudged), so further levels would spend calls on
    nothing."""
    return last.resolved or last.error is not None or unjudged([last])
