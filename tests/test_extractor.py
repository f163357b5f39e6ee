"""--extractor-model: a model states each completion's final answer, which decides instead of
the rule reader; both readings are recorded and the summary says how often they disagree."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from hpt.backends import GenerationParams
from hpt.orchestrator import RunSpec, run_evaluation
from hpt.results import Attempt, Reading
from hpt.results.records import SampleRecord
from hpt.results.tally import summarize
from hpt.tasks import get_task
from hpt.tasks.extractor import AnswerExtractor
from tests.servers.answer_key import boolq_answer_key
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_cli import hpt, records, run_args
from tests.test_ladder import Scripted

ASKED = "What final answer does the response give?"


def test_the_prompt_is_short_and_names_the_canonical_form(data_dir: Path) -> None:
    extractor = AnswerExtractor(Scripted("True", None), GenerationParams(temperature=0.6))
    assert extractor.params.temperature == 0.0 and not extractor.params.logprobs
    for name, form in (
        ("boolq", "True or False"),
        ("gsm8k", "number"),
        ("csqa", "A, B, C, D or E"),
    ):
        task = get_task(name, data_dir)
        sample = task.load_samples()[0]
        (message,) = extractor.messages(task, sample, "Some completion.")
        assert ASKED in message.content and form in message.content
        assert "Response: Some completion." in message.content
    assert not extractor.applies_to(get_task("humaneval", data_dir))


def test_extractor_decides_and_both_readings_are_kept(
    fake_openai: Any, data_dir: Path, tmp_path: Path
) -> None:
    fake, server = fake_openai
    task = get_task("boolq", data_dir)
    key = boolq_answer_key(task.load_samples())
    extracted: list[str] = []

    def responder(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if ASKED in prompt:
            # The extractor reads the completion's hedged prose as the gold answer.
            question = prompt.split('to the question: "', 1)[1].split('"', 1)[0]
            extracted.append(question)
            return key[question] if len(extracted) % 2 else "none"
        return "Hmm, the passage settles it, I think."  # no truth word: the rule reader gives None

    fake.responder = responder
    out = tmp_path / "run"
    result = hpt(*run_args(server, data_dir, out, "--limit", "4", "--strategies", "role",
                           "--extractor-model", "openai:test-model"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    recs = records(out)
    assert len(recs) == 4 and len(extracted) == 4
    attempts = [r["attempts"][0] for r in recs]
    for a in attempts:
        assert [c["purpose"] for c in a["calls"]] == ["answer", "extract"]
        assert a["alternatives"]["rule"] == {"parsed": None, "resolved": False}
    # Two replies named the gold answer (resolved), two said "none" (unresolved).
    assert sorted(a["resolved"] for a in attempts) == [False, False, True, True]
    assert sum(a["parsed"] is None for a in attempts) == 2
    cell = json.loads((out / "summary.json").read_text())["cells"][0]
    rule = cell["readings"]["rule"]
    assert (rule["attempts"], rule["disagreements"], rule["resolved_flips"]) == (4, 2, 2)
    assert rule["level1_accuracy"] == 0 and cell["level1_accuracy"] == 0.5
    assert "rule reader disagrees" in result.stdout

    # Cached like every call: the same run again asks nothing.
    served = fake.served
    again = hpt(*run_args(server, data_dir, tmp_path / "again", "--limit", "4", "--strategies",
                          "role", "--extractor-model", "openai:test-model"))  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert fake.served == served


def _cut_off_answers(reply: str, given: list[str]) -> ServerThread:
    """The fake OpenAI server: answer calls get ``reply``, cut off at the token limit
    (finish_reason "length", as vLLM sends it); extractor calls finish, and ``given``
    collects the response each was shown. The extractor reads the last truth word it is
    shown, so a reading of the unfinished tail shows."""

    def responder(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if ASKED not in prompt:
            return reply
        shown = prompt.split("Response: ", 1)[1].rsplit("\n\n" + ASKED, 1)[0]
        given.append(shown)
        return "False" if shown.rstrip().endswith("Fal") else "True"

    @web.middleware
    async def cut_off(request: web.Request, handler: Any) -> web.StreamResponse:
        response = await handler(request)
        if not request.path.endswith("/chat/completions"):
            return response
        if ASKED in (await request.json())["messages"][-1]["content"]:
            return response
        assert isinstance(response, web.Response) and response.body is not None
        answer = json.loads(bytes(response.body))  # type: ignore[arg-type]
        for choice in answer["choices"]:
            choice["finish_reason"] = "length"
        return web.json_response(answer, status=response.status)

    app = FakeOpenAI(responder=responder).app()
    app.middlewares.append(cut_off)
    return ServerThread(app).start()


@pytest.mark.parametrize(
    ("reply", "shown", "parsed", "detail"),
    [
        # Cut off mid-word: the rule reader reads the whole part, for the record.
        (
            "The passage says so plainly.\nThe answer is True.\nOn second thought, Fal",
            None,
            "True",
            "cut off",
        ),
        # Cut off repeating itself: nothing to read.
        ("Let me see.\n" + "The answer is True.\n" * 12 + "The ans", None, None, "repeating loop"),
    ],
)
def test_the_extractor_is_not_asked_about_a_cut_off_reply(
    data_dir: Path, tmp_path: Path, reply: str, shown: str | None, parsed: str | None,
    detail: str,
) -> None:  # fmt: skip
    given: list[str] = []
    server = _cut_off_answers(reply, given)
    try:
        os.environ.setdefault("OPENAI_API_KEY", "test-key")
        spec = RunSpec(dataset="boolq", model="openai:test-model", base_url=server.base_url,
                       strategies=["role"], limit=1, data_dir=data_dir, out=tmp_path / "run",
                       cache=False, extractor_model="openai:test-model")  # fmt: skip
        asyncio.run(run_evaluation(spec))
    finally:
        server.stop()
    [attempt] = records(tmp_path / "run")[0]["attempts"]
    assert attempt["completion"] == reply
    assert attempt["calls"][0]["finish_reason"] == "length"
    assert given == ([] if shown is None else [shown])
    assert [c["purpose"] for c in attempt["calls"]] == ["answer"] + ["extract"] * len(given)
    assert attempt["parsed"] == parsed
    # Unresolved because cut off, whatever it reads: an extractor's call would change nothing.
    assert attempt["detail"].startswith(detail + ": ") and not attempt["resolved"]
    assert attempt["truncated"] == "answer" and "truncated" in attempt["detail"]


def test_reading_summary_by_hand() -> None:
    def attempt(level: int, parsed: str | None, resolved: bool, other: Reading) -> Attempt:
        return Attempt(level=level, strategy="s", parsed=parsed, resolved=resolved,
                       alternatives={"strict": other})  # fmt: skip

    def record(sid: str, level: int | None, attempts: list[Attempt]) -> SampleRecord:
        return SampleRecord(sample_id=sid, dataset="gsm8k", model="m", strategies=["a", "b"],
                            m=2, penalty=2.14, target="18", resolved_level=level,
                            hpi_score=level or 4.14, attempts=attempts)  # fmt: skip

    recs = [
        # agree at level 1, resolved
        record("a", 1, [attempt(1, "18", True, Reading(parsed="18", resolved=True))]),
        # the strict reader finds nothing at level 1 (flexible resolved): a flip
        record("b", 1, [attempt(1, "18", True, Reading(parsed=None, resolved=False))]),
        # both wrong but different at level 1, then agree at level 2
        record("c", 2, [attempt(1, "7", False, Reading(parsed="30", resolved=False)),
                        attempt(2, "18", True, Reading(parsed="18", resolved=True))]),
    ]  # fmt: skip
    s = summarize(recs, dataset="gsm8k", model="m", mode="standard", m=2, penalty=2.14)
    strict = s.readings["strict"]
    assert (strict.attempts, strict.disagreements, strict.resolved_flips) == (4, 2, 1)
    assert strict.disagreement_rate == 0.5
    assert strict.level1_accuracy == 1 / 3 and s.level1_accuracy == 2 / 3
