from pathlib import Path

import pytest

from hpt.backends import Completion, GenerationParams, Message
from hpt.graphs import STRATEGIES, StrategyContext
from hpt.prompts import PromptError, PromptSet
from hpt.tasks import TASKS, Sample, get_task

LADDER = ["role", "zero_shot_cot", "three_shot_cot", "least_to_most", "generated_knowledge"]


def test_boolq_role_template_is_the_papers() -> None:
    p = PromptSet.load("boolq")
    text = p.render("role", p.text("role", "user"), {"passage": "P {x}", "question": "q?"})
    assert (
        text
        == 'Based on the passage: "P {x}", answer True/False to the question: "q?" as an Omniscient person.'
    )


def test_options_render_as_in_appendix_h() -> None:
    p = PromptSet.load("csqa")
    opts = [("A", "bank"), ("B", "library"), ("C", "mall"), ("D", "shop"), ("E", "park")]
    text = p.render("role", p.text("role", "user"), {"question": "Where?", "options": opts})
    assert text == ('Choose the answer: "Where?",A. "bank",B. "library",C. "mall",D. "shop",'
                    'E. "park" as a critical thinker.')  # fmt: skip
    mmlu = PromptSet.load("mmlu")
    steps = mmlu.texts("least_to_most", "steps")
    rendered = mmlu.render("least_to_most", steps[1], {"question": "Q", "options": opts[:4]})
    assert rendered.endswith('options: A. "bank" B. "library" C. "mall" D. "shop".')


def test_missing_field_is_named() -> None:
    p = PromptSet.load("gsm8k")
    with pytest.raises(PromptError, match=r"\{question\}"):
        p.render("role", p.text("role", "user"), {})


def test_custom_prompt_directory(tmp_path: Path) -> None:
    (tmp_path / "boolq.toml").write_text('[role]\nuser = "Q: {question}"\n')
    p = PromptSet.load("boolq", tmp_path)
    assert p.render("role", p.text("role", "user"), {"question": "why"}) == "Q: why"
    with pytest.raises(PromptError, match="no \\[zero_shot_cot\\] table"):
        p.section("zero_shot_cot")
    (tmp_path / "bad.toml").write_text("[role\n")
    with pytest.raises(PromptError, match=r"bad\.toml"):
        PromptSet.load("bad", tmp_path)


# DepthQA climbs its own modes (tables 27-29), rendered in tests/test_depthqa_runs.py.
# Hub-only datasets (headqa, medbullets, medec) have no offline copy to render: their own
# tests render them from small files in the hub's format.
@pytest.mark.parametrize(
    "dataset", sorted(n for n, t in TASKS.items() if t.kind != "depth" and t.offline_data)
)
def test_every_dataset_renders_every_strategy(dataset: str, data_dir: Path) -> None:
    task = get_task(dataset, data_dir)
    sample = task.load_samples()[0]
    p = task.prompts
    for strategy in LADDER:
        section = p.section(strategy)
        keys = [k for k in ("user", "knowledge") if k in section]
        for key in keys:
            fields = {**sample.fields, "exemplars": "EX", "knowledge": "KN", "previous": "PR"}
            text = p.render(strategy, p.text(strategy, key), fields)
            for value in sample.fields.values():  # data may hold braces (code, passages)
                text = text.replace(str(value), "")
            assert "{" not in text
    steps = p.texts("least_to_most", "steps")
    last = p.render("least_to_most", steps[-1], {**sample.fields, "previous": "PR"})
    # The final least-to-most step must contain the question (HumanEval: the code) itself.
    main = next(k for k in ("question", "code", "text", "dialogue") if k in sample.fields)
    assert str(sample.fields[main]) in last


class _Recorder:
    """A backend that keeps the prompts it is sent (for rendering through a strategy)."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[list[Message]] = []

    async def complete(
        self, messages: list[Message], params: GenerationParams, *, cache_seed: str = ""
    ) -> Completion:
        self.seen.append(messages)
        return Completion(text="A")

    async def check(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


async def test_mmlu_three_shot_exemplars_are_explained(data_dir: Path) -> None:
    task = get_task("mmlu", data_dir)
    pool = task.load_exemplar_pool()
    first_of: dict[str, Sample] = {}
    for s in task.load_samples():
        first_of.setdefault(s.meta["subject"], s)
    subjects = sorted(
        f.name.removesuffix("_dev.csv") for f in (data_dir / "mmlu" / "dev").glob("*_dev.csv")
    )
    assert len(subjects) == 57
    shown: set[str] = set()
    for subject in subjects:
        sample = first_of[subject]
        shots = task.exemplars_for(sample, pool)
        assert [s.id for s in shots] == [f"mmlu-{subject}-dev-{i}" for i in range(3)]
        for ex in shots:
            why = task.explanation(ex)
            assert why and why.strip(), f"{ex.id} has no explanation"
        shown.update(s.id for s in shots)
    # Every explanation belongs to an exemplar that is actually shown (catches typos in keys).
    written = set(task.prompts.section("three_shot_cot")["explanations"])
    assert written - shown == set()
    assert len(written) == 171

    # The prompt as the strategy renders it carries the three explanations.
    sample = first_of["college_physics"]
    model = _Recorder()
    ctx = StrategyContext(
        sample=sample,
        task=task,
        level=3,
        model=model,
        knowledge_model=model,
        params=GenerationParams(),
        exemplar_pool=pool,
        previous=[],
    )
    await STRATEGIES["three_shot_cot"](ctx)
    prompt = model.seen[-1][-1].content
    assert prompt.count(" Explanation: ") == 3
    assert 'Answer: A. Explanation: "For a telescope focused at infinity' in prompt
