"""Prompts laid out for provider prompt caches: every message hpt renders from a template says
how many of its leading characters are the same for every sample (``Message.shared_prefix``:
the text before the first field that is the sample's), on real samples of several datasets,
through the strategies, the adaptive selector, the answer extractor and the DepthQA judge.
The number is never saved and never part of a cache key, and the papers' texts are the ones
rendered before it existed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from hpt.backends import Completion, GenerationParams, Message
from hpt.backends.cache import cache_key
from hpt.graphs import STRATEGIES, LadderRuntime, StrategyContext, build_ladder
from hpt.graphs.adaptive import adaptive_recursion_limit, build_adaptive
from hpt.results.records import SampleRecord
from hpt.tasks import Sample, Task, get_task
from hpt.tasks.depthqa.answering import AnswerMemo, DepthJudge
from hpt.tasks.extractor import AnswerExtractor

LADDER = ["role", "zero_shot_cot", "three_shot_cot", "least_to_most", "generated_knowledge"]
REPLY = "Hmm."  # every model answer: per-sample text where a later prompt quotes it
SELECTOR_OPENING = "Choose the most effective prompting strategy"


class _Recorder:
    """A backend that keeps the messages it is sent, as sent (marks included)."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[list[Message]] = []

    async def complete(
        self, messages: list[Message], params: GenerationParams, *, cache_seed: str = ""
    ) -> Completion:
        self.seen.append(list(messages))
        last = messages[-1].content
        if last.startswith(SELECTOR_OPENING):  # level 1, then level 2
            return Completion(text="2" if "Already tried" in last else "1")
        if last.startswith("###Task Description"):
            return Completion(text="Feedback: fine. [RESULT] 4")
        return Completion(text=REPLY)

    async def check(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


def _twins(task: Task) -> tuple[Sample, Sample]:
    """Two different samples shown the same three-shot exemplars (an MMLU subject's, a
    MedCalc calculator's)."""
    samples, pool = task.load_samples(), task.load_exemplar_pool()

    def shots(s: Sample) -> list[str]:
        return [e.id for e in task.exemplars_for(s, pool)] if pool else []

    first = samples[0]
    return first, next(s for s in samples[1:] if shots(s) == shots(first))


async def _prompts(task: Task, sample: Sample) -> dict[str, list[list[Message]]]:
    """Every call each prompt makes for ``sample``, by strategy (or "selector", "extractor",
    "judge"), as the backend received them."""
    out: dict[str, list[list[Message]]] = {}
    strategies = LADDER if task.kind != "depth" else ["role", "depth_zero_shot"]
    for name in strategies:
        model = _Recorder()
        ctx = StrategyContext(sample=sample, task=task, level=1, model=model,
                              knowledge_model=model, params=GenerationParams(),
                              exemplar_pool=task.load_exemplar_pool(), previous=[])  # fmt: skip
        await STRATEGIES[name](ctx)
        out[name] = model.seen
    selector = _Recorder()
    if task.needs_judge:
        task.bind_judge(selector, GenerationParams())
    runtime = LadderRuntime(task, selector, selector, GenerationParams(), [])
    graph = build_adaptive(strategies[:2], runtime, selector)
    limit = adaptive_recursion_limit(2)
    await graph.ainvoke({"sample": sample, "attempts": []}, {"recursion_limit": limit})
    out["selector"] = [m for m in selector.seen if m[-1].content.startswith(SELECTOR_OPENING)]
    if task.kind == "depth":
        judge = _Recorder()
        question = str(sample.fields["question"])
        await DepthJudge(judge, GenerationParams(), task.prompts, AnswerMemo()).judge(
            question, "An answer.", sample.target, "seed"
        )
        out["judge"] = judge.seen
    else:
        extractor = AnswerExtractor(_Recorder(), GenerationParams())
        if extractor.applies_to(task):
            out["extractor"] = [extractor.messages(task, sample, "The answer is 4.")]
    return out


def _digest(calls: Sequence[Sequence[Message]]) -> str:
    texts = [[(m.role, m.content) for m in messages] for messages in calls]
    return hashlib.sha256(json.dumps(texts).encode()).hexdigest()[:16]


def _per_sample_texts(sample: Sample, twin: Sample) -> list[str]:
    """What only this sample's prompts hold: its long field values that its twin's differ
    from (MedCalc's question is its calculator's, shown in the exemplars too), the model's
    replies (quoted by least-to-most and generated knowledge), the extractor's completion."""
    own = [*sample.fields.items(), ("target", sample.target)]
    theirs = {**twin.fields, "target": twin.target}
    values = [v for k, v in own if isinstance(v, str) and len(v) >= 20 and v != theirs.get(k)]
    return [*values, REPLY, "The answer is 4.", "An answer."]


def _follows_per_sample_text(message: Message, sample: Sample) -> bool:
    """Whether the text right after the shared prefix is the sample's own (a field value,
    an option list, a reply), i.e. the prefix stops right before it."""
    rest = message.content[message.shared_prefix or 0 :]
    values = [v for v in sample.fields.values() if isinstance(v, str)]
    if any(rest.startswith(t) for t in [*values, REPLY, "The answer is 4.", "An answer."]):
        return True
    options = sample.fields.get("options")
    return isinstance(options, list) and rest.lstrip().startswith(str(options[0][0]))


DATASETS = ["gsm8k", "mmlu", "boolq", "humaneval", "csqa", "medcalc", "samsum", "depthqa"]


@pytest.mark.parametrize("dataset", DATASETS)
async def test_shared_prefixes_on_real_samples(dataset: str, data_dir: Path) -> None:
    task = get_task(dataset, data_dir)
    a, b = _twins(task)
    first, second = await _prompts(task, a), await _prompts(task, b)
    assert first.keys() == second.keys()
    for name, calls in first.items():
        assert len(calls) == len(second[name]) > 0, name
        for call, other in zip(calls, second[name], strict=True):
            for m, n in zip(call, other, strict=True):
                where = f"{dataset} {name} {m.role}: {m.content[:60]!r}"
                if m.role == "assistant":  # the model's own words: nothing rendered
                    assert m.shared_prefix is None, where
                    continue
                assert m.shared_prefix is not None and n.shared_prefix is not None, where
                # The same prefix for both samples, and each sample's text starts after it.
                assert m.shared_prefix == n.shared_prefix, where
                assert m.content[: m.shared_prefix] == n.content[: n.shared_prefix], where
                if m.role == "system":
                    assert m.shared_prefix == len(m.content) == len(n.content), where
                    continue
                for own, sample, twin in ((m, a, b), (n, b, a)):
                    for text in _per_sample_texts(sample, twin):
                        found = own.content.find(text)
                        assert found < 0 or found >= (own.shared_prefix or 0), where
                    assert _follows_per_sample_text(own, sample), where
        # The prompt's opening (its first call's last message, the one a cache reuses most).
        assert calls[0][-1].shared_prefix, f"{dataset} {name}: no shared opening"


async def test_what_is_shared_where(data_dir: Path) -> None:
    """The shared prefixes, checked against the templates' own text."""
    gsm8k = get_task("gsm8k", data_dir)
    sample = gsm8k.load_samples()[0]
    got = await _prompts(gsm8k, sample)

    def opening(name: str) -> str:
        message = got[name][0][-1]
        return message.content[: message.shared_prefix]

    assert opening("role") == 'Based on the question: "'
    # The three exemplars (fixed for GSM8K) lead the three-shot prompt and are shared.
    three = opening("three_shot_cot")
    lead = ' Based on the question: "'
    full = got["three_shot_cot"][0][-1].content
    assert three == full[: full.index(lead + str(sample.fields["question"])) + len(lead)]
    assert three.count('Answer: "') == 3
    # The selector's instructions and the ladder's descriptions come before the task.
    selector = opening("selector")
    assert selector.startswith(SELECTOR_OPENING) and "2. Zero-shot Chain of Thought" in selector
    assert selector.endswith('\n\nTask: "Based on the question: "')
    assert (
        opening("extractor")
        == 'Here is a task and a response to it.\n\nTask: Based on the question: "'
    )
    depth = get_task("depthqa", data_dir)
    judged = (await _prompts(depth, depth.load_samples()[0]))["judge"][0]
    assert judged[0].role == "system" and judged[0].shared_prefix == len(judged[0].content)
    user = judged[1].content[: judged[1].shared_prefix]
    assert user.startswith("###Task Description:") and user.endswith(
        "###The instruction to evaluate:\n"
    )
    # The rubric follows the answer in the paper's prompt: shared text not in the prefix.
    assert "###Score Rubrics:" in judged[1].content[len(user) :]


async def test_marks_are_never_saved_nor_keyed(data_dir: Path) -> None:
    """A climb's records (standard and adaptive) hold the messages it sent, marked as they
    were, and say nothing of the marks; a cache key is the same with or without them."""
    task = get_task("gsm8k", data_dir)
    sample = task.load_samples()[0]
    model = _Recorder()
    runtime = LadderRuntime(task, model, model, GenerationParams(), task.load_exemplar_pool())
    standard = await build_ladder(LADDER, runtime).ainvoke(
        {"sample": sample, "attempts": []}, {"recursion_limit": 20}
    )
    adaptive = await build_adaptive(LADDER, runtime, model).ainvoke(
        {"sample": sample, "attempts": []}, {"recursion_limit": adaptive_recursion_limit(5)}
    )
    record = SampleRecord(
        sample_id=sample.id, dataset="gsm8k", model="recorder", strategies=LADDER, m=5,
        penalty=1.0, target=sample.target, resolved_level=None, hpi_score=None,
        attempts=[*standard["attempts"], *adaptive["attempts"]],
        selections=adaptive["selections"],
    )  # fmt: skip
    sent = [m for messages in model.seen for m in messages]
    assert any(m.shared_prefix for m in sent)
    saved = [c for a in record.attempts for c in a.calls] + [
        s.call for s in record.selections if s.call
    ]
    assert sum(len(c.messages) for c in saved) == len(sent)
    assert all(m.shared_prefix is not None for c in saved for m in c.messages if m.role == "user")
    assert "shared_prefix" not in record.model_dump_json()
    assert "shared_prefix" not in json.dumps(record.model_dump(mode="json"))

    params = GenerationParams()
    for messages in model.seen:
        unmarked = [Message(role=m.role, content=m.content) for m in messages]
        keys = {
            cache_key(provider="openai", model="m", endpoint="e", params=params,
                      messages=ms, seed="s")
            for ms in (messages, unmarked)
        }  # fmt: skip
        assert len(keys) == 1


# The messages each prompt sent for each dataset's first sample (sha256 of their roles and
# texts, in order, first 16 hex digits), as the code before shared prefixes rendered them
# (commit 3f9ca3d, this module's ``_prompts`` run against it): the papers' texts, unchanged.
BEFORE: dict[str, dict[str, str]] = {
    "boolq": {
        "extractor": "a4a52c16303475c9",
        "generated_knowledge": "8b6be26a7962f9cc",
        "least_to_most": "5ff1d119760f426b",
        "role": "a4030f20b65700fa",
        "selector": "addd84fec217ac3d",
        "three_shot_cot": "620b9d56d1f1cb25",
        "zero_shot_cot": "12c9ad9bf47977cd",
    },
    "csqa": {
        "extractor": "93b20d1b78bf7c63",
        "generated_knowledge": "15b3b96fb85f3336",
        "least_to_most": "91f01a5cd263a506",
        "role": "105ce3ca69521cb3",
        "selector": "cd31fdc4ed610e6e",
        "three_shot_cot": "302cffce0a040f1e",
        "zero_shot_cot": "ae9d918866d4db8e",
    },
    "depthqa": {
        "depth_zero_shot": "9019de5b36e0619a",
        "judge": "521c72f642a04d89",
        "role": "d69cbae8bfaed227",
        "selector": "d724da04e452202c",
    },
    "gpqa": {
        "generated_knowledge": "1291e6da499670fe",
        "least_to_most": "9ef1c481ce7b5005",
        "role": "2906cb82c368a1ec",
        "selector": "82f95bc6a7d2c5ac",
        "three_shot_cot": "f5f1dbd01c6d71eb",
        "zero_shot_cot": "53fec6466b3898ca",
    },
    "gsm8k": {
        "extractor": "f536376a4f6ee9d9",
        "generated_knowledge": "35fc1cbb6d0fb4fa",
        "least_to_most": "60ea990edd5ad23d",
        "role": "db0f4d428da41991",
        "selector": "9642097f0f586166",
        "three_shot_cot": "4cfa13c7e0eeeae7",
        "zero_shot_cot": "7a23cd5aa1865805",
    },
    "humaneval": {
        "generated_knowledge": "0b4d3cd2695dbcc1",
        "least_to_most": "ee2eeebe4a2f3a0e",
        "role": "ad38462450d366d5",
        "selector": "795f3221ad81fddd",
        "three_shot_cot": "c3c0f80c9f43fc98",
        "zero_shot_cot": "33bff791e968bb60",
    },
    "iwslt": {
        "extractor": "957ee8916eae7e23",
        "generated_knowledge": "411095636d752a21",
        "least_to_most": "eab578960037c06e",
        "role": "5faa16e9a92c1fab",
        "selector": "f7d35d522d62e19f",
        "three_shot_cot": "38cd91500c684fee",
        "zero_shot_cot": "9d26f7ba3baf02a2",
    },
    "medcalc": {
        "generated_knowledge": "c9c6b61e3828ce02",
        "least_to_most": "7a5e21560593586a",
        "role": "37efd78f6cbd3d59",
        "selector": "b4d721a245760156",
        "three_shot_cot": "7189868223cd3051",
        "zero_shot_cot": "781f739fb9fa2f96",
    },
    "mmlu": {
        "extractor": "8d27d89c03308a96",
        "generated_knowledge": "d2bd47be92811b1a",
        "least_to_most": "b5e2b23697368c53",
        "role": "ecca9d22106a2e16",
        "selector": "8277d83178e7ce3b",
        "three_shot_cot": "a9e8cd7bbc8cac4a",
        "zero_shot_cot": "2bdb883105dcb443",
    },
    "mmlu_pro": {
        "generated_knowledge": "8ea06a8d32fcb35c",
        "least_to_most": "e01598cf5f2cdc89",
        "role": "36173d2d5ce37197",
        "selector": "9bcff2e929966308",
        "three_shot_cot": "6aca09344fc48a46",
        "zero_shot_cot": "5b1130b0560039b6",
    },
    "samsum": {
        "extractor": "e81cd04f69367d08",
        "generated_knowledge": "5eab365405378a1a",
        "least_to_most": "d81502ee7b8aa5c8",
        "role": "d1c26b887e35516d",
        "selector": "be8000f74f3e186e",
        "three_shot_cot": "cf9caf0f15c22831",
        "zero_shot_cot": "7cb4ad6d2f81e4d3",
    },
}


@pytest.mark.parametrize("dataset", sorted(BEFORE))
async def test_prompt_texts_are_those_rendered_before(dataset: str, data_dir: Path) -> None:
    task = get_task(dataset, data_dir)
    got = await _prompts(task, task.load_samples()[0])
    assert {name: _digest(calls) for name, calls in got.items()} == BEFORE[dataset]
