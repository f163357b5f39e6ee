"""The DSPy-HELM methods as strategies (helm_baseline, dspy_predict, dspy_cot, dspy_bfrs,
dspy_mipro) on a toy dataset, against a scripted OpenAI-compatible server on loopback.

The scripted model answers "What is N plus one?" correctly only for N = 107 or when the
prompt shows the N = 107 example as a demo, so the best few-shot program is known."""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpt.orchestrator.runner import run_evaluation
from hpt.orchestrator.spec import RunSpec
from hpt.structured.runtime import OptimisationError
from tests.servers.openai_compat import FakeOpenAI, ServerThread

pytestmark = pytest.mark.dspy

TOY = '''
"""A toy dataset for the DSPy strategies: add one."""
import re
from pathlib import Path

from hpt.tasks import Sample, Task, register_task


def _sample(prefix, n):
    return Sample(id=f"{prefix}{n}", fields={"question": f"What is {n} plus one?"},
                  target=str(n + 1))


class PlusOne(Task):
    name = "plusone"
    title = "Plus one"
    hub_id = "none"
    hub_split = "test"
    penalty = 1.0
    prompt_dir = Path(__file__).parent

    def load_samples(self):
        return [_sample("t", n) for n in range(4)]

    def load_exemplar_pool(self):
        return []

    def load_train_pool(self):
        return [_sample("p", n) for n in range(100, 120)]

    def parse(self, completion, sample):
        found = re.findall(r"-?[0-9]+", completion)
        return found[-1] if found else None


register_task(PlusOne, replace=True)
'''

TOY_PROMPTS = """
[helm_baseline]
system = "You answer arithmetic questions."
user = "Question: {question}\\nAnswer:"

[dspy]
instruction = "Answer the arithmetic question with a number."
output = "answer"
output_desc = "the number, digits only"

[dspy.inputs]
question = "{question}"
"""

MAGIC = "What is 107 plus one?"
PROGRAM_FIELDS = {"answer", "reasoning"}


