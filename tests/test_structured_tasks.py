"""The structured-prompting paper's benchmarks: MMLU-Pro, GPQA, MedCalc-Bench (offline files)
and HeadQA, MedBullets, MEDEC (hub loaders, on small files in the hub's format)."""

import json
import random
from pathlib import Path

import pytest

from hpt.prompts import PromptSet
from hpt.tasks import DatasetError, Sample, get_task
from hpt.tasks import medcalc as rules
from hpt.tasks.base import seeded_slice
from hpt.tasks.gpqa import option_order
from hpt.tasks.medcalc import MedCalc
from hpt.tasks.readers import read_medec_verdict

OFFLINE = [("mmlu_pro", 12032, 70), ("gpqa", 198, 21), ("medcalc", 1047, 163)]
ALL = ["mmlu_pro", "gpqa", "medcalc", "headqa", "medbullets", "medec"]
HPT_SECTIONS = ["role", "zero_shot_cot", "three_shot_cot", "least_to_most", "generated_knowledge"]


@pytest.mark.parametrize(("name", "total", "train"), OFFLINE)
def test_offline_counts_and_disjoint_train_slice(
    data_dir: Path, name: str, total: int, train: int
) -> None:
    task = get_task(name, data_dir)
    samples, pool = task.load_samples(), task.load_train_pool()
    assert len(pool) == train and len(samples) == total - train
    ids = {s.id for s in samples}
    assert len(ids) == len(samples) and not ids & {s.id for s in pool}
    assert [s.id for s in task.load_exemplar_pool()] == [s.id for s in pool]
    note = " ".join(task.split_notes())
    assert f"{total} -> {total - train}" in note and "seed 42" in note
    shots = task.exemplars_for(samples[0], pool)
    assert len(shots) == 3 and not {s.id for s in shots} & ids

    # A question the data holds twice (MedCalc's QTc rows, MMLU-Pro 6248/6249) is never on
    # both sides: training on its twin would leak the answer.
    def asked(s: Sample) -> str:
        return repr(sorted((k, str(v)) for k, v in s.fields.items()))

    assert not {asked(s) for s in samples} & {asked(s) for s in pool}
    group = {"medcalc": "calculator_id", "mmlu_pro": "category", "gpqa": "domain"}[name]
    assert {s.meta[group] for s in samples} == {s.meta[group] for s in [*samples, *pool]}


def test_slice_ignores_row_order() -> None:
    samples = [Sample(id=f"s{i}", fields={}, target="A", meta={"g": str(i % 3)}) for i in range(60)]
    shuffled = samples[:]
    random.Random(1).shuffle(shuffled)
    per = {"0": 2, "1": 3, "2": 0}
    a, rest = seeded_slice(samples, per, lambda s: s.meta["g"], 42)
    b, _ = seeded_slice(shuffled, per, lambda s: s.meta["g"], 42)
    assert {s.id for s in a} == {s.id for s in b} and len(a) == 5 and len(rest) == 55
    assert seeded_slice(samples, per, lambda s: s.meta["g"], 43)[0] != a


def test_mmlu_pro_rows(data_dir: Path) -> None:
    task = get_task("mmlu_pro", data_dir)
    samples = task.load_samples()
    first = samples[0]
    assert (
        first.id == "mmlu_pro-70" and first.target == "I" and first.meta["category"] == "business"
    )
    assert max(len(s.fields["options"]) for s in samples) == 10
    pool = task.load_train_pool()
    assert sorted({s.meta["category"] for s in pool}) == sorted(
        {s.meta["category"] for s in samples}
    )
    same = task.exemplars_for(first, pool)
    assert {s.meta["category"] for s in same} == {"business"}


def test_mmlu_pro_reads_the_readme_format(tmp_path: Path) -> None:
    """options as a Python-literal list in a string, answer_index a string, as README says."""
    row = {"question_id": "7", "question": "q?", "options": "['x', 'y', \"z's\"]", "answer": "C",
           "answer_index": "2", "category": "math", "src": "s", "cot_content": ""}  # fmt: skip
    (tmp_path / "mmlu_pro").mkdir()
    (tmp_path / "mmlu_pro" / "test.jsonl").write_text(json.dumps(row) + "\n")
    [sample] = get_task("mmlu_pro", tmp_path).load_train_pool()
    assert sample.fields["options"] == [("A", "x"), ("B", "y"), ("C", "z's")]
    assert sample.target == "C"


