"""The generation parameters actually sent: every call records what its transport put on the
wire, and run.json says the same, per dataset (with its own defaults, as DepthQA has) and
per model (a provider may drop or rename a parameter); a resumed run sends the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import hpt
from hpt.results.reader import read_records
from hpt.tasks.boolq import BoolQ
from tests.backend_helpers import FAST_RETRY, serving
from tests.servers.answer_key import KeyedResponder
from tests.servers.openai_compat import FakeOpenAI

# A dataset with its own settings, like DepthQA's (the paper's): the run's override them.
PAPER = {"temperature": 1.0, "top_p": 0.9, "max_tokens": 1024, "repetition_penalty": 1.03}
STRATEGIES = ["role", "zero_shot_cot", "three_shot_cot"]


def _sent(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("model", "messages")}


def _calls_params(out: Path) -> list[dict[str, Any] | None]:
    return [c.params for r in read_records(out) for c in r.all_calls()]


async def test_run_json_and_calls_say_what_was_sent_for_a_dataset_with_its_own_defaults(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.setattr(BoolQ, "default_params", PAPER)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "three_shot_cot"))
    out = tmp_path / "run"
    with serving(fake.app()) as srv:
        await hpt.evaluate(
            datasets="boolq", models="openai:test-model", base_url=srv.base_url, limit=3,
            strategies=STRATEGIES, params={"max_tokens": 256}, data_dir=data_dir, out=out,
            retry=FAST_RETRY, cache=False,
        )  # fmt: skip
        expected = {**PAPER, "max_tokens": 256}
        saved = json.loads((out / "run.json").read_text())
        # The run gave max_tokens only; the dataset's own settings did the rest.
        assert saved["params"] == {"max_tokens": 256}
        generation = saved["generation"]["boolq"]
        assert {k: generation["asked"][k] for k in expected} == expected
        assert generation["sent"] == {"openai:test-model": expected}
        assert len(fake.requests) == 9
        assert all(_sent(body) == expected for body in fake.requests)
        assert _calls_params(out) == [expected] * 9

        # Resumed, the run sends the same: its dataset's settings, not the generic defaults.
        samples = out / "samples.jsonl"
        samples.write_text(samples.read_text().splitlines(keepends=True)[0])
        fake.requests.clear()
        await hpt.resume(out)
    assert len(fake.requests) == 6
    assert all(_sent(body) == expected for body in fake.requests)
    assert _calls_params(out) == [expected] * 9
    assert json.loads((out / "run.json").read_text())["generation"]["boolq"] == generation


async def test_calls_and_run_json_leave_out_what_a_provider_does_not_take(
    monkeypatch: pytest.MonkeyPatch, boolq_answers: dict[str, str], data_dir: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    # Two models on an api.openai.com-like host: no repetition penalty there, and a reasoning
    # model takes neither temperature nor top_p, and max_completion_tokens for max_tokens.
    from hpt.backends import openai_protocol

    monkeypatch.setattr(openai_protocol, "is_openai_host", lambda url: True)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake = FakeOpenAI(KeyedResponder(boolq_answers, "zero_shot_cot"),
                      model_ids=("gpt-4o-mini", "o3-mini"))  # fmt: skip
    out = tmp_path / "run"
    with serving(fake.app()) as srv:
        models = {name: {"provider": "openai", "model": name, "endpoints": [srv.base_url],
                         "retry": FAST_RETRY} for name in ("gpt-4o-mini", "o3-mini")}  # fmt: skip
        await hpt.evaluate(
            datasets="boolq", models=["gpt-4o-mini", "o3-mini"], model_configs=models,
            limit=2, strategies=STRATEGIES, data_dir=data_dir, out=out,
        )  # fmt: skip
    chat = {"temperature": 0.6, "top_p": 0.9, "max_tokens": 1024}
    reasoning = {"max_completion_tokens": 1024}
    saved = json.loads((out / "run.json").read_text())
    assert saved["params"] == {}
    assert saved["generation"]["boolq"]["sent"] == {"gpt-4o-mini": chat, "o3-mini": reasoning}
    by_model = {"gpt-4o-mini": chat, "o3-mini": reasoning}
    assert len(fake.requests) == 8
    assert all(_sent(body) == by_model[body["model"]] for body in fake.requests)
    calls = [c for r in read_records(out) for c in r.all_calls()]
    assert len(calls) == 8 and all(c.params == by_model[c.model] for c in calls)


async def test_run_json_follows_a_transport_that_adapts_during_the_run(
    data_dir: Path, tmp_path: Path
) -> None:
    # A TGI server without a chat template: hpt asks its chat route first, learns, and sends
    # every call to /generate, with TGI's own parameter names.
    from tests.servers.tgi import FakeTGI

    fake = FakeTGI(responder=lambda body: "The answer is True.", chat_template=False)
    out = tmp_path / "run"
    with serving(fake.app()) as srv:
        await hpt.evaluate(
            datasets="boolq", models=f"tgi:{srv.root_url}", limit=2, strategies=["role"],
            data_dir=data_dir, out=out, retry=FAST_RETRY,
        )  # fmt: skip
    generate = {"max_new_tokens": 1024, "do_sample": True, "temperature": 0.6, "top_p": 0.9,
                "repetition_penalty": 1.1}  # fmt: skip
    assert _calls_params(out) == [generate, generate]
    # Both samples asked the chat route at once; each was refused and sent again to /generate
    # (huggingface_hub posts it to the server's root).
    assert sorted(path for path, _ in fake.requests) == ["/", "/"] + ["/v1/chat/completions"] * 2
    sent = json.loads((out / "run.json").read_text())["generation"]["boolq"]["sent"]
    assert list(sent.values()) == [generate]
