"""Every dataset's reader on a reasoning model's completions, through the path a run takes: a
loopback OpenAI-compatible server, the OpenAI backend, ManagedBackend's inline ``<think>``
split, the ladder and the task's check, on real samples (../shared/data; hand-made hub files
for the hub-only HeadQA, MedBullets and MEDEC).

Each dataset gets five scripted completions, one per chosen sample:

- ``forward``: thinking that names a wrong answer, then the right answer: resolved, read as
  the right answer; the thinking is the call's ``reasoning``, not the attempt's completion.
- ``reverse``: thinking that names the right answer, then a wrong answer: not resolved.
- ``cut_thinking``: an unclosed ``<think>`` naming the right answer, cut off at the token
  limit (finish_reason "length"): unresolved, ``truncated == "thinking"``, nothing read.
- ``cut_answer``: thinking, then the right answer, cut off at the token limit: unresolved
  whatever it reads, ``truncated == "answer"``.
- ``lone_close``: a completion holding only the closing ``</think>`` (chat templates such as
  DeepSeek-R1's open the block in the prompt): the answer after it is read, as in ``forward``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from aiohttp import web

from hpt.orchestrator import RunSpec, run_evaluation
from hpt.tasks import Sample, Task, task_class
from tests.backend_helpers import serving
from tests.servers.answer_key import strategy_of
from tests.servers.openai_compat import FakeOpenAI
from tests.test_structured_tasks import _headqa_row, _jsonl, _medec_row

# -- a scripted reasoning model on loopback ----------------------------------------------------


class Reply(NamedTuple):
    text: str
    # Cut off at the token limit: the server says finish_reason "length".
    cut: bool = False


Script = Callable[[dict[str, Any]], Reply]
# Whether the reply being served was cut off: set by the responder, read by the middleware,
# in the request's own task.
_CUT: ContextVar[bool] = ContextVar("cut", default=False)


def reasoning_app(script: Script) -> web.Application:
    """The fake OpenAI server answering each request with ``script(body)``; a reply marked
    ``cut`` comes back with finish_reason "length", as vLLM, llama.cpp and OpenAI send a
    completion stopped by max_tokens."""

    def respond(body: dict[str, Any]) -> str:
        reply = script(body)
        _CUT.set(reply.cut)
        return reply.text

    @web.middleware
    async def cut_off(request: web.Request, handler: Any) -> web.StreamResponse:
        _CUT.set(False)
        response = await handler(request)
        if not _CUT.get() or not isinstance(response, web.Response) or response.body is None:
            return response
        body = json.loads(bytes(response.body))  # type: ignore[arg-type]
        for choice in body["choices"]:
            choice["finish_reason"] = "length"
        return web.json_response(body, status=response.status)

    app = FakeOpenAI(responder=respond).app()
    app.middlewares.append(cut_off)
    return app


KEY_ENV = "HPT_REASONING_TEST_KEY"


def reasoner(url: str, **config: Any) -> dict[str, Any]:
    """The scripted model as a config file's [models.NAME] entry (``think_tags=[]``: the old
    reading, every completion whole)."""
    os.environ.setdefault(KEY_ENV, "test-key")
    return {"provider": "openai", "model": "test-model", "endpoints": [url],
            "api_key_env": KEY_ENV, **config}  # fmt: skip


def _flat(text: str) -> str:
    return " ".join(text.split())


def sample_of(body: dict[str, Any], samples: Sequence[Sample]) -> Sample:
    """The sample a request asks about: the one whose text fields all appear in its prompt."""
    prompt = _flat(" ".join(m["content"] for m in body["messages"]))
    found = [
        s for s in samples
        if all(_flat(v) in prompt for v in s.fields.values() if isinstance(v, str))
    ]  # fmt: skip
    if len(found) != 1:
        raise AssertionError(f"{len(found)} samples match the prompt {prompt[:200]!r}")
    return found[0]


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


# -- what each dataset's model says ---------------------------------------------------------


@dataclass(frozen=True)
class Answers:
    """One sample's right and wrong answers as a model writes them after its thinking."""

    right: str
    wrong: str
    # What the reader takes from ``wrong``; None where the reading is the text itself
    # (code, translations, summaries).
    wrong_read: str | None = None


def _choice(sample: Sample) -> Answers:
    labels = [label for label, _ in sample.fields["options"]]  # type: ignore[misc, union-attr]
    other = next(label for label in labels if label != sample.target)
    return Answers(f"The answer is ({sample.target}).", f"The answer is ({other}).", other)


def _gsm8k(sample: Sample) -> Answers:
    wrong = str(int(sample.target) + 7)
    # As in issue 26: the thinking concludes one number, the answer is a bare bold other one.
    return Answers(f"**{sample.target}**", f"So the answer is {wrong}.", wrong)