def test_gpqa_options_are_shuffled_per_question(data_dir: Path) -> None:
    task = get_task("gpqa", data_dir)
    samples = task.load_samples()
    assert len({s.target for s in samples}) == 4  # not always A
    assert option_order("rec1") == option_order("rec1") and sorted(option_order("rec1")) == [
        0,
        1,
        2,
        3,
    ]
    again = {s.id: s for s in get_task("gpqa", data_dir).load_samples()}
    assert all(again[s.id].fields == s.fields and again[s.id].target == s.target for s in samples)
    assert all(len(s.fields["options"]) == 4 for s in samples)
    shot = task.exemplars_for(samples[0], task.load_train_pool())[0]
    assert task.explanation(shot)  # the dataset's own explanation


def test_gpqa_is_never_unzipped_to_disk(data_dir: Path, tmp_path: Path) -> None:
    before = set(Path(data_dir, "gpqa").iterdir())
    get_task("gpqa", data_dir).load_samples()
    assert set(Path(data_dir, "gpqa").iterdir()) == before
    (tmp_path / "gpqa").mkdir()
    (tmp_path / "gpqa" / "gpqa_diamond.zip").write_bytes(b"not a zip")
    with pytest.raises(DatasetError, match="password-protected GPQA archive"):
        get_task("gpqa", tmp_path).load_samples()


@pytest.mark.parametrize("name", ["mmlu_pro", "gpqa", "headqa", "medbullets"])
@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("B", "B"),
        ("Answer: B", "B"),
        ("(B)", "B"),
        ("The correct answer is (D).", "D"),
        ("The correct answer is (insert answer here)", None),
        ("I think it is C or D.", None),
    ],
)
def test_choice_parsing(name: str, completion: str, expected: str | None) -> None:
    task = get_task(name, Path("/nonexistent"))
    sample = Sample(
        id="x", fields={"question": "q", "options": [(c, f"t{c}") for c in "ABCD"]}, target="B"
    )
    assert task.parse(completion, sample) == expected


@pytest.mark.parametrize(("completion", "expected"), [
    ("J", "J"), ("Answer: J", "J"), ("(I)", "I"), ("The correct answer is (H).", "H"),
    ("**Answer: E**", "E"), ("I would pick (G).", "G"),
])  # fmt: skip
def test_ten_option_letters(completion: str, expected: str) -> None:
    task = get_task("mmlu_pro", Path("/nonexistent"))
    sample = Sample(
        id="x", fields={"question": "q", "options": [(c, f"t{c}") for c in "ABCDEFGHIJ"]},
        target="J",
    )  # fmt: skip
    assert task.parse(completion, sample) == expected
    nine = sample.model_copy(
        update={"fields": {**sample.fields, "options": sample.fields["options"][:9]}}
    )
    assert task.parse("Answer: J", nine) is None  # no option J


# -- MedCalc scoring ----------------------------------------------------------------------
def test_medcalc_rows(data_dir: Path) -> None:
    task = get_task("medcalc", data_dir)
    samples = task.load_samples()
    kinds = {s.meta["kind"] for s in samples}
    assert kinds == {"integer", "decimal", "date", "weeks_days"}
    gest = next(s for s in samples if s.meta["kind"] == "weeks_days")
    assert gest.meta["calculator_id"] == "69" and gest.target.endswith("days)")
    dec = next(s for s in samples if s.meta["kind"] == "decimal")
    assert float(dec.meta["lower_limit"]) <= float(dec.target) <= float(dec.meta["upper_limit"])
    sample = samples[0]
    assert set(sample.fields) == {"patient_note", "question"}
    shots = task.exemplars_for(sample, task.load_train_pool())
    assert {s.meta["calculator_id"] for s in shots} == {sample.meta["calculator_id"]}