def write_toy(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dspytoy.py").write_text(TOY)
    (folder / "plusone.toml").write_text(TOY_PROMPTS)
    return folder


def output_fields(system: str) -> list[str]:
    section = system.split("Your output fields are:", 1)[-1].split("All interactions", 1)[0]
    return re.findall(r"^\d+\. `(\w+)`", section, re.MULTILINE)


class Scripted:
    """The scripted model: DSPy's field format for programs and proposers alike."""

    def __init__(self, proposer_broken: bool = False) -> None:
        self.proposer_broken = proposer_broken
        self.proposals = 0

    def __call__(self, body: dict[str, Any]) -> str:
        messages = body["messages"]
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        last = messages[-1]["content"]
        fields = output_fields(system)
        if not fields:  # the HELM baseline prompt
            n = int(re.findall(r"What is (\d+) plus one", last)[-1])
            return str(n + 1)
        if not set(fields) <= PROGRAM_FIELDS:
            self.proposals += 1
            if self.proposer_broken:
                return "Sure! A good instruction would be to add one."
            return "".join(f"[[ ## {f} ## ]]\nAdd one to N; PROPOSED {self.proposals}.\n\n"
                           for f in fields) + "[[ ## completed ## ]]"  # fmt: skip
        n = int(re.findall(r"What is (\d+) plus one", last)[-1])
        earlier = " ".join(m["content"] for m in messages[:-1])
        value = n + 1 if n == 107 or MAGIC in earlier else 0
        parts = {"reasoning": "I add one.", "answer": str(value)}
        return "".join(f"[[ ## {f} ## ]]\n{parts[f]}\n\n" for f in fields) + (
            "[[ ## completed ## ]]"
        )


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[Path]:
    site = write_toy(tmp_path / "toy")
    sys.path.insert(0, str(site))
    try:
        importlib.import_module("dspytoy")
        yield site
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("dspytoy", None)


@pytest.fixture
def scripted() -> Iterator[tuple[FakeOpenAI, ServerThread, Scripted]]:
    script = Scripted()
    fake = FakeOpenAI(responder=script)
    server = ServerThread(fake.app()).start()
    yield fake, server, script
    server.stop()


def spec(server: ServerThread, out: Path, strategies: str, **extra: Any) -> RunSpec:
    return RunSpec.model_validate({
        "dataset": "plusone", "model": "openai:test-model", "base_url": server.base_url,
        "strategies": strategies.split(","), "out": out, "concurrency": 4,
        "params": {"temperature": 0.0}, **extra,
    })  # fmt: skip


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def run(s: RunSpec, resume: bool = False) -> Any:
    return asyncio.run(run_evaluation(s, resume=resume))


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_zero_shot_ladder_records_every_call(toy, scripted, tmp_path) -> None:
    _fake, server, _ = scripted
    out = tmp_path / "run"
    result = run(spec(server, out, "helm_baseline,dspy_predict,dspy_cot"))
    assert result.complete
    recs = records(out)
    assert len(recs) == 4 and all(r["resolved_level"] == 1 for r in recs)
    first = recs[0]["attempts"][0]
    assert first["strategy"] == "helm_baseline"
    assert first["calls"][0]["messages"][0]["role"] == "system"

    # Level 1 unresolved (a climb that needs DSPy): the toy's dspy programs answer 0 for n < 100.
    out2 = tmp_path / "run2"
    run(spec(server, out2, "dspy_predict,dspy_cot"))
    for r in records(out2):
        assert r["resolved_level"] is None
        predict, cot = r["attempts"]
        assert predict["completion"] == "0" and cot["completion"] == "0"
        assert len(predict["calls"]) == 1 and len(cot["calls"]) == 1
        assert "[[ ## question ## ]]" in predict["calls"][0]["messages"][-1]["content"]
        assert "reasoning" in cot["calls"][0]["messages"][0]["content"]
    usage = json.loads((out2 / "programs" / "usage.json").read_text())
    assert usage["plusone__openai_test-model__dspy_cot"]["evaluation"]["calls"] == 4
    assert usage["plusone__openai_test-model__dspy_cot"]["optimisation"]["calls"] == 0


def test_bfrs_picks_the_known_best_demo_and_survives_resume(toy, scripted, tmp_path) -> None:
    fake, server, _ = scripted
    out = tmp_path / "run"
    s = spec(server, out, "dspy_bfrs", strategy_args={"dspy_bfrs": {"num_threads": 4}})
    result = run(s)
    assert result.complete
    program_file = out / "programs" / "plusone__openai_test-model__dspy_bfrs.json"
    saved = json.loads(program_file.read_text())
    demos = saved["predict"]["demos"]
    assert any(d["question"] == MAGIC for d in demos), demos
    meta = json.loads(program_file.with_name(program_file.stem + ".meta.json").read_text())
    assert meta["optimiser"] == "BootstrapFewShotWithRandomSearch"
    assert meta["train_size"] == 18 and meta["val_size"] == 2
    opt = meta["optimisation"]
    assert opt["calls"] > 0 and opt["prompt_tokens"] > 0 and opt["completion_tokens"] > 0
    # Every test sample ran the optimised program: resolved, with the demo in its prompt.
    recs = records(out)
    assert all(r["resolved_level"] == 1 for r in recs)
    for r in recs:
        attempt = r["attempts"][0]
        assert MAGIC in json.dumps(attempt["calls"][0]["messages"])
        assert "BootstrapFewShotWithRandomSearch" in attempt["notes"]["optimisation"]
    usage = json.loads((out / "programs" / "usage.json").read_text())
    cell = usage["plusone__openai_test-model__dspy_bfrs"]
    assert cell["optimisation"]["calls"] == opt["calls"]
    assert cell["evaluation"]["calls"] == 4

    # A resumed run reuses the saved program: no optimisation call reaches the server again.
    lines = (out / "samples.jsonl").read_text().splitlines()
    (out / "samples.jsonl").write_text("\n".join(lines[:2]) + "\n")
    served = fake.served
    result = run(s.model_copy(update={"cache": False}), resume=True)
    assert result.complete and len(records(out)) == 4
    assert fake.served - served == 2  # the two samples evaluated again, nothing else


def test_saved_program_loads_with_program_flag(toy, scripted, tmp_path) -> None:
    fake, server, _ = scripted
    agent = tmp_path / "agent.json"
    agent.write_text(json.dumps(HELM_STYLE_AGENT))
    out = tmp_path / "run"
    s = spec(server, out, "dspy_mipro", programs={"dspy_mipro": agent})
    assert run(s).complete
    recs = records(out)
    assert all(r["resolved_level"] == 1 for r in recs)
    messages = recs[0]["attempts"][0]["calls"][0]["messages"]
    assert "Add one to the number." in messages[0]["content"]
    assert MAGIC in json.dumps(messages)
    assert fake.served == 4  # no optimisation at all
    assert not (out / "programs" / "plusone__openai_test-model__dspy_mipro.json").exists()


# A dspy-helm-style saved agent: a module wrapping a ChainOfThought ("prog.predict"),
# with DSPy's metadata, a bootstrapped demo and a labelled one.
HELM_STYLE_AGENT = {
    "prog.predict": {
        "traces": [],
        "train": [],
        "demos": [
            {"augmented": True, "question": MAGIC, "reasoning": "107 + 1.", "answer": "108"},
            {"question": "What is 5 plus one?", "answer": "6"},
        ],
        "signature": {
            "instructions": "Add one to the number.",
            "fields": [
                {"prefix": "Question:", "description": "${question}"},
                {"prefix": "Reasoning: Let's think step by step in order to",
                 "description": "${reasoning}"},
                {"prefix": "Answer:", "description": "the number"},
            ],
        },
        "lm": None,
    },
    "metadata": {"dependency_versions": {"python": "3.11", "dspy": "2.6.27",
                                          "cloudpickle": "3.1"}},
}  # fmt: skip


def test_program_shapes(toy, tmp_path) -> None:
    from hpt.structured.programs import DspySpec, build_program, load_program_state
    from hpt.tasks import DatasetError, get_task

    task = get_task("plusone")
    s = DspySpec.of(task)
    for key in ("predict", "prog.predict", "self"):
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps({key: HELM_STYLE_AGENT["prog.predict"]}))
        program = build_program(s, "cot")
        load_program_state(program, path, s)
        (_, predictor), = program.named_predictors()  # fmt: skip
        assert predictor.signature.instructions == "Add one to the number."
        assert [d["answer"] for d in predictor.demos] == ["108", "6"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"a": HELM_STYLE_AGENT["prog.predict"],
                               "b": HELM_STYLE_AGENT["prog.predict"]}))  # fmt: skip
    with pytest.raises(DatasetError, match="exactly one predictor"):
        load_program_state(build_program(s, "cot"), bad, s)
    wrong = tmp_path / "wrong.json"
    state = json.loads(json.dumps(HELM_STYLE_AGENT["prog.predict"]))
    state["demos"] = [{"inputs": "x", "answer": "1"}]
    wrong.write_text(json.dumps({"predict": state}))
    with pytest.raises(DatasetError, match="lacks the field"):
        load_program_state(build_program(s, "cot"), wrong, s)


