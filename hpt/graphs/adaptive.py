"""Adaptive HPF (HPT appendix E, algorithm 2) as a LangGraph state machine.

A selector node asks a prompt-selector model which level to use; the chosen strategy node
runs; its edge ends the run when the sample is resolved (or a call failed) and otherwise
returns to the selector with the failed levels as feedback. There are at most m iterations;
an answer that is not a valid level is a hallucination: it is kept, counted, and costs its
iteration. A sample resolved at iteration i with level x scores x + i.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langgraph.graph import END, START, StateGraph

from hpt.backends import Backend, BackendError, FatalBackendError, Message
from hpt.graphs.ladder import LadderRuntime, _node, cache_seed
from hpt.graphs.state import LadderState
from hpt.graphs.strategies import resolve_strategies
from hpt.prompts import PromptSet
from hpt.results.records import Call, Selection

SELECTOR = "selector"
# A numbered line, as in the strategy list the selector was shown: "1. Role Prompting: ...".
_LIST_ITEM = re.compile(r"^\s*[*_(\[]*(-?\d+)\s*[.):\]]\s*\S.*$", re.MULTILINE)
# A stated choice: "I choose 3", "my answer is **3**", "I'd go with index 2" ...
_FILLER = r"(?:\s*(?:is|would be|will be|:|=|#|-|number|no\.?|index|strategy|level|option)\s*)*"
_NUM_AFTER = r"\s*[*_`\"'(\[]*(-?\d+)(?![\d.]\d)"
_CHOSEN = re.compile(
    r"\b(?:choose|chose|choosing|select|selected|selecting|pick|picked|recommend|recommended"
    r"|go with|answer|choice)\b" + _FILLER + _NUM_AFTER,
    re.IGNORECASE,
)
# ... or only named: "Strategy: 3", "Index 3", "Level 2".
_NAMED = re.compile(r"\b(?:index|strategy|level|option)\b" + _FILLER + _NUM_AFTER, re.IGNORECASE)
# The whole reply is a number: "3", "**3**", "3.", "(3)".
_LONE = re.compile(r"^[\s*_`\"'(\[]*(-?\d+)[\s*_`\"').\]]*$")


def parse_level(answer: str, m: int, labels: Sequence[str] = ()) -> int | None:
    """The level a selector reply chooses, if it names exactly one within 1..m.

    Read, in order: a reply that is only a number ("3", "**3**"); a stated choice ("I choose
    3", "my answer is 3"), then a level merely named ("Strategy: 3", "Index 3"), all of which
    must agree; a reply that is a single numbered line ("2. Zero-shot ..."). The numbered
    lines of an echoed strategy list are list numbering, never a choice; a reply naming no
    level, or several, is a hallucination. With ``labels`` (the strategies' names, level
    order), a number whose line names another strategy ("1. Zero-shot Chain of Thought") is
    a conflict, not a choice."""
    lone = _LONE.match(answer)
    if lone:
        return _valid(int(lone.group(1)), m)
    items = list(_LIST_ITEM.finditer(answer))
    if len(items) > 1:  # an echoed list: what it numbers is not chosen
        for item in reversed(items):
            answer = answer[: item.start()] + answer[item.end() :]
    for pattern in (_CHOSEN, _NAMED):  # a stated choice outranks a level merely named
        found = list(pattern.finditer(answer))
        chosen = {int(f.group(1)) for f in found}
        if chosen:
            if len(chosen) > 1:
                return None
            level = chosen.pop()
            lines = [_line_after(answer, f.end()) for f in found]
            return None if any(_names_other(t, level, labels) for t in lines) else _valid(level, m)
    if len(items) == 1 and not answer.replace(items[0].group(0), "").strip():
        level = int(items[0].group(1))
        rest = _line_after(answer, items[0].end(1))
        return None if _names_other(rest, level, labels) else _valid(level, m)
    return None


def _line_after(text: str, at: int) -> str:
    return text[at:].split("\n", 1)[0]


def _names_other(text: str, level: int, labels: Sequence[str]) -> bool:
    lowered = text.lower()
    return any(
        label.lower() in lowered for i, label in enumerate(labels, 1) if i != level and label
    )


def _valid(level: int, m: int) -> int | None:
    return level if 1 <= level <= m else None


def strategy_labels(prompts: PromptSet, names: Sequence[str]) -> list[str]:
    """Each strategy's name as the selector is shown it ("Role Prompting")."""
    descriptions: dict[str, str] = dict(prompts.section(SELECTOR).get("descriptions", {}))
    labels = []
    for name in names:
        label = descriptions.get(name, name.replace("_", " ")).split(":", 1)[0].strip()
        # Replies drop the generic word: "Zero-shot Chain of Thought", but "Role Prompting".
        short = re.sub(r"\s+prompting$", "", label, flags=re.IGNORECASE)
        labels.append(short if re.search(r"[\s-]", short) else label)
    return labels


def selector_prompt(
    prompts: PromptSet, names: Sequence[str], task_text: str, tried: Sequence[int]
) -> str:
    section = prompts.section(SELECTOR)
    descriptions: dict[str, str] = dict(section.get("descriptions", {}))
    listed = "\n".join(
        f"{i}. {descriptions.get(name, name.replace('_', ' '))}" for i, name in enumerate(names, 1)
    )
    parts = [str(section["intro"]), listed, str(section["task"]).format(task=task_text)]
    if tried:
        parts.append(str(section["feedback"]).format(tried=", ".join(map(str, tried))))
    parts.append(str(section["ask"]))
    return "\n\n".join(parts)


def build_adaptive(
    strategies: Sequence[str],
    runtime: LadderRuntime | None = None,
    selector_model: Backend | None = None,
) -> Any:
    names = resolve_strategies(strategies)
    m = len(names)
    graph: StateGraph[LadderState] = StateGraph(LadderState)
    templates = PromptSet.load("adaptive")  # read once, before the run starts
    labels = strategy_labels(templates, names)

    async def select(state: LadderState) -> dict[str, Any]:
        if runtime is None or selector_model is None:
            raise RuntimeError("this graph was built for drawing only")
        sample = state["sample"]
        selections: list[Selection] = list(state.get("selections", []))
        tried = [a.level for a in state["attempts"]]
        task_text = runtime.task.prompts.render(
            "role", runtime.task.prompts.text("role", "user"), dict(sample.fields)
        )
        prompt = selector_prompt(templates, names, task_text, tried)
        messages = [Message(role="user", content=prompt)]
        iteration = len(selections) + 1
        seed = cache_seed(sample.id, runtime.epoch, state.get("draw", 0)) + f"#select{iteration}"
        try:
            result = await selector_model.complete(messages, runtime.params, cache_seed=seed)
        except FatalBackendError:
            raise
        except BackendError as exc:
            turn = Selection(iteration=iteration, answer="", level=None, error=str(exc))
            return {"selections": [turn]}
        call = Call.of("select", selector_model.name, messages, result)
        level = parse_level(result.text, m, labels)
        return {"selections": [Selection(iteration=iteration, answer=result.text, level=level,
                                         call=call)]}  # fmt: skip

    async def route(state: LadderState) -> str:  # a coroutine: see ladder._outcome
        last: Selection = state["selections"][-1]
        if last.error is not None:
            return END
        if last.level is not None:
            return names[last.level - 1]
        return SELECTOR if len(state["selections"]) < m else END

    async def after_attempt(state: LadderState) -> str:
        last = state["attempts"][-1]
        if last.resolved or last.error is not None or len(state["selections"]) >= m:
            return END
        return SELECTOR

    graph.add_node(SELECTOR, select)
    for level, name in enumerate(names, 1):
        graph.add_node(name, _node(level, name, runtime, iteration_from=SELECTOR))
        graph.add_conditional_edges(name, after_attempt, {END: END, SELECTOR: SELECTOR})
    graph.add_edge(START, SELECTOR)
    graph.add_conditional_edges(
        SELECTOR, route, {**{n: n for n in names}, SELECTOR: SELECTOR, END: END}
    )
    return graph.compile()


def adaptive_recursion_limit(levels: int) -> int:
    return 2 * levels + 5