def _boolq(sample: Sample) -> Answers:
    other = "False" if sample.target == "True" else "True"
    return Answers(f"The answer is {sample.target}.", f"The answer is {other}.", other)


def _medcalc(sample: Sample) -> Answers:
    truth, kind = sample.target, sample.meta["kind"]
    if kind == "date":
        month, day, year = truth.split("/")
        wrong = f"{month}/{day}/{int(year) + 1}"
    elif kind == "weeks_days":
        weeks, days = (int(n) for n in truth.strip("()").replace("weeks", "").replace(
            "days", "").split(","))  # fmt: skip
        wrong = f"({weeks + 3} weeks, {days} days)"
    elif kind == "integer":
        wrong = str(int(truth) + 5)
    else:  # decimal: well above the row's upper limit
        wrong = f"{float(sample.meta['upper_limit']) * 2 + 10:.2f}"
    return Answers(f"The answer is {truth}.", f"The answer is {wrong}.", wrong)


MEDEC_SAYS = {"CORRECT": "The note is correct.", "ERROR": "The note contains a medical error."}


def _medec(sample: Sample) -> Answers:
    other = "CORRECT" if sample.target == "ERROR" else "ERROR"
    return Answers(MEDEC_SAYS[sample.target], MEDEC_SAYS[other], other)


def _humaneval(sample: Sample) -> Answers:
    code = str(sample.fields["code"])
    return Answers(f"```python\n{code}{sample.target}```",
                   f"```python\n{code}    return None\n```")  # fmt: skip


def _text(sample: Sample) -> Answers:
    return Answers(sample.target, "Sorry, I cannot help with that today.")


ANSWERS: dict[str, Callable[[Sample], Answers]] = {
    "gsm8k": _gsm8k, "boolq": _boolq, "medcalc": _medcalc, "medec": _medec,
    "humaneval": _humaneval, "iwslt": _text, "samsum": _text,
    **{name: _choice for name in ("mmlu", "mmlu_pro", "csqa", "gpqa", "headqa", "medbullets")},
}  # fmt: skip


def thought(named: str) -> str:
    return f"Let me work through it.\n{named}\nHmm, let me check that once more."


CASES = ("forward", "reverse", "cut_thinking", "cut_answer", "lone_close")


def completion(case: str, a: Answers) -> Reply:
    """The completion of ``case`` (see the module) for a sample answered by ``a``."""
    if case == "forward":
        return Reply(f"<think>{thought(a.wrong)}</think>\n\n{a.right}")
    if case == "reverse":
        return Reply(f"<think>{thought(a.right)}</think>\n\n{a.wrong}")
    if case == "cut_thinking":
        return Reply(f"<think>Let me work through it.\n{a.right}\nThat is because", cut=True)
    if case == "cut_answer":
        return Reply(f"<think>{thought(a.wrong)}</think>\n\n{a.right}", cut=True)
    assert case == "lone_close"
    return Reply(f"{thought(a.wrong)}</think>\n\n{a.right}")


# -- the datasets' samples --------------------------------------------------------------------

HUB_ONLY = ("headqa", "medbullets", "medec")


def hub_files(root: Path, name: str) -> Path:
    """Hub-shaped files of a dataset shared/data has no copy of (as tests/test_structured_tasks
    writes them), each sample's text its own, so a prompt names its sample."""
    if name == "headqa":
        _jsonl(root / "headqa" / "test.jsonl",
               [_headqa_row(q, 1 + q % 4, "medicine") for q in range(1, 9)])  # fmt: skip
        _jsonl(root / "headqa" / "train.jsonl",
               [_headqa_row(100 + q, 2, "medicine") for q in range(4)])  # fmt: skip
    elif name == "medbullets":
        rows = [
            {"idx": f"q{i}", "question": f"A patient {i} presents with fever {i}?",
             "answer": "BCDA"[i % 4], "explanation": "why", "link": "",
             "options": {"A": "a", "B": "b", "C": "c", "D": "d", "E": None}}
            for i in range(40)
        ]  # fmt: skip
        _jsonl(root / "medbullets" / "test.jsonl", rows)
    else:
        rows = []
        for i in range(10):
            row = _medec_row(i, i % 2)
            row["Sentences"] = f"0 Patient {i} is a man.\n1 He has flu.\n2 Give insulin."
            rows.append(row)
        _jsonl(root / "medec" / "test.jsonl", rows[:7])
        _jsonl(root / "medec" / "train.jsonl", rows[7:])
    return root


def data_for(name: str, data_dir: Path, tmp_path: Path) -> Path:
    return hub_files(tmp_path / "hub", name) if name in HUB_ONLY else data_dir


def chosen(name: str, data: Path, limit: int) -> tuple[Task, list[Sample]]:
    """The task and the samples a run with ``limit`` (seed 0) evaluates, in its order."""
    task = task_class(name)(data)
    return task, task.choose(task.load_samples(), limit, 0)