MIPRO_FAST = {"num_threads": 4, "auto": None, "num_candidates": 2, "num_trials": 3}


def test_mipro_light_budget_runs_and_counts_the_proposer(toy, scripted, tmp_path) -> None:
    _fake, server, script = scripted
    out = tmp_path / "run"
    s = spec(server, out, "dspy_mipro", strategy_args={"dspy_mipro": MIPRO_FAST})
    assert run(s).complete
    program_file = out / "programs" / "plusone__openai_test-model__dspy_mipro.json"
    meta = json.loads(program_file.with_name(program_file.stem + ".meta.json").read_text())
    assert meta["optimiser"] == "MIPROv2" and meta["optimisation"]["calls"] > 0
    assert meta["parses"]["propose"]["calls"] > 0 and meta["parses"]["propose"]["failures"] == 0
    assert script.proposals > 0
    calls = [json.loads(line) for line in program_file.with_name(
        program_file.stem + ".calls.jsonl").read_text().splitlines()]  # fmt: skip
    assert len(calls) == meta["optimisation"]["calls"]
    assert any(c["purpose"].startswith("propose") for c in calls)


def test_unparseable_proposer_fails_the_cell_with_one_message(toy, tmp_path) -> None:
    script = Scripted(proposer_broken=True)
    fake = FakeOpenAI(responder=script)
    server = ServerThread(fake.app()).start()
    try:
        out = tmp_path / "run"
        s = spec(server, out, "dspy_mipro", strategy_args={"dspy_mipro": MIPRO_FAST})
        with pytest.raises(OptimisationError) as caught:
            run(s)
    finally:
        server.stop()
    message = str(caught.value)
    assert "prompt model" in message and "--prompt-model" in message
    assert "could not parse" in message and "Not falling back" in message
    assert not (out / "programs" / "plusone__openai_test-model__dspy_mipro.json").exists()