def test_medcalc_reference_explanations_score_correct(data_dir: Path) -> None:
    """Every row's own worked explanation, read as a completion, is correct: the reader takes
    the final stated value, not the note's numbers it quotes or the intermediate totals."""
    task = get_task("medcalc", data_dir)
    pool = task.load_train_pool() + task.load_samples()
    for s in pool:
        why = task.explanation(s)
        assert why and task.check(s, why).resolved, (s.id, task.parse(why, s), s.target)


def _sample(kind: str, target: str, lower: str = "", upper: str = "", note: str = "") -> Sample:
    return Sample(
        id="m", fields={"patient_note": note, "question": "What is it?"}, target=target,
        meta={"kind": kind, "lower_limit": lower, "upper_limit": upper},
    )  # fmt: skip


INTEGER = _sample("integer", "3")
DECIMAL = _sample("decimal", "25.238", "23.9761", "26.4999")
DATE = _sample("date", "09/23/2014")
WEEKS = _sample("weeks_days", "(4 weeks, 3 days)")


@pytest.mark.parametrize(
    ("sample", "completion", "parsed", "resolved"),
    [
        (INTEGER, "3", "3", True),
        (INTEGER, "The CHA2DS2-VASc score is 3.", "3", True),
        (
            INTEGER,
            "Age 75 gives 2 points, hypertension 1 point. Total score = 2 + 1 = 3",
            "3",
            True,
        ),
        (INTEGER, "Answer: 3.4", "3.4", True),  # rounded, as MedCalc-Bench rounds
        (INTEGER, "Answer: 2.5", "2.5", False),  # Python's round: half to even
        (INTEGER, "The score is 3 (age 65-74: 1 point).", "3", True),
        (INTEGER, "Answer: 4", "4", False),
        (INTEGER, "The score is 1 + 1 + 2", None, False),
        (INTEGER, "Answer: 3-4", None, False),
        (DECIMAL, "Answer: 25.238 mL/min", "25.238", True),
        (DECIMAL, "CrCl = (140 - 87) * 48 / (1.4 * 72) = 25.24 mL/min", "25.24", True),
        (DECIMAL, "The creatinine clearance is approximately 26.4999", "26.4999", True),
        (DECIMAL, "The creatinine clearance is 26.5 mL/min.", "26.5", False),  # just outside
        (DECIMAL, "Answer: 23.97", "23.97", False),  # just below
        (DECIMAL, "Answer: 40. Wait, I made a mistake: it is 25.3.", "25.3", True),
        (DATE, "09/23/2014", "09/23/2014", True),
        (DATE, "The estimated due date is 9/23/2014.", "09/23/2014", True),
        (
            DATE,
            "LMP 12/11/2013 plus 280 days, minus 6 days: due date 2014-09-23",
            "09/23/2014",
            True,
        ),
        (DATE, "Answer: September 23, 2014", "09/23/2014", True),
        (DATE, "Answer: 09/24/2014", "09/24/2014", False),
        (WEEKS, "(4 weeks, 3 days)", "(4 weeks, 3 days)", True),
        (WEEKS, "The gestational age is 4 weeks and 3 days.", "(4 weeks, 3 days)", True),
        (WEEKS, "Answer: ('4 weeks', '3 days')", "(4 weeks, 3 days)", True),
        (WEEKS, "Answer: (4, 3)", "(4 weeks, 3 days)", True),
        (WEEKS, "Answer: 4 weeks", "(4 weeks, 0 days)", False),
        (WEEKS, "Answer: 31 days", "(4 weeks, 3 days)", True),  # days carried into weeks
        (WEEKS, "Answer: 4+3 weeks", None, False),  # not half-read as 3 weeks
        (WEEKS, "Answer: 4 3/7 weeks", None, False),
        (INTEGER, "I cannot determine this from the note.", None, False),
        (DATE, "The due date cannot be computed.", None, False),
        (WEEKS, "unknown", None, False),
        (DECIMAL, "", None, False),
    ],
)
def test_medcalc_scoring(
    sample: Sample, completion: str, parsed: str | None, resolved: bool
) -> None:
    task = get_task("medcalc", Path("/nonexistent"))
    check = task.check(sample, completion)
    assert (check.parsed, check.resolved) == (parsed, resolved)


