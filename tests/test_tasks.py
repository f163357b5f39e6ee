import json
from pathlib import Path

import pytest

from hpt.tasks import DatasetError, UnknownTaskError, get_task, resolve_data_dir, select


@pytest.mark.parametrize(
    ("name", "count", "first_id", "target"),
    [
        ("boolq", 3270 - 3, "boolq-validation-0", "False"),
        ("gsm8k", 1319, "gsm8k-test-0", "18"),
        ("csqa", 1221, "1afa02df02c908a558b4036e80242fac", "A"),
        ("mmlu", 14042, "mmlu-abstract_algebra-test-0", None),
    ],
)
def test_offline_loading(
    data_dir: Path, name: str, count: int, first_id: str, target: str | None
) -> None:
    task = get_task(name, data_dir)
    samples = task.load_samples()
    assert len(samples) == count
    assert samples[0].id == first_id
    assert len({s.id for s in samples}) == count
    if target:
        assert samples[0].target == target
    for s in samples[:5]:
        assert task.exemplars_for(s, task.load_exemplar_pool())


def test_boolq_passage_drops_title(data_dir: Path) -> None:
    s = get_task("boolq", data_dir).load_samples()[0]
    assert s.fields["passage"].startswith("All biomass goes through")
    assert s.fields["question"] == "does ethanol take more energy make that produces"


def test_selection_is_seeded_stable_and_nested(data_dir: Path) -> None:
    samples = get_task("gsm8k", data_dir).load_samples()
    a, b = select(samples, 10, 7), select(list(reversed(samples)), 10, 7)
    assert [s.id for s in a] == [s.id for s in b]
    assert [s.id for s in select(samples, 20, 7)][:10] == [s.id for s in a]
    assert [s.id for s in select(samples, 10, 8)] != [s.id for s in a]


def test_mmlu_exemplars_come_from_the_same_subject(data_dir: Path) -> None:
    task = get_task("mmlu", data_dir)
    sample = next(s for s in task.load_samples() if s.meta["subject"] == "anatomy")
    shots = task.exemplars_for(sample, task.load_exemplar_pool())
    assert [s.id for s in shots] == [f"mmlu-anatomy-dev-{i}" for i in range(3)]


def test_gsm8k_exemplars_show_worked_solutions(data_dir: Path) -> None:
    task = get_task("gsm8k", data_dir)
    shots = task.exemplars_for(task.load_samples()[0], task.load_exemplar_pool())
    assert (
        shots[0].shown_answer
        and "<<" not in shots[0].shown_answer
        and "#### 72" in shots[0].shown_answer
    )


def test_unknown_dataset() -> None:
    with pytest.raises(UnknownTaskError, match="choose one of boolq"):
        get_task("squad")


def test_missing_files_and_dirs(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        resolve_data_dir(tmp_path / "nope")
    with pytest.raises(DatasetError, match=r"boolq/validation.jsonl"):
        get_task("boolq", tmp_path).load_samples()
    with pytest.raises(DatasetError, match=r"SUBJECT_test.csv"):
        get_task("mmlu", tmp_path).load_samples()


def test_env_var_points_at_data(
    monkeypatch: pytest.MonkeyPatch, data_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("HPT_DATA_DIR", str(data_dir))
    assert resolve_data_dir(None) == data_dir
    assert resolve_data_dir(tmp_path) == tmp_path  # the flag wins


@pytest.mark.parametrize(
    ("name", "relative", "content", "message"),
    [
        (
            "gsm8k",
            "gsm8k/test.jsonl",
            '{"question": "q", "answer": "no final line"}\n',
            r"test.jsonl:1: answer has no '#### NUMBER'",
        ),
        (
            "gsm8k",
            "gsm8k/test.jsonl",
            '{"question": "q", "answer": "#### 3"}\n{oops\n',
            r"test.jsonl:2: not valid JSON",
        ),
        (
            "boolq",
            "boolq/validation.jsonl",
            '{"prompt": "x"}\n',
            r"validation.jsonl:1: missing field 'subject'",
        ),
        (
            "csqa",
            "csqa/dev_rand_split.jsonl",
            json.dumps({"id": "x", "answerKey": "F", "question": {"stem": "s", "choices": []}})
            + "\n",
            r"dev_rand_split.jsonl:1: expected choices A-E",
        ),
        ("mmlu", "mmlu/test/x_test.csv", "q,a,b,c,d,Z\n", r"x_test.csv:1: answer 'Z'"),
        ("mmlu", "mmlu/test/x_test.csv", "q,a,b\n", r"x_test.csv:1: expected 6 columns"),
    ],
)
def test_malformed_rows_name_their_place(
    tmp_path: Path, name: str, relative: str, content: str, message: str
) -> None:
    path = tmp_path / relative
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        get_task(name, tmp_path).load_samples()
