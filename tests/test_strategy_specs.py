"""A strategy declares what it needs in its one registration, and the house reads it: the
runner opens --prompt-model for the ladders that need it, the planner checks prompt sections
(the wrapped strategy's too), the adaptive selector is shown each strategy's description and
the ladder's real count, ``hpt list`` shows the needs. A plugin strategy needing a prompt
model is one file; a name is registered once unless replaced on purpose; self_consistency
wraps any strategy that draws afresh."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpt.backends import Completion, GenerationParams, Message
from hpt.graphs import (
    STRATEGIES,
    Needs,
    StrategyContext,
    StrategyRegistrationError,
    UnknownStrategyError,
    ladder_needs,
    ladder_strategies,
    strategy,
    strategy_params,
)
from hpt.graphs.adaptive import selector_prompt
from hpt.graphs.context import NoAnswer
from hpt.graphs.self_consistency import SelfConsistencyParams
from hpt.prompts import PromptSet
from hpt.tasks import get_task
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_cli import assert_user_error, hpt

PLUGIN = '''
"""A toy strategy that asks a second model for its instruction: this file is all it takes."""
from hpt.backends import Message
from hpt.graphs import Needs, strategy


@strategy("propose", needs=Needs(prompt_model=True), prompt_section="role",
          description="Proposed prompting: Another model writes the instruction.")
async def propose(ctx):
    instruction = await ctx.ask([Message(role="user", content="PROPOSE an instruction.")],
                                purpose="propose", model=ctx.run.prompt_model)
    return await ctx.ask([Message(role="user", content=instruction + "\\n" +
                                  ctx.render("role", "user"))])
'''

MODELS = """
[models.proposer]
provider = "openai"
model = "proposer-model"
endpoints = ["{url}"]

