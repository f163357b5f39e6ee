"""Adaptive HPF (HPT appendix E, algorithm 2) as a LangGraph state machine.

A selector node asks a prompt-selector model which level to use; the chosen strategy node
runs; its edge ends the run when the sample is resolved (or a call failed) and otherwise
returns to the selector with the failed levels as feedback. There are at most m iterations;
an answer that is not a valid level is a hallucination: it is kept, counted, and costs its
iteration. A sample resolved at iteration i with level x scores x + i.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.graph import END, START, StateGraph

from hpt.backends import Backend, BackendError, FatalBackendError
from hpt.graphs.context import helper_params
from hpt.graphs.node import LadderRuntime, attempt_ends_climb, cache_seed, strategy_node
from hpt.graphs.selector_reader import parse_level
from hpt.graphs.state import LadderState
from hpt.graphs.strategies import STRATEGIES, resolve_strategies
from hpt.prompts import PromptSet
from hpt.prompts.library import Rendered, joined
from hpt.results.records import Call, Selection

SELECTOR = "selector"


# The selector's intro counts the ladder's strategies in words, as the paper's "five".
_COUNTS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
           "eleven", "twelve")  # fmt: skip


def strategy_labels(names: Sequence[str]) -> list[str]:
    """Each strategy's name as the selector is shown it (``StrategySpec.label``), the forms
    a reply may name it in."""
    return [STRATEGIES[name].label() for name in names]


def selector_prompt(
    prompts: PromptSet, names: Sequence[str], task_text: str | Rendered, tried: Sequence[int]
) -> str:
    """The selector's question: the ladder's strategies as their registrations describe
    them, numbered by level, then the task and the levels already tried."""
    return selector_rendered(prompts, names, task_text, tried).text


def selector_rendered(
    prompts: PromptSet, names: Sequence[str], task_text: str | Rendered, tried: Sequence[int]
) -> Rendered:
    """``selector_prompt`` with its shared prefix: the instructions and the strategies'
    descriptions (the same for every sample of a ladder) come before the task."""
    listed = "\n".join(f"{i}. {STRATEGIES[name].shown()}" for i, name in enumerate(names, 1))
    count = _COUNTS[len(names)] if len(names) < len(_COUNTS) else str(len(names))

    def part(key: str, **fields: str | Rendered) -> Rendered:
        return prompts.rendered(SELECTOR, prompts.text(SELECTOR, key), fields, shared={"count"})

    parts = [part("intro", count=count), Rendered.constant(listed), part("task", task=task_text)]
    if tried:
        parts.append(part("feedback", tried=", ".join(map(str, tried))))
    parts.append(prompts.constant(SELECTOR, "ask"))
    return joined(parts, "\n\n")


def build_adaptive(
    strategies: Sequence[str],
    runtime: LadderRuntime | None = None,
    selector_model: Backend | None = None,
) -> Any:
    names = resolve_strategies(strategies)
    m = len(names)
    graph: StateGraph[LadderState] = StateGraph(LadderState)
    templates = PromptSet.load("adaptive")  # read once, before the run starts
    labels = strategy_labels(names)

    async def select(state: LadderState) -> dict[str, Any]:
        if runtime is None or selector_model is None:
            raise RuntimeError("this graph was built for drawing only")
        sample = state["sample"]
        selections: list[Selection] = list(state.get("selections", []))
        tried = [a.level for a in state["attempts"]]
        task_prompts = runtime.task.prompts
        task_text = task_prompts.rendered("role", task_prompts.text("role", "user"), sample.fields)
        messages = [selector_rendered(templates, names, task_text, tried).message("user")]
        iteration = len(selections) + 1
        seed = cache_seed(sample.id, runtime.epoch, state.get("draw", 0)) + f"#select{iteration}"
        params = helper_params(runtime.params, selector_model, runtime.model)
        try:
            result = await selector_model.complete(messages, params, cache_seed=seed)
        except FatalBackendError:
            raise
        except BackendError as exc:
            turn = Selection(iteration=iteration, answer="", level=None, error=str(exc))
            return {"selections": [turn]}
        call = Call.of("select", selector_model.name, messages, result)
        level = parse_level(result.text, m, labels)
        # A reply cut off after it named a level chose it; one cut before chose nothing.
        turn = Selection(iteration=iteration, answer=result.text, level=level, call=call,
                         truncated=result.truncated and level is None)  # fmt: skip
        return {"selections": [turn]}

    async def route(state: LadderState) -> str:  # a coroutine: see hpt.graphs.ladder._outcome
        last: Selection = state["selections"][-1]
        if last.error is not None:
            return END
        if last.level is not None:
            return names[last.level - 1]
        return SELECTOR if len(state["selections"]) < m else END

    async def after_attempt(state: LadderState) -> str:
        if attempt_ends_climb(state["attempts"][-1]) or len(state["selections"]) >= m:
            return END
        return SELECTOR

    graph.add_node(SELECTOR, select)
    for level, name in enumerate(names, 1):
        graph.add_node(name, strategy_node(level, name, runtime, iteration_from=SELECTOR))
        graph.add_conditional_edges(name, after_attempt, {END: END, SELECTOR: SELECTOR})
    graph.add_edge(START, SELECTOR)
    graph.add_conditional_edges(
        SELECTOR, route, {**{n: n for n in names}, SELECTOR: SELECTOR, END: END}
    )
    return graph.compile()


def adaptive_recursion_limit(levels: int) -> int:
    return 2 * levels + 5