def test_prompt_model_flag_and_cli_run(toy, scripted, tmp_path) -> None:
    from tests.test_cli import hpt

    _fake, server, _ = scripted
    out = tmp_path / "run"
    result = hpt("--plugin", "dspytoy", "run", "--dataset", "plusone",
                 "--model", "openai:test-model", "--base-url", server.base_url,
                 "--strategies", "helm_baseline,dspy_predict,dspy_cot", "--temperature", "0",
                 "--prompt-model", "openai:test-model", "--out", str(out), "--no-progress",
                 env={"PYTHONPATH": str(toy)})  # fmt: skip
    assert result.returncode == 0, result.stderr
    saved = json.loads((out / "run.json").read_text())
    assert saved["prompt_model"] == "openai:test-model" and saved["programs"] == {}
    assert len(records(out)) == 4
    bad = hpt("--plugin", "dspytoy", "run", "--dataset", "plusone",
              "--model", "openai:test-model", "--base-url", server.base_url,
              "--strategies", "helm_baseline", "--program", f"dspy_cot={tmp_path}/x.json",
              "--out", str(tmp_path / "r2"), env={"PYTHONPATH": str(toy)})  # fmt: skip
    assert bad.returncode == 2 and "dspy_cot is not in the ladder" in bad.stderr


def test_a_dspy_helm_agent_asks_with_the_datasets_helm_prompt(
    tmp_path: Path, data_dir: Path
) -> None:
    """dspy-helm's agents (its agents/DATASET/MODEL/*.json) have one input, ``inputs`` (HELM's
    whole prompt), and one output, ``output``: loaded for gsm8k, the program asks with
    gsm8k's [helm_baseline] prompt as that input and keeps the agent's instruction and demos.
    The JSON below has their shape (a ChainOfThought saved by DSPy 3.0)."""
    from hpt.structured.programs import load_program, program_summary
    from hpt.tasks import task_class

    agent = {
        "predict": {
            "traces": [], "train": [], "lm": None,
            "demos": [{"augmented": True, "inputs": "Q: What is 2 + 3?\nA:",
                       "reasoning": "2 + 3 = 5.", "output": "5"}],
            "signature": {
                "instructions": "Solve the grade-school math problem.",
                "fields": [{"prefix": "Inputs:", "description": "${inputs}"},
                           {"prefix": "Reasoning: Let's think step by step in order to",
                            "description": "${reasoning}"},
                           {"prefix": "Output:", "description": "${output}"}],
            },
        },
        "metadata": {"dependency_versions": {"python": "3.10", "dspy": "3.0.3"}},
    }  # fmt: skip
    path = tmp_path / "BootstrapFewShotWithRandomSearch.json"
    path.write_text(json.dumps(agent))
    task = task_class("gsm8k")(data_dir)
    program, spec = load_program(path, task, "cot")
    assert (list(spec.inputs), spec.output) == (["inputs"], "output")
    sample = task.load_samples()[0]
    rendered = spec.render(task, sample)["inputs"]
    assert rendered == f"Q: {sample.fields['question']}\nA:"
    (_, predictor), = program.named_predictors()  # fmt: skip
    assert predictor.signature.instructions == "Solve the grade-school math problem."
    assert program_summary(program)["demos"] == 1 and predictor.demos[0]["output"] == "5"


