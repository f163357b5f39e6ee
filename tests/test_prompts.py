from pathlib import Path

import pytest

from hpt.prompts import PromptError, PromptSet
from hpt.tasks import TASKS, get_task

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


@pytest.mark.parametrize("dataset", sorted(TASKS))
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
