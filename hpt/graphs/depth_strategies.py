"""DepthQA's inference modes as strategies (tables 27-29), so each mode is a ladder node:
one alone makes a ``--depth-mode`` cell, several make a ladder over depth
(``--strategies role,depth_pred,depth_gold,depth_multi_turn``).

Every answering call asks for logprobs (Min-K% of the prediction) and goes through the
task's answer memo under a seed without the node's id: identical prompts -- a predecessor's
zero-shot question, the first turn of a conversation -- are one call, shared."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from hpt.backends import GenerationParams, Message
from hpt.graphs.context import StrategyFn
from hpt.graphs.strategies import Needs, StrategyContext, UnknownStrategyError, strategy
from hpt.results.depth import min_k_prob
from hpt.tasks.depthqa.answering import DEPTH_MODES, AnswerMemo, Asked, DepthPrompts
from hpt.tasks.depthqa.graph import QuestionGraph

__all__ = ["DEPTH_MODES", "DepthTask"]
MIN_K_TOKENS = 128


def _depth_strategy(name: str) -> Callable[[StrategyFn], StrategyFn]:
    """Every answering call asks for logprobs, and identical prompts share one answer (so
    drawing one again, as self_consistency would, repeats it)."""
    return strategy(name, needs=Needs(logprobs=True), redraws=False)


@runtime_checkable
class DepthTask(Protocol):
    graph: QuestionGraph
    answers: AnswerMemo
    depth_prompts: DepthPrompts


def _task(ctx: StrategyContext) -> DepthTask:
    if not isinstance(ctx.task, DepthTask):
        raise UnknownStrategyError(
            f"the depth strategies need a question graph; {ctx.task.name} has none"
        )
    return ctx.task


def _params(ctx: StrategyContext) -> GenerationParams:
    return ctx.params.model_copy(update={"logprobs": True})


async def _ask(ctx: StrategyContext, messages: list[Message], purpose: str) -> Asked:
    task = _task(ctx)
    result, reused = await task.answers.complete(ctx.model, messages, _params(ctx),
                                                 ctx.shared_seed)  # fmt: skip
    asked = Asked(messages, result, reused)
    ctx.calls.append(asked.call(purpose, ctx.model.name))
    return asked


def _answered(ctx: StrategyContext, asked: Asked) -> str:
    """The prediction, with its Min-K% probability noted when logprobs came back."""
    # As the paper: K = 20% of the first 128 tokens.
    score = min_k_prob((asked.completion.logprobs or [])[:MIN_K_TOKENS])
    if score is not None:
        ctx.notes["min_k_prob"] = repr(score)
    return asked.completion.text


def _question(task: DepthTask, node: str) -> str:
    return task.graph.question_of(node).question


def _predecessors(task: DepthTask, node: str) -> list[str]:
    # Sorted: the prompt never depends on the order the graph lists edges in.
    return sorted(task.graph.predecessors(node))


async def _zero_shot_answer(ctx: StrategyContext, node: str) -> str:
    task = _task(ctx)
    asked = await _ask(ctx, task.depth_prompts.zero_shot(_question(task, node)),
                       f"predecessor {node}")  # fmt: skip
    return asked.completion.text


@_depth_strategy("depth_zero_shot")
async def depth_zero_shot(ctx: StrategyContext) -> str:
    """Table 27: the question alone."""
    task = _task(ctx)
    return _answered(ctx, await _ask(ctx, task.depth_prompts.zero_shot(
        _question(task, ctx.sample.id)), "answer"))  # fmt: skip


@_depth_strategy("depth_gold")
async def depth_gold(ctx: StrategyContext) -> str:
    """Table 28 with the predecessors' reference answers."""
    task = _task(ctx)
    pairs = [(_question(task, p), task.graph.question_of(p).answer)
             for p in _predecessors(task, ctx.sample.id)]  # fmt: skip
    messages = task.depth_prompts.with_pairs(_question(task, ctx.sample.id), pairs)
    return _answered(ctx, await _ask(ctx, messages, "answer"))


@_depth_strategy("depth_pred")
async def depth_pred(ctx: StrategyContext) -> str:
    """Table 28 with the model's own zero-shot answers to the predecessors (each asked once
    for the whole run, shared with their own zero-shot records)."""
    task = _task(ctx)
    preds = _predecessors(task, ctx.sample.id)
    pairs = [(_question(task, p), await _zero_shot_answer(ctx, p)) for p in preds]
    messages = task.depth_prompts.with_pairs(_question(task, ctx.sample.id), pairs)
    return _answered(ctx, await _ask(ctx, messages, "answer"))


@_depth_strategy("depth_multi_turn")
async def depth_multi_turn(ctx: StrategyContext) -> str:
    """Table 29: the direct predecessors asked as earlier turns of one conversation, each
    answered in it, then the node's question. Conversations are per node: a predecessor's
    own multi-turn prediction comes from its own conversation, never from inside a deeper
    node's."""
    task = _task(ctx)
    prompts = task.depth_prompts
    history: list[Message] = [prompts.system]
    for p in _predecessors(task, ctx.sample.id):
        history.append(prompts.turn(_question(task, p)))
        asked = await _ask(ctx, list(history), f"turn {p}")
        # The turn's thinking goes back with it, as Anthropic's API asks of thinking models.
        history.append(Message(role="assistant", content=asked.completion.text,
                               reasoning_blocks=asked.completion.reasoning_blocks))  # fmt: skip
    if len(history) == 1:  # no predecessors: the zero-shot question
        return _answered(ctx, await _ask(ctx, prompts.zero_shot(_question(task, ctx.sample.id)),
                                         "answer"))  # fmt: skip
    history.append(prompts.last_turn(_question(task, ctx.sample.id)))
    return _answered(ctx, await _ask(ctx, history, "answer"))
