"""How DepthQA asks and judges: the paper's prompts (tables 27-30) built from the graph, one
answer per distinct prompt however many nodes or modes need it, and the 1-5 judge.

Answers are keyed by what was asked, not by which node asked: a predecessor's zero-shot
answer that prompt-pred and multi-turn reuse is the very call its own zero-shot record made,
made once, whatever order the nodes are listed or run in."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass

from hpt.backends import Backend, Completion, GenerationParams, Message
from hpt.prompts import PromptSet
from hpt.results.records import Call, Verdict
from hpt.tasks.depthqa.judging import parse_judgement

# The inference modes by their --depth-mode names, and the strategy each one runs.
DEPTH_MODES = {
    "zero-shot": "depth_zero_shot",
    "prompt-gold": "depth_gold",
    "prompt-pred": "depth_pred",
    "multi-turn": "depth_multi_turn",
}
SECTION = "depth"
JUDGE = "judge"
# A reply without a valid [RESULT] is asked for again this many times in all, then missing.
JUDGE_ATTEMPTS = 3


class AnswerMemo:
    """One call per distinct (model, messages, params, seed), shared by everyone who asks
    while it runs and after; the response cache keeps it across runs."""

    def __init__(self) -> None:
        self._calls: dict[str, asyncio.Future[Completion]] = {}

    async def complete(
        self, model: Backend, messages: list[Message], params: GenerationParams, seed: str
    ) -> tuple[Completion, bool]:
        """The completion, and whether it was reused (no model call made for this asker)."""
        key = json.dumps(
            [model.name, seed, params.model_dump(mode="json"),
             [m.model_dump(mode="json") for m in messages]],
            sort_keys=True,
        )  # fmt: skip
        known = self._calls.get(key)
        if known is not None:
            return await asyncio.shield(known), True
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._calls[key] = future
        try:
            result = await model.complete(messages, params, cache_seed=seed)
        except BaseException as exc:
            del self._calls[key]  # a failed call is not an answer; the next asker tries again
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        future.set_result(result)
        return result, False


@dataclass
class Asked:
    """One answering call as a record shows it."""

    messages: list[Message]
    completion: Completion
    reused: bool

    def call(self, purpose: str, model: str) -> Call:
        record = Call.of(purpose, model, self.messages, self.completion)
        return record.model_copy(update={"cached": True}) if self.reused else record


class DepthPrompts:
    """The four modes' messages (tables 27-29)."""

    def __init__(self, prompts: PromptSet) -> None:
        self.prompts = prompts
        self.system = prompts.constant(SECTION, "system").message("system")

    def _render(self, key: str, **fields: str) -> Message:
        rendered = self.prompts.rendered(SECTION, self.prompts.text(SECTION, key), fields)
        return rendered.message("user")

    def zero_shot(self, question: str) -> list[Message]:
        return [self.system, self._render("zero_shot", question=question)]

    def with_pairs(self, question: str, pairs: Sequence[tuple[str, str]]) -> list[Message]:
        """Table 28; a node without predecessors is asked zero-shot (the same call)."""
        if not pairs:
            return self.zero_shot(question)
        pair = self.prompts.text(SECTION, "pair")
        lines = "\n".join(self.prompts.render(SECTION, pair, {"question": q, "answer": a})
                          for q, a in pairs)  # fmt: skip
        return [self.system, self._render("with_pairs", pairs=lines, question=question)]

    def turn(self, question: str) -> Message:
        return self._render("zero_shot", question=question)

    def last_turn(self, question: str) -> Message:
        return self._render("last_turn", question=question)


class DepthJudge:
    """Scores an answer 1-5 against the reference answer (table 30). A reply whose last
    ``[RESULT]`` is not a score in 1..5 is asked again (at temperature 1: a greedy judge would
    repeat itself), then recorded as missing."""

    def __init__(self, model: Backend, params: GenerationParams, prompts: PromptSet,
                 memo: AnswerMemo) -> None:  # fmt: skip
        self.model = model
        self.params = params.model_copy(update={"temperature": 0.0, "logprobs": False})
        self.retry_params = params.model_copy(update={"temperature": 1.0, "logprobs": False})
        self.prompts = prompts
        self.system = prompts.constant(JUDGE, "system").message("system")
        self.memo = memo

    def messages(self, question: str, prediction: str, reference: str) -> list[Message]:
        # The rubric follows the answer in the paper's prompt: only the task description
        # before {instruction} is shared.
        user = self.prompts.rendered(JUDGE, self.prompts.text(JUDGE, "user"), {
            "instruction": question, "response": prediction, "reference_answer": reference,
        })  # fmt: skip
        return [self.system, user.message("user")]

    async def judge(
        self, question: str, prediction: str, reference: str, seed: str
    ) -> tuple[Verdict, list[Call]]:
        messages = self.messages(question, prediction, reference)
        calls: list[Call] = []
        replies: list[str] = []
        for attempt in range(JUDGE_ATTEMPTS):
            params = self.params if attempt == 0 else self.retry_params
            result, reused = await self.memo.complete(
                self.model, messages, params, f"{seed}#judge{attempt}" if attempt else seed
            )
            calls.append(Asked(messages, result, reused).call(JUDGE, self.model.name))
            replies.append(result.text)
            parsed = parse_judgement(result.text)
            if parsed.score is not None:
                return Verdict(score=parsed.score, feedback=parsed.feedback,
                               replies=replies), calls  # fmt: skip
        return Verdict(score=None, feedback="", replies=replies), calls