def test_medcalc_ignores_numbers_quoted_from_the_note() -> None:
    note = "The patient is a 72 year old man with a serum creatinine of 1.4 mg/dL and weight 48 kg."
    sample = _sample("decimal", "25.238", "23.9761", "26.4999", note)
    task = get_task("medcalc", Path("/nonexistent"))
    quoted = f'From the note: "{note}" The answer is 25.3. (Normal range 90 to 120.)'
    assert task.parse(quoted, sample) == "25.3"
    assert task.parse(f"{note}", sample) is None  # only the quoted note: nothing stated
    assert task.alternative_readings("So it is 25.3 or so", sample) == {"strict": None}


def test_medcalc_rules_reject_malformed_truth() -> None:
    assert rules.answer_kind("integer", "('1 weeks', '2 days')") == "weeks_days"
    with pytest.raises(ValueError):
        rules.answer_kind("text", "x")
    with pytest.raises(ValueError):
        rules.canonical_truth("date", "13/45/2020")
    with pytest.raises(ValueError):
        rules.canonical_truth("integer", "2.5")
    assert not rules.is_correct("decimal", "abc", "1", "0", "2")


def test_medcalc_malformed_row(tmp_path: Path) -> None:
    (tmp_path / "medcalc").mkdir()
    path = tmp_path / "medcalc" / "test_data.csv"
    header = ("Row Number,Calculator ID,Calculator Name,Category,Output Type,Note ID,Note Type,"
              "Patient Note,Question,Relevant Entities,Ground Truth Answer,Lower Limit,"
              "Upper Limit,Ground Truth Explanation\n")  # fmt: skip
    path.write_text(header + "1,2,CrCl,lab,decimal,n,Extracted,note,q?,{},abc,1,2,e\n")
    with pytest.raises(DatasetError, match=r"test_data.csv:2: expected a number, got 'abc'"):
        get_task("medcalc", tmp_path).load_samples()
    path.write_text("Row Number,Question\n1,q\n")
    with pytest.raises(DatasetError, match=r"test_data.csv:1: expected the columns"):
        get_task("medcalc", tmp_path).load_samples()