def run(data: Path, out: Path, name: str, model: dict[str, Any], **spec: Any) -> list[dict]:
    """One run of ``name`` on the scripted model; its records."""
    if name in ("iwslt", "samsum"):
        spec.setdefault("threshold", [0.2])
    run_spec = RunSpec.model_validate({
        "dataset": name, "model": "reasoner", "models": {"reasoner": model},
        "strategies": ["role"], "data_dir": data, "out": out, "cache": False, **spec,
    })  # fmt: skip
    asyncio.run(run_evaluation(run_spec))
    return records(out)


# -- the readers --------------------------------------------------------------------------------

DATASETS = ("gsm8k", "mmlu", "mmlu_pro", "boolq", "csqa", "gpqa", "medcalc", "humaneval",
            "iwslt", "samsum", "headqa", "medbullets", "medec")  # fmt: skip


def test_every_dataset_with_a_reader_is_covered() -> None:
    from hpt.tasks import TASKS

    builtin = {name for name, cls in TASKS.items() if cls.__module__.startswith("hpt.")}
    # DepthQA's answers are judged by a model: tests/test_reasoning_instruments.py.
    assert builtin - {"depthqa"} == set(DATASETS) == set(ANSWERS)


@pytest.mark.parametrize("name", DATASETS)
def test_a_reader_reads_the_answer_not_the_thinking(
    name: str, data_dir: Path, tmp_path: Path
) -> None:
    data = data_for(name, data_dir, tmp_path)
    task, samples = chosen(name, data, len(CASES))
    case_of = {s.id: case for s, case in zip(samples, CASES, strict=True)}
    answers = {s.id: ANSWERS[name](s) for s in samples}
    replies = {s.id: completion(case_of[s.id], answers[s.id]) for s in samples}

    def script(body: dict[str, Any]) -> Reply:
        return replies[sample_of(body, samples).id]

    with serving(reasoning_app(script)) as server:
        recs = run(data, tmp_path / "run", name, reasoner(server.base_url), limit=len(CASES))
    assert {r["sample_id"] for r in recs} == set(case_of)
    for record in recs:
        sid, case = record["sample_id"], case_of[record["sample_id"]]
        [attempt] = record["attempts"]
        [call] = [c for c in attempt["calls"] if c["purpose"] == "answer"]
        a, reply = answers[sid], replies[sid]
        where = f"{name} {case} ({sid}): {attempt.get('detail')}"
        if case in ("forward", "lone_close"):
            assert attempt["resolved"], where
            assert record["resolved_level"] == 1, where
            if task.kind == "answer":
                assert attempt["parsed"] == record["target"], where
            assert attempt["completion"] == a.right, where
            assert call["reasoning"] == thought(a.wrong), where
            assert "truncated" not in attempt, where
        elif case == "reverse":
            assert not attempt["resolved"], where
            if a.wrong_read is not None:
                assert attempt["parsed"] == a.wrong_read, where
            assert attempt["completion"] == a.wrong, where
            assert call["reasoning"] == thought(a.right), where
        elif case == "cut_thinking":
            assert (attempt["resolved"], attempt["truncated"]) == (False, "thinking"), where
            assert attempt["completion"] == "" and call["finish_reason"] == "length", where
            assert attempt["parsed"] is None, where
            assert call["reasoning"] == reply.text.removeprefix("<think>").strip(), where
            # One reason: the cut, not a reader's account of the empty answer it read.
            assert attempt["detail"].startswith("truncated: cut off at the token limit while "
                                                "thinking"), where  # fmt: skip
            assert "cut off: at the length limit" not in attempt["detail"], where
        else:
            assert (attempt["resolved"], attempt["truncated"]) == (False, "answer"), where
            assert attempt["completion"] == a.right, where
            assert "inside its answer" in attempt["detail"], where
            # No other reader resolves a cut answer either (GSM8K's strict reader, ...).
            assert not any(r["resolved"] for r in attempt["alternatives"].values()), where
        if not (case == "forward" or case == "lone_close"):
            assert record["resolved_level"] is None, where


@pytest.mark.parametrize(
    ("answer", "read"),
    [
        ("**48**", "48"),
        ("*48*", "48"),
        ("Total: **48**", "48"),
        ("She sleeps **48** hours.", "48"),
        # A "*" between operands is still a multiplication, not emphasis.
        ("It is 6 * 8", None),
        ("It is 6 *", None),
        ("(6)*8", None),
        ("6 * 8 = 48", "48"),
    ],
)
def test_a_bare_bold_number_is_an_answer(answer: str, read: str | None, data_dir: Path) -> None:
    """What a reasoning model writes after its thinking is often the number alone, in bold
    (issue 26's "**42**"): GSM8K's reader took the emphasis for a multiplication sign and
    read nothing."""
    task, [sample] = chosen("gsm8k", data_dir, 1)
    assert task.check(sample, answer).parsed == read