[models.nowhere]
provider = "openai"
model = "gone"
endpoints = ["http://127.0.0.1:9/v1"]
"""

INSTRUCTION = "Answer with one word, True or False."


def _respond(body: dict[str, Any]) -> str:
    last = body["messages"][-1]["content"]
    if last.startswith("PROPOSE"):
        return INSTRUCTION
    if last.startswith("Choose the most effective"):
        return "1"
    return "The answer is True."


@pytest.fixture
def served() -> Any:
    fake = FakeOpenAI(responder=_respond, model_ids=("test-model", "proposer-model"))
    server = ServerThread(fake.app()).start()
    yield fake, server
    server.stop()


def _plugin(tmp_path: Path, url: str) -> tuple[dict[str, str], Path]:
    (tmp_path / "proposeplug.py").write_text(PLUGIN)
    config = tmp_path / "models.toml"
    config.write_text(MODELS.format(url=url))
    return {"PYTHONPATH": str(tmp_path)}, config


def _run(server: ServerThread, data_dir: Path, config: Path, out: Path, *extra: str) -> list[str]:
    return ["--plugin", "proposeplug", "run", "--dataset", "boolq", "--model", "openai:test-model",
            "--base-url", server.base_url, "--config", str(config), "--data-dir", str(data_dir),
            "--limit", "2", "--no-cache", "--out", str(out), *extra]  # fmt: skip


def test_a_plugin_strategy_gets_the_prompt_model_its_registration_asks_for(
    served: Any, data_dir: Path, tmp_path: Path
) -> None:
    fake, server = served
    env, config = _plugin(tmp_path, server.base_url)
    out = tmp_path / "run"
    result = hpt(*_run(server, data_dir, config, out, "--strategies", "propose,role",
                       "--prompt-model", "proposer"), env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    asked = {(b["model"], b["messages"][-1]["content"].split("\n")[0]) for b in fake.requests}
    # The proposer wrote the instruction; the evaluated model answered under it.
    assert ("proposer-model", "PROPOSE an instruction.") in asked
    assert ("test-model", INSTRUCTION) in asked
    assert all(b["model"] == "proposer-model" for b in fake.requests if "PROPOSE" in str(b))
    for line in (out / "samples.jsonl").read_text().splitlines():
        calls = json.loads(line)["attempts"][0]["calls"]
        assert [c["purpose"] for c in calls] == ["propose", "answer"]

    # A ladder without it never opens the prompt model: an unreachable one does no harm ...
    plain = hpt(*_run(server, data_dir, config, tmp_path / "plain", "--strategies", "role",
                      "--prompt-model", "nowhere"), env=env)  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    # ... while the ladder that needs it opens it, and stops before any run directory.
    needed = hpt(*_run(server, data_dir, config, tmp_path / "needed", "--strategies",
                       "propose,role", "--prompt-model", "nowhere"), env=env)  # fmt: skip
    assert needed.returncode == 2 and "Traceback" not in needed.stderr
    assert not (tmp_path / "needed").exists()


def test_the_selector_is_shown_the_registered_descriptions_and_the_ladders_count(
    served: Any, data_dir: Path, tmp_path: Path
) -> None:
    fake, server = served
    env, config = _plugin(tmp_path, server.base_url)
    result = hpt(*_run(server, data_dir, config, tmp_path / "run", "--mode", "adaptive",
                       "--strategies", "propose,role", "--prompt-model", "proposer"),
                 env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    prompts = [b["messages"][-1]["content"] for b in fake.requests]
    chosen = [p for p in prompts if p.startswith("Choose the most effective")]
    assert chosen and all("among two available strategies" in p for p in chosen)
    assert (
        "1. Proposed prompting: Another model writes the instruction.\n"
        "2. Role Prompting: Defines a role for the model in solving the task."
    ) in chosen[0]


def test_selector_prompt_counts_and_describes_any_ladder() -> None:
    templates = PromptSet.load("adaptive")
    five = selector_prompt(templates, ["role", "zero_shot_cot", "three_shot_cot",
                                       "least_to_most", "generated_knowledge"], "T", [])  # fmt: skip
    assert five.startswith("Choose the most effective prompting strategy among five available")
    three = selector_prompt(templates, ["role", "self_consistency", "dspy_cot"], "T", [2])
    assert "among three available strategies" in three
    # A strategy registered without a description is shown by its name.
    assert "2. Self-consistency: Samples several" in three and "\n3. dspy cot\n" in three
    assert "Already tried without success: 2." in three


def test_hpt_list_shows_what_each_strategy_needs(tmp_path: Path) -> None:
    env, _ = _plugin(tmp_path, "http://127.0.0.1:1/v1")
    listing = hpt("--plugin", "proposeplug", "list", env=env)
    assert listing.returncode == 0, listing.stderr
    text = " ".join(listing.stdout.split())  # the console wraps long lines
    assert "propose [uses --prompt-model]" in text
    assert "generated_knowledge(candidates) [uses logprobs]" in text
    assert "[uses --program, --prompt-model]" in text and "self_consistency(n, of)," in text


async def _toy(ctx: StrategyContext) -> str:
    return "toy"


async def _other(ctx: StrategyContext) -> str:
    return "other"


def test_a_name_is_registered_once_unless_replaced(tmp_path: Path) -> None:
    try:
        strategy("toy_once", needs=Needs(logprobs=True))(_toy)
        strategy("toy_once", needs=Needs(logprobs=True))(_toy)  # the same again: harmless
        with pytest.raises(StrategyRegistrationError, match="'toy_once' is registered already"):
            strategy("toy_once")(_other)
        assert STRATEGIES["toy_once"].fn is _toy
        strategy("toy_once", replace=True)(_other)
        assert STRATEGIES["toy_once"].fn is _other and not STRATEGIES["toy_once"].needs.logprobs
    finally:
        del STRATEGIES["toy_once"]
    with pytest.raises(StrategyRegistrationError, match="use no spaces"):
        strategy("a,b")(_toy)
    with pytest.raises(StrategyRegistrationError, match="has no such field"):
        strategy("toy_wrapper", wraps="of")(_toy)
    assert "a,b" not in STRATEGIES and "toy_wrapper" not in STRATEGIES
    # A plugin that takes a built-in's name by mistake is one clear error.
    (tmp_path / "dupplug.py").write_text(
        "from hpt.graphs import strategy\n@strategy('role')\nasync def role(ctx):\n    return ''\n"
    )
    result = hpt("--plugin", "dupplug", "list", env={"PYTHONPATH": str(tmp_path)})
    assert_user_error(result, "plugin 'dupplug'", "'role' is registered already", "replace=True")


class Recording:
    """A backend that records what it is asked and answers from a list, in turn."""

    name = "recording"

    def __init__(self, *answers: str) -> None:
        self.answers = answers or ("The answer is True.",)
        self.asked: list[tuple[str, str, int | None]] = []

    async def complete(
        self, messages: list[Message], params: GenerationParams, *, cache_seed: str = ""
    ) -> Completion:
        self.asked.append((messages[-1].content, cache_seed, params.seed))
        return Completion(text=self.answers[(len(self.asked) - 1) % len(self.answers)])


def _context(data_dir: Path, model: Recording, **args: Any) -> StrategyContext:
    task = get_task("boolq", data_dir)
    return StrategyContext(sample=task.load_samples()[0], task=task, level=1, model=model,  # type: ignore[arg-type]
                           knowledge_model=model, params=GenerationParams(seed=7),  # type: ignore[arg-type]
                           exemplar_pool=[], previous=[], cache_seed="s#0",
                           args=SelfConsistencyParams(**args))  # fmt: skip


async def test_self_consistency_samples_the_strategy_it_wraps(data_dir: Path) -> None:
    model = Recording("The answer is False.", "The answer is True.", "The answer is True.")
    ctx = _context(data_dir, model, n=3, of="role")
    answer = await STRATEGIES["self_consistency"](ctx)
    role_prompt = ctx.render("role", "user")
    assert [p for p, _, _ in model.asked] == [role_prompt] * 3
    # Each draw its own cache entry and, under a fixed seed, seed + draw.
    assert [(s, seed) for _, s, seed in model.asked] == [("s#0", 7), ("s#0#draw1", 8),
                                                         ("s#0#draw2", 9)]  # fmt: skip
    assert [c.purpose for c in ctx.calls] == ["sample 1/3", "sample 2/3", "sample 3/3"]
    assert answer == "The answer is True." and ctx.notes["votes"].endswith("unreadable: 0")
    assert ": 2, " in ctx.notes["votes"]

    # Unchanged by default: the zero-shot chain-of-thought prompt.
    model = Recording()
    ctx = _context(data_dir, model, n=2)
    await STRATEGIES["self_consistency"](ctx)
    assert [p for p, _, _ in model.asked] == [ctx.render("zero_shot_cot", "user")] * 2

    # A strategy of several calls: each call of a draw says which draw it belongs to.
    model = Recording()
    ctx = _context(data_dir, model, n=2, of="least_to_most")
    await STRATEGIES["self_consistency"](ctx)
    steps = len(ctx.task.prompts.texts("least_to_most", "steps"))
    assert [c.purpose for c in ctx.calls] == [
        f"sample {d}/2, step {i}/{steps}" for d in (1, 2) for i in range(1, steps + 1)
    ]


async def test_self_consistency_of_a_strategy_that_never_answers(data_dir: Path) -> None:
    async def silent(ctx: StrategyContext) -> str:
        raise NoAnswer("nothing parsed")

    strategy("toy_silent")(silent)
    try:
        ctx = _context(data_dir, Recording(), n=2, of="toy_silent")
        with pytest.raises(NoAnswer, match="none of the 2 draws of toy_silent"):
            await STRATEGIES["self_consistency"](ctx)
        assert ctx.notes["votes"] == "none; unreadable: 2"
    finally:
        del STRATEGIES["toy_silent"]


@pytest.mark.parametrize(
    ("of", "needle"),
    [("nope", "unknown strategy 'nope'"), ("self_consistency", "cannot run itself"),
     ("depth_pred", "shares one answer between identical prompts")],
)  # fmt: skip
def test_self_consistency_refuses_what_it_cannot_sample(of: str, needle: str) -> None:
    with pytest.raises(UnknownStrategyError, match=needle) as caught:
        strategy_params(["self_consistency"], {"self_consistency": {"of": of}})
    assert f"--strategy-arg self_consistency.of={of}: " in str(caught.value)


def test_self_consistency_of_an_unsamplable_strategy_is_one_line(data_dir: Path) -> None:
    result = hpt("run", "--dataset", "boolq", "--model", "openai:m", "--data-dir", str(data_dir),
                 "--strategies", "role,self_consistency",
                 "--strategy-arg", "self_consistency.of=depth_gold")  # fmt: skip
    assert_user_error(result, "self_consistency.of=depth_gold")


def test_a_ladder_needs_what_its_wrapped_strategies_need() -> None:
    args = strategy_params(["role", "self_consistency"],
                           {"self_consistency": {"of": "dspy_mipro"}})  # fmt: skip
    assert ladder_strategies(["role", "self_consistency"], args) == [
        "role", "self_consistency", "dspy_mipro"]  # fmt: skip
    assert ladder_needs(["role", "self_consistency"], args) == Needs(program=True,
                                                                    prompt_model=True)  # fmt: skip
    default = strategy_params(["self_consistency"], {})
    assert ladder_strategies(["self_consistency"], default) == ["self_consistency",
                                                                "zero_shot_cot"]  # fmt: skip
    assert ladder_needs(["role", "generated_knowledge"], {}) == Needs(logprobs=True)
