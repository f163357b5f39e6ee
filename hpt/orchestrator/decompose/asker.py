"""The build's calls to the model, each checkpointed: reference answers (tables 20 and 21) and
sub-questions read from the model's JSON (tables 23-26), with the state every phase of the build
shares (``Builder`` in ``builder.py`` adds the phases)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from hpt.backends import BackendError, FatalBackendError, ManagedBackend, Message
from hpt.backends.embeddings import Embedder
from hpt.orchestrator.decompose.dedup import Dedup
from hpt.orchestrator.decompose.items import Item
from hpt.orchestrator.decompose.logs import Asking, ReplyLog, StateLog, fingerprint
from hpt.orchestrator.decompose.messages import (
    answer_messages,
    d3_answer_messages,
    generate_messages,
)
from hpt.orchestrator.decompose.reply_json import parse_questions
from hpt.orchestrator.decompose.settings import JSON_ATTEMPTS, DecomposeSpec, Note
from hpt.orchestrator.decompose.sources import SourceQuestion
from hpt.orchestrator.decompose.summary import Failure
from hpt.prompts import PromptSet

EMPTY_REPLY = "the model's reply was empty"


class Asker:
    """The build's state (the questions made so far, their answers, what deduplication
    decided, what failed) and its checkpointed calls to the model."""

    def __init__(
        self,
        spec: DecomposeSpec,
        prompts: PromptSet,
        model: ManagedBackend,
        embedder: Embedder | None,
        state: StateLog,
        replies: ReplyLog,
        note: Note,
    ) -> None:
        self.spec = spec
        self.prompts = prompts
        self.model = model
        self.embedder = embedder
        self.state = state
        self.replies = replies
        self.note = note
        self.slots = asyncio.Semaphore(spec.concurrency)
        self.items: dict[str, Item] = {}
        self.sources: dict[str, SourceQuestion] = {}
        # Reference answers by (depth, question text): the same question is answered once.
        self.answers: dict[tuple[int, str], str] = {}
        self.generations: list[dict[str, Any]] = []  # the sub-question steps this graph used
        self.failures: list[Failure] = []
        self.errors: list[str] = []
        self.dedup = Dedup()
        self.augmented = {"2": 0, "1": 0}

    async def _call(self, messages: list[Message], seed: str, asking: Asking) -> str | None:
        """The reply, or None after recording a failed call (the run goes on; a rerun tries
        it again). A fatal failure (bad key, unreachable endpoint) stops the run."""
        async with self.slots:
            try:
                completion = await self.model.complete(messages, self.spec.params, cache_seed=seed)
            except FatalBackendError:
                raise
            except BackendError as exc:
                self.errors.append(f"{asking.step}: {exc}")
                self.replies.put(asking, None, None, f"the call failed: {exc}")
                return None
        return completion.text

    async def _answer(self, item: Item) -> None:
        """A reference answer (table 20 for depth 3, 21 otherwise), once per question text."""
        key = (item.depth, item.text)
        if key in self.answers:
            return
        source = self.sources.get(item.id)
        if source is not None and source.answer and source.answer.strip():
            self.answers[key] = source.answer
            return
        if source is not None:
            messages = d3_answer_messages(self.prompts, source)
        else:
            messages = answer_messages(self.prompts, item.text)
        inputs = fingerprint([m.model_dump() for m in messages])
        step_key = fingerprint(item.depth, item.text)
        hit = self.state.get("answer", step_key, inputs)
        if hit is not None:
            self.answers[key] = str(hit["answer"])
            return
        seed = f"depthqa-decompose/answer/{step_key}"
        asking = Asking("d3_answer" if source is not None else "answer", item.id, item.text)
        reply = await self._call(messages, seed, asking)
        if reply is None:
            return
        if not reply.strip():
            self.replies.put(asking, reply, None, EMPTY_REPLY)
            self.errors.append(f"{asking.step}: {EMPTY_REPLY}")
            return
        self.replies.put(asking, reply, reply.strip(), None)
        self.state.put("answer", step_key, inputs, {"item": item.id, "answer": reply.strip()})
        self.answers[key] = reply.strip()

    def answer_of(self, item: Item) -> str | None:
        return self.answers.get((item.depth, item.text))

    async def _subquestions(
        self, parent: Item, section: str, fields: dict[str, str], limit: int
    ) -> list[str] | None:
        """Sub-questions from the model's JSON (tables 23-26), tried ``JSON_ATTEMPTS`` times.

        None when the calls failed (not checkpointed: a rerun asks again); [] when no reply
        was valid JSON of the right shape (checkpointed with the problem: the same seeds would
        get the same replies from the cache)."""
        messages = generate_messages(self.prompts, section, fields)
        inputs = fingerprint(section, [m.model_dump() for m in messages], limit)
        hit = self.state.get(section, parent.id, inputs)
        if hit is None:
            keys = self.prompts.texts(section, "keys")
            replies = 0
            parsed: list[str] | str = "no reply"
            for attempt in range(JSON_ATTEMPTS):
                seed = f"depthqa-decompose/{parent.id}/{section}/{attempt}"
                asking = Asking(section, parent.id, parent.text, attempt + 1)
                reply = await self._call(messages, seed, asking)
                if reply is None:
                    return None
                replies += 1
                parsed = parse_questions(reply, keys)
                if isinstance(parsed, str):
                    self.replies.put(asking, reply, None, parsed)
                else:
                    self.replies.put(asking, reply, parsed, None)
                    break
            payload: dict[str, Any] = {"replies": replies, "questions": [], "cut": 0}
            if isinstance(parsed, str):
                payload["problem"] = parsed
            else:
                payload["questions"] = parsed[:limit]
                payload["cut"] = max(0, len(parsed) - limit)
            hit = self.state.put(section, parent.id, inputs, payload)
        self.generations.append(hit)
        if hit.get("problem"):
            self.failures.append(
                Failure(item=parent.id, question=parent.text, step=section, problem=hit["problem"])
            )
        return [str(q) for q in hit["questions"]]

    async def _answer_all(self, items: Iterable[Item]) -> None:
        """Answers for ``items``, each distinct question once (two asking at once would
        both miss the cache)."""
        distinct = {(i.depth, i.text): i for i in items}
        await asyncio.gather(*(self._answer(i) for i in distinct.values()))