@pytest.mark.parametrize(
    ("reply", "read"),
    [
        # A first reply DSPy could not parse (a ChainOfThought reply without its reasoning
        # field) is read, for its first_reply reading, by its answer field (the marker lines
        # made "C" unreadable to the MCQ reader), else without the marker lines.
        ("[[ ## answer ## ]]\nC\n\n[[ ## completed ## ]]", "C"),
        ("[[ ## reasoning ## ]]\nB is right.\n[[ ## completed ## ]]", "B is right."),
        ("The correct answer is (B).", "The correct answer is (B)."),
    ],
)
def test_an_unparsed_first_reply_is_read_by_its_answer_field(reply: str, read: str) -> None:
    from hpt.graphs.structured_strategies import field_text

    assert field_text(reply, "answer") == read


# ---------------------------------------------------------------- DSPy's two replies


def _json_request(body: dict[str, Any]) -> bool:
    """A request from the JSONAdapter that DSPy's ChatAdapter falls back to."""
    return "Outputs will be a JSON object" in body["messages"][0]["content"]


def test_dspy_is_scored_on_its_prediction_and_keeps_the_first_reply(
    data_dir: Path, tmp_path: Path
) -> None:
    """The issue's three cases through the real dspy library, hpt's engine and a scripted
    server: a first reply that is right but not in DSPy's format, then a fallback reply DSPy
    cannot parse either, is no prediction (unresolved, with why), never the fallback's stray
    number or letter; a fallback that parses is DSPy's prediction. Both replies are recorded,
    and the first one's reading is kept as ``first_reply`` and summarised per cell."""
    from hpt.tasks import task_class

    chosen = {}
    for dataset in ("gsm8k", "mmlu_pro"):
        task = task_class(dataset)(data_dir)
        for i, s in enumerate(task.choose(task.load_samples(), 4, 0)):
            chosen[str(s.fields["question"]).strip()] = (dataset, i, s)

    def which(messages: list[dict[str, Any]]) -> tuple[str, int, Any]:
        asked = messages[-1]["content"].split("[[ ## question ## ]]", 1)[1].lstrip()
        return next(v for q, v in chosen.items() if asked.startswith(q))

    def reply(body: dict[str, Any]) -> str:
        dataset, i, s = which(body["messages"])
        fallback = _json_request(body)
        cot = "`reasoning`" in body["messages"][0]["content"]
        if dataset == "mmlu_pro":  # mmlu_pro-11782: right first, then a stray letter
            wrong = "A" if s.target != "A" else "B"
            return f"({wrong}) Velocity is the rate." if fallback else (
                f"The correct answer is ({s.target}).")  # fmt: skip
        right, wrong = s.target, str(int(s.target) + 1)
        if i == 0:  # gsm8k-746: right first, then malformed JSON without the answer field
            return '{"reasoning": {"answer": 2}' if fallback else f"The answer is {right}."
        if i == 1:  # wrong first; the fallback parses, and that is DSPy's prediction
            if fallback:
                return json.dumps({"reasoning": "Add them.", "answer": right} if cot else
                                  {"answer": right})  # fmt: skip
            return f"The answer is {wrong}."
        if i == 2:  # DSPy's own format at once: one call, nothing to fall back on
            fields = {"reasoning": "Add them.", "answer": right} if cot else {"answer": right}
            return "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in fields.items()) + (
                "[[ ## completed ## ]]")  # fmt: skip
        # gsm8k-738: wrong first, then a count that is no answer field at all
        return '"response_count": 15738459' if fallback else f"The answer is {wrong}."

    fake = FakeOpenAI(responder=reply)
    server = ServerThread(fake.app()).start()
    try:
        cot_out, predict_out = tmp_path / "cot", tmp_path / "predict"
        run(spec(server, cot_out, "dspy_cot", dataset=["gsm8k", "mmlu_pro"], limit=4,
                 data_dir=data_dir))  # fmt: skip
        run(spec(server, predict_out, "dspy_predict", dataset=["gsm8k"], limit=4,
                 data_dir=data_dir))  # fmt: skip
    finally:
        server.stop()

    for out in (cot_out, predict_out):
        by_index = {which(r["attempts"][0]["calls"][0]["messages"])[:2]: r
                    for r in records(out)}  # fmt: skip
        # Right first, malformed fallback: no prediction, unresolved, not "2".
        (a,) = by_index["gsm8k", 0]["attempts"]
        assert (a["resolved"], a["parsed"], a["completion"]) == (False, None, None)
        assert a["detail"].startswith("no prediction: DSPy could not parse the reply in its "
                                      "chat format nor the JSON fallback reply")  # fmt: skip
        assert [c["purpose"] for c in a["calls"]] == ["answer", "answer (JSON fallback)"]
        assert a["calls"][1]["completion"] == '{"reasoning": {"answer": 2}'
        target = by_index["gsm8k", 0]["target"]
        assert a["alternatives"] == {"first_reply": {"parsed": target, "resolved": True}}
        # Wrong first, a fallback that parses: DSPy's prediction decides.
        (a,) = by_index["gsm8k", 1]["attempts"]
        assert a["resolved"] and a["completion"] == by_index["gsm8k", 1]["target"]
        assert a["alternatives"]["first_reply"]["resolved"] is False
        assert "JSON fallback" in a["notes"]["dspy"]
        # DSPy's format at once: one call, no first_reply reading.
        (a,) = by_index["gsm8k", 2]["attempts"]
        assert a["resolved"] and len(a["calls"]) == 1 and "first_reply" not in a["alternatives"]
        # Wrong first, a count for the fallback: no prediction, never 15738459.
        (a,) = by_index["gsm8k", 3]["attempts"]
        assert (a["resolved"], a["parsed"]) == (False, None)
        assert "cannot be serialized to a JSON object" in a["detail"]
        assert a["alternatives"]["first_reply"]["resolved"] is False

    # mmlu_pro-11782: the right first reply, then "(A) ...": no prediction, not A.
    mmlu = [r for r in records(cot_out) if r["dataset"] == "mmlu_pro"]
    assert len(mmlu) == 4 and all(r["resolved_level"] is None for r in mmlu)
    for r in mmlu:
        (a,) = r["attempts"]
        assert a["parsed"] is None and a["detail"].startswith("no prediction")
        assert a["alternatives"]["first_reply"] == {"parsed": r["target"], "resolved": True}

    # Per cell: how often the adapter fell back, and how often the first reply would have
    # resolved differently.
    cells = {c["dataset"]: c for c in json.loads((cot_out / "summary.json").read_text())["cells"]}
    gsm = cells["gsm8k"]["readings"]["first_reply"]
    assert (gsm["attempts"], gsm["disagreements"], gsm["resolved_flips"]) == (3, 3, 2)
    # Had the first reply decided where there was one: 0 and 2 resolve, 1 and 3 do not.
    assert gsm["level1_accuracy"] == 0.5
    assert cells["gsm8k"]["accuracy"] == 0.5
    mm = cells["mmlu_pro"]["readings"]["first_reply"]
    assert (mm["attempts"], mm["resolved_flips"]) == (4, 4) and mm["level1_accuracy"] == 1.0
    assert cells["mmlu_pro"]["accuracy"] == 0.0
