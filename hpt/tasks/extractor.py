"""The optional LLM answer extractor: a model states a completion's final answer in the
task's canonical form, and the task's rule reader reads that short reply instead of the
completion. The rule reader's own reading is kept beside it (``alternatives["rule"]``), so a
run shows how often the two disagree. Of a reply cut off at the length limit the extractor is
shown what the rule reader reads, its whole part, and nothing of a repeating loop (the ladder
decides that: hpt.graphs.node). The extractor's own reply is its answer, without any thinking
(a reasoning extractor's is set apart by its backend); one cut off at the token limit is no
reading."""

from __future__ import annotations

from dataclasses import dataclass

from hpt.backends import Backend, Completion, GenerationParams, Message
from hpt.prompts import PromptSet
from hpt.results.records import Reading
from hpt.tasks.base import Check, Sample, Task

PURPOSE = "extract"


@dataclass(frozen=True)
class Extraction:
    check: Check
    messages: list[Message]
    result: Completion


class AnswerExtractor:
    def __init__(self, model: Backend, params: GenerationParams) -> None:
        self.model = model
        # A reading, not a sample: greedy, and no logprobs.
        self.params = params.model_copy(update={"temperature": 0.0, "logprobs": False})
        self.prompts = PromptSet.load("extractor")
        self._forms: dict[str, str] = dict(self.prompts.section("extractor").get("forms", {}))
        self._none = self.prompts.text("extractor", "none").lower()

    def applies_to(self, task: Task) -> bool:
        return task.name in self._forms

    def messages(self, task: Task, sample: Sample, completion: str) -> list[Message]:
        asked = task.prompts.rendered("role", task.prompts.text("role", "user"), sample.fields)
        # {form} is the dataset's: the same for all its samples.
        rendered = self.prompts.rendered(
            "extractor",
            self.prompts.text("extractor", "user"),
            {"task": asked, "completion": completion, "form": self._forms[task.name]},
            shared={"form"},
        )
        return [rendered.message("user")]

    async def extract(
        self, task: Task, sample: Sample, completion: str, rule: Check, cache_seed: str
    ) -> Extraction:
        """The extractor's check of ``completion``; ``rule`` is the rule reader's, kept as
        the "rule" alternative."""
        messages = self.messages(task, sample, completion)
        result = await self.model.complete(messages, self.params, cache_seed=cache_seed)
        reply = result.text.strip()
        if result.truncated:
            # Its short reply unfinished ("4" of "48") or missing (a reasoning extractor cut
            # off while thinking): whatever it holds is not the extractor's reading.
            where = "while thinking" if not reply else "inside its answer"
            detail = f"the extractor was cut off at the token limit {where}"
            check = Check(parsed=None, resolved=False, detail=detail)
        elif reply.strip(" .\"'*`").lower() == self._none:
            check = Check(parsed=None, resolved=False, detail="the extractor found no answer")
        else:
            check = await task.acheck(sample, reply)
        alternatives = {
            **rule.alternatives,
            "rule": Reading(parsed=rule.parsed, resolved=rule.resolved),
        }
        return Extraction(check.model_copy(update={"alternatives": alternatives}), messages, result)