def test_malformed_mmlu_pro_row(tmp_path: Path) -> None:
    (tmp_path / "mmlu_pro").mkdir()
    row = {"question_id": 1, "question": "q", "options": ["a", "b"], "answer_index": 5,
           "category": "math"}  # fmt: skip
    (tmp_path / "mmlu_pro" / "test.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(DatasetError, match=r"test.jsonl:1: answer index 5 is not among 2"):
        get_task("mmlu_pro", tmp_path).load_samples()


# -- hub loaders on small files in the hub's format -----------------------------------------
def _jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _headqa_row(qid: int, ra: int, category: str, image: str = "") -> dict[str, object]:
    return {
        "name": "Cuaderno_2013_1_B", "year": "2013", "category": category, "qid": qid,
        "qtext": f"Question {qid}?", "ra": ra, "image": image,
        "answers": [{"aid": i, "atext": f"answer {i}"} for i in (1, 2, 3, 4)],
    }  # fmt: skip


def test_headqa_from_hub_files(tmp_path: Path) -> None:
    folder = tmp_path / "headqa"
    _jsonl(
        folder / "test.jsonl",
        [_headqa_row(1, 3, "medicine"), _headqa_row(2, 1, "biology", "img.png")],
    )
    _jsonl(folder / "train.jsonl", [_headqa_row(10 + i, 2, "medicine") for i in range(4)])
    task = get_task("headqa", tmp_path)
    [sample] = task.load_samples()  # the image question is left out
    assert sample.id == "headqa-Cuaderno_2013_1_B-1" and sample.target == "C"
    assert sample.fields["options"][2] == ("C", "answer 3")
    assert len(task.exemplars_for(sample, task.load_train_pool())) == 3
    bad = _headqa_row(5, 9, "medicine")
    _jsonl(folder / "test.jsonl", [bad])
    with pytest.raises(DatasetError, match="row 0: ra 9 is not one answer's aid"):
        get_task("headqa", tmp_path).load_samples()


def test_medbullets_from_hub_files(tmp_path: Path) -> None:
    rows = [
        {"idx": f"q{i}", "question": f"A patient {i}?", "answer": "BCDA"[i % 4], "explanation": "why",
         "options": {"A": "a", "B": "b", "C": "c", "D": "d", "E": None}, "link": ""}
        for i in range(40)
    ]  # fmt: skip
    _jsonl(tmp_path / "medbullets" / "test.jsonl", rows)
    task = get_task("medbullets", tmp_path)
    samples, pool = task.load_samples(), task.load_train_pool()
    assert (len(samples), len(pool)) == (36, 4) and not {s.id for s in samples} & {
        s.id for s in pool
    }
    assert all(len(s.fields["options"]) == 4 for s in samples)
    assert {s.id: s.target for s in samples}["medbullets-q1"] == "C"
    assert "40 -> 36" in task.split_notes()[0]
    assert task.explanation(task.exemplars_for(samples[0], pool)[0]) == "why"
    rows[0]["answer"] = "E"
    _jsonl(tmp_path / "medbullets" / "test.jsonl", rows)
    with pytest.raises(DatasetError, match="row 0: answer 'E' is not one of the option letters"):
        get_task("medbullets", tmp_path).load_samples()


def _medec_row(i: int, flag: int) -> dict[str, object]:
    return {
        "Text ID": f"ms-{i}", "Text": "A man. He has flu. Give insulin.",
        "Sentences": "0 A man.\n1 He has flu.\n2 Give insulin.", "Error Flag": flag,
        "Error Type": "treatment" if flag else None, "Error Sentence ID": 2 if flag else -1,
        "Error Sentence": "Give insulin." if flag else "NA",
        "Corrected Sentence": "Give oseltamivir." if flag else "NA", "Corrected Text": "NA",
    }  # fmt: skip


def test_medec_from_hub_files(tmp_path: Path) -> None:
    _jsonl(tmp_path / "medec" / "test.jsonl", [_medec_row(0, 1), _medec_row(1, 0)])
    _jsonl(tmp_path / "medec" / "train.jsonl", [_medec_row(i, i % 2) for i in range(2, 8)])
    task = get_task("medec", tmp_path)
    flagged, correct = task.load_samples()
    assert (flagged.target, flagged.shown_answer) == ("ERROR", "2 Give oseltamivir.")
    assert (correct.target, correct.shown_answer) == ("CORRECT", "CORRECT")
    assert flagged.fields["text"].startswith("0 A man.")
    shots = task.exemplars_for(flagged, task.load_train_pool())
    assert [s.target for s in shots] == ["ERROR", "CORRECT", "ERROR"]
    assert task.check(flagged, "2 Give oseltamivir.").resolved
    assert task.check(correct, "CORRECT").resolved
    assert not task.check(correct, "2 Give oseltamivir.").resolved


@pytest.mark.parametrize(("completion", "verdict"), [
    ("CORRECT", "CORRECT"),
    ("2 Give oseltamivir instead of insulin.", "ERROR"),
    ("The note contains a medical error in sentence 2.", "ERROR"),
    ("Sentence 1 looks wrong at first, but there is no medical error. CORRECT", "CORRECT"),
    ("The text does not contain any error.", "CORRECT"),
    ("The text is INCORRECT", None),
    ("I am not sure.", None),
    # Negated: "an error" inside "does not contain an error" is no error.
    ("The note does not contain an error.", "CORRECT"),
    ("The note doesn't have an error.", "CORRECT"),
    ("I don't think there is an error in this note.", "CORRECT"),
    ("There is no error. Actually, sentence 4 contains an error.", "ERROR"),
    # Typographic apostrophes, as many models write them, read as the straight ones.
    ("The note doesn\u2019t contain an error.", "CORRECT"),
    ("I don\u2019t think there\u2019s an error in this note.", "CORRECT"),
    ("There\u2019s an error in sentence 3.", "ERROR"),
])  # fmt: skip
def test_medec_verdicts(completion: str, verdict: str | None) -> None:
    assert read_medec_verdict(completion) == verdict


@pytest.mark.parametrize("name", ["headqa", "medbullets", "medec"])
def test_hub_only_tasks_say_so_with_a_data_dir(data_dir: Path, name: str) -> None:
    with pytest.raises(DatasetError, match=r"no offline copy .* Hugging Face hub"):
        get_task(name, data_dir).load_samples()


# -- prompts ------------------------------------------------------------------------------
def _real_samples(name: str, data_dir: Path, tmp_path: Path) -> list[Sample]:
    if name in ("mmlu_pro", "gpqa", "medcalc"):
        return get_task(name, data_dir).load_samples()[:1]
    if name == "headqa":
        _jsonl(tmp_path / "headqa" / "test.jsonl", [_headqa_row(1, 3, "medicine")])
    elif name == "medbullets":
        row = {"idx": "1", "question": "q?", "answer": "A",
               "options": {"A": "a", "B": "b", "C": "c", "D": "d"}}  # fmt: skip
        _jsonl(tmp_path / "medbullets" / "test.jsonl", [row] * 1)
        return get_task(name, tmp_path).load_train_pool()
    else:
        _jsonl(tmp_path / "medec" / "test.jsonl", [_medec_row(0, 1)])
    return get_task(name, tmp_path).load_samples()


@pytest.mark.parametrize("name", ALL)
def test_helm_and_dspy_sections_render(name: str, data_dir: Path, tmp_path: Path) -> None:
    task = get_task(name, data_dir)
    [sample] = _real_samples(name, data_dir, tmp_path)
    prompts = task.prompts
    baseline = prompts.render("helm_baseline", prompts.text("helm_baseline", "user"), sample.fields)
    dspy = prompts.section("dspy")
    assert (
        prompts.text("dspy", "instruction") and dspy["output"] == "answer" and dspy["output_desc"]
    )
    inputs = {k: prompts.render("dspy", v, sample.fields) for k, v in dspy["inputs"].items()}
    assert all(inputs.values())
    if "options" in sample.fields:
        options = sample.fields["options"]
        first = options[0]
        line = (
            f"({first[0]}) {first[1]}"
            if name in ("mmlu_pro", "gpqa")
            else f"{first[0]}. {first[1]}"
        )
        assert line in baseline and baseline.count("\n") >= len(options)
        assert inputs["choices"].splitlines()[0] == line
        assert set(inputs) == {"question", "choices"}
    if name in ("mmlu_pro", "gpqa"):
        assert baseline.startswith("What is the correct answer to this question: ")
        assert "\nChoices:\n(A) " in baseline
        assert baseline.endswith('"The correct answer is (insert answer here)".')
    if name == "medcalc":
        assert set(inputs) == {"patient_note", "question"}
        assert baseline.endswith(
            "Answer only the requested quantity without units. No explanation needed:"
        )
    for section in HPT_SECTIONS:
        assert prompts.has(section)


def test_gsm8k_gains_helm_and_dspy_sections(data_dir: Path) -> None:
    task = get_task("gsm8k", data_dir)
    sample = task.load_samples()[0]
    baseline = task.prompts.render(
        "helm_baseline", task.prompts.text("helm_baseline", "user"), sample.fields
    )
    assert baseline == f"Q: {sample.fields['question']}\nA:"
    assert task.prompts.render(
        "dspy", task.prompts.section("dspy")["inputs"]["question"], sample.fields
    )
    assert task.load_train_pool()  # the default: the exemplar pool


@pytest.mark.parametrize("name", ["mmlu_pro", "gpqa", "medcalc"])
def test_hpt_ladder_prompts_render(name: str, data_dir: Path) -> None:
    task = get_task(name, data_dir)
    sample, pool = task.load_samples()[0], task.load_train_pool()
    p: PromptSet = task.prompts
    for section in ("role", "zero_shot_cot"):
        assert p.render(section, p.text(section, "user"), sample.fields)
    shots = [
        p.render("three_shot_cot", p.text("three_shot_cot", "exemplar"),
                 {**ex.fields, "answer": ex.shown_answer or ex.target})
        for ex in task.exemplars_for(sample, pool)
    ]  # fmt: skip
    assert p.render(
        "three_shot_cot",
        p.text("three_shot_cot", "user"),
        {**sample.fields, "exemplars": " ".join(shots)},
    )
    for step in p.texts("least_to_most", "steps"):
        assert p.render("least_to_most", step, {**sample.fields, "previous": "x"})
    for key in ("knowledge", "user"):
        assert p.render(
            "generated_knowledge",
            p.text("generated_knowledge", key),
            {**sample.fields, "knowledge": "k"},
        )


# What a careful reader takes when a completion goes on after its answer: a threshold, an
# input, another quantity, or a check that confirms. {T} is the row's own truth.
AFTER_THE_ANSWER = [
    ("4", "Therefore, the CHA2DS2-VASc score is {T}. Anticoagulation is recommended since the "
          "score is at least 2."),
    ("4", "The score is {T}.\nRisk category: high (>= 2)."),
    ("4", "Score = {T}. Annual stroke risk is 4.8%."),
    ("4", "Answer: 7. Wait, I made a mistake: the score is {T}."),
    ("2", "So the patient's CrCl is approximately {T} mL/min. Weight = 48 kg was used."),
    ("2", "CrCl = {T} mL/min.\n\nKey values: age 87, weight 48 kg, SCr 1.4 mg/dL."),
    ("2", "CrCl ≈ {T} mL/min. The creatinine is 1.4 mg/dL."),
    ("7", "The normal albumin concentration is set to 4 g/dL, so the corrected calcium is {T}."),
    ("2", "Answer: {T} mL/min\nWait, let me double-check: 53*48 = 2544. Yes, {T} is right."),
    ("2", "Answer: {T} mL/min\n\nWait, I should verify the weight: 48 kg is correct."),
    ("2", "The answer is {T}.\nI made an error earlier in the BMI step but it does not change "
          "the result."),
    ("13", "The due date is {T}, which is 40 weeks after the LMP of 12/17/2013."),
    ("13", "The LMP was 12/17/2013. Adding 280 days gives {T}."),
]  # fmt: skip


@pytest.fixture(scope="module")
def medcalc(data_dir: Path) -> tuple[MedCalc, dict[str, Sample]]:
    task = get_task("medcalc", data_dir)
    assert isinstance(task, MedCalc)
    first: dict[str, Sample] = {}
    for s in task.load_samples():
        first.setdefault(s.meta["calculator_id"], s)
    return task, first


@pytest.mark.parametrize(("calculator", "template"), AFTER_THE_ANSWER)
def test_medcalc_reads_the_answer_not_what_follows_it(
    medcalc: tuple[MedCalc, dict[str, Sample]], calculator: str, template: str
) -> None:
    task, first = medcalc
    sample = first[calculator]
    completion = template.replace("{T}", sample.target)
    assert task.check(sample, completion).resolved, task.parse(completion, sample)


def test_medcalc_takes_no_value_of_another_quantity(
    medcalc: tuple[MedCalc, dict[str, Sample]],
) -> None:
    """The embedded model's reply to a corrected-calcium question: its one number is the
    albumin value the question gives ("You may take the normal albumin concentration to be
    4 g/dL"), not an answer."""
    task, first = medcalc
    reply = "In this scenario, you have to set your normal albumin concentration to 4g/dL."
    assert task.parse(reply, first["7"]) is None


@pytest.mark.parametrize(
    "after",
    [
        "A value of 2 or more is considered clinically significant.",
        "Note: the normal range is 0 to 5.",
        "Wait, let me double-check the inputs: the age is 60 years.",
    ],
)
def test_medcalc_explanations_with_a_sentence_after_still_read(
    medcalc: tuple[MedCalc, dict[str, Sample]], after: str
) -> None:
    """Each evaluated row's own explanation, with one sentence after it that states no new
    answer, still reads as the truth (before this reader, most rows misread)."""
    task, _ = medcalc
    wrong = [s.id for s in task.load_samples()
             if not task.check(s, f"{task.explanation(s)}\n{after}").resolved]  # fmt: skip
    assert wrong == []