def test_a_code_body_after_thinking_keeps_its_indentation(data_dir: Path, tmp_path: Path) -> None:
    """HumanEval's completion form, the function body that continues the prompt, after a
    thinking block: resolved, as it is without one (the split once stripped the answer, and
    with it the body's indentation: a body at column 0)."""
    _, [sample] = chosen("humaneval", data_dir, 1)
    body = f"<think>{thought('    return None')}</think>\n{sample.target}"
    with serving(reasoning_app(lambda _: Reply(body))) as server:
        [record] = run(data_dir, tmp_path / "run", "humaneval", reasoner(server.base_url),
                       limit=1)  # fmt: skip
    assert record["attempts"][0]["completion"] == sample.target.rstrip()
    assert record["resolved_level"] == 1, record["attempts"][0]["detail"]


def test_the_old_whole_reading_was_wrong_where_the_new_one_is_right(
    data_dir: Path, tmp_path: Path
) -> None:
    """The contrast that makes the tests above able to fail: the same GSM8K completions read
    whole (``think_tags = []``, as hpt read every completion before) resolve the thinking's
    number, not the answer's."""
    _, samples = chosen("gsm8k", data_dir, 2)
    forward, reverse = (completion(case, _gsm8k(s)) for case, s in
                        zip(("forward", "reverse"), samples, strict=True))  # fmt: skip
    replies = {samples[0].id: forward, samples[1].id: reverse}
    with serving(reasoning_app(lambda body: replies[sample_of(body, samples).id])) as server:
        old = run(data_dir, tmp_path / "old", "gsm8k", reasoner(server.base_url, think_tags=[]),
                  limit=2)  # fmt: skip
        new = run(data_dir, tmp_path / "new", "gsm8k", reasoner(server.base_url), limit=2)
    read = {(r["sample_id"], which): r["attempts"][0]["parsed"]
            for which, recs in (("old", old), ("new", new)) for r in recs}  # fmt: skip
    first, second = samples
    assert read[first.id, "new"] == first.target
    assert read[first.id, "old"] == str(int(first.target) + 7)  # "So the answer is N+7."
    assert read[second.id, "new"] == str(int(second.target) + 7)
    assert read[second.id, "old"] == str(int(second.target) + 7)
    assert [r["resolved_level"] for r in old] == [None, None]


def test_a_climb_passes_levels_whose_thinking_alone_was_right(
    data_dir: Path, tmp_path: Path
) -> None:
    """Through a three-level ladder: level 1 thinks the right number and answers a wrong one,
    level 2 is cut off while thinking the right one; level 3 answers it: resolved at 3."""
    _, samples = chosen("gsm8k", data_dir, 3)
    levels = {"role": "reverse", "zero_shot_cot": "cut_thinking", "three_shot_cot": "forward"}

    def script(body: dict[str, Any]) -> Reply:
        return completion(levels[strategy_of(body)], _gsm8k(sample_of(body, samples)))

    with serving(reasoning_app(script)) as server:
        recs = run(data_dir, tmp_path / "run", "gsm8k", reasoner(server.base_url), limit=3,
                   strategies=list(levels))  # fmt: skip
    assert len(recs) == 3
    for record in recs:
        assert record["resolved_level"] == 3 and record["hpi_score"] == 3.0
        first, second, third = record["attempts"]
        assert first["parsed"] == str(int(record["target"]) + 7) and not first["resolved"]
        assert (second["truncated"], second["parsed"]) == ("thinking", None)
        assert third["parsed"] == record["target"] and third["resolved"]


def test_a_cut_answer_resolves_for_no_reader(data_dir: Path, tmp_path: Path) -> None:
    """A reply that states its answer, then rambles until the token limit cuts it: whatever
    GSM8K's readers read in it, none resolves it, so the strict reader's comparison counts no
    flip that is only the cut."""
    _, [sample] = chosen("gsm8k", data_dir, 1)
    text = f"The answer is {sample.target}.\n#### {sample.target}\nLet me also check that again"
    with serving(reasoning_app(lambda _: Reply(text, cut=True))) as server:
        [record] = run(data_dir, tmp_path / "run", "gsm8k", reasoner(server.base_url), limit=1,
                       strategies=["role"])  # fmt: skip
    [attempt] = record["attempts"]
    assert (attempt["resolved"], attempt["truncated"]) == (False, "answer")
    assert attempt["parsed"] == sample.target and attempt["alternatives"]["strict"]["parsed"]
    assert not attempt["alternatives"]["strict"]["resolved"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["cells"][0]["readings"]["strict"]["resolved_flips"] == 0
