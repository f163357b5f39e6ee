"""HPI_dataset as the paper makes it: sources, the penalty from annotations by hand,
Krippendorff's alpha against published values, the representative set, and how a run
chooses each dataset's penalty."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hpt.orchestrator.annotate import allocate, representative_set, set_size
from hpt.orchestrator.penalties import penalty_notices, run_penalties
from hpt.orchestrator.spec import ConfigError, RunSpec
from hpt.results.annotations import (
    AnnotationsError,
    annotations_file,
    append_annotation,
    read_annotations,
)
from hpt.results.penalties import (
    CRITERIA,
    TABLE_4,
    UNSTATED,
    Annotation,
    AnnotatorKind,
    Penalty,
    Scores,
    annotated_penalties,
    annotated_penalty,
    krippendorff_alpha,
    scored_outside,
)
from hpt.tasks import TASKS, get_task

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 observers x 12 units,
# None where an observer gave no value. Published: ordinal 0.815, interval 0.849.
K2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]
# Three coders x 15 units (Wikipedia's computational example); interval alpha 0.810845.
WIKI = [
    [None, None, None, None, None, 3, 4, 1, 2, 1, 1, 3, 3, None, 3],
    [1, None, 2, 1, 3, 3, 4, 3, None, None, None, None, None, None, None],
    [None, None, 2, 1, 3, 4, 4, None, 2, 1, 1, 3, 3, None, 4],
]


def units(rows: list[list[int | None]]) -> list[list[float]]:
    return [[float(r[i]) for r in rows if r[i] is not None] for i in range(len(rows[0]))]


def test_alpha_matches_published_values() -> None:
    assert round(krippendorff_alpha(units(K2011), "ordinal") or 0, 3) == 0.815
    assert round(krippendorff_alpha(units(K2011), "interval") or 0, 3) == 0.849
    assert round(krippendorff_alpha(units(WIKI), "interval") or 0, 6) == 0.810845


def test_alpha_by_hand() -> None:
    # Two coders: agree on 1 and on 2, split 1/2 once. Coincidences o11 = o22 = 2,
    # o12 = o21 = 1; n1 = n2 = 3, n = 6; alpha = 1 - 5 * 2 / (3 * 3 * 2) = 4/9 (one distance,
    # so ordinal and interval agree).
    data = [[1.0, 1.0], [2.0, 2.0], [1.0, 2.0]]
    assert krippendorff_alpha(data, "interval") == pytest.approx(4 / 9)
    assert krippendorff_alpha(data, "ordinal") == pytest.approx(4 / 9)
    # Nothing to compare, or nothing to disagree about: no alpha.
    assert krippendorff_alpha([[1.0], [3.0]], "ordinal") is None
    assert krippendorff_alpha([[2.0, 2.0], [2.0, 2.0]], "interval") is None
    assert krippendorff_alpha([[1.0, 1.0], [5.0, 5.0]], "ordinal") == 1.0


def note(
    who: str, sample: str, *scores: int, kind: AnnotatorKind = "human", dataset: str = "gpqa"
) -> Annotation:
    named = dict(zip(CRITERIA, scores, strict=True))
    return Annotation(dataset=dataset, sample_id=sample, annotator=who, kind=kind,
                      scores=Scores.model_validate(named))  # fmt: skip


def test_penalty_from_annotations_by_hand() -> None:
    notes = [
        note("alice", "s1", 1, 2, 3, 4),  # 2.5
        note("carol", "s1", 2, 2, 3, 5),  # 3.0 -> s1: 2.75
        note("alice", "s2", 3, 3, 3, 3),  # 3.0
        note("carol", "s2", 4, 4, 4, 4),  # 4.0 -> s2: 3.5
        note("alice", "s3", 5, 5, 5, 5),  # replaced by alice's later line:
        note("alice", "s3", 1, 1, 1, 1),  # 1.0 -> s3: 1.0
        note("model:openai:x", "s1", 5, 5, 5, 5, kind="model"),  # never mixed with people
        note("alice", "s9", 5, 5, 5, 5),  # not in the set: counts nowhere
    ]
    within = ["s1", "s2", "s3"]
    human = annotated_penalty(notes, "gpqa", "human", within)
    assert human is not None and human.complete and human.set_size == 3
    assert human.value == pytest.approx((2.75 + 3.5 + 1.0) / 3)
    assert (human.samples, human.annotations, human.annotators) == (3, 5, ["alice", "carol"])
    mean = (2.75 + 3.5 + 1.0) / 3
    sd = math.sqrt(((2.75 - mean) ** 2 + (3.5 - mean) ** 2 + (1.0 - mean) ** 2) / 2)
    assert human.sd == pytest.approx(sd)
    assert human.ci95 is not None and human.ci95[0] <= human.value <= human.ci95[1]
    assert human.criteria["reproduction"] == pytest.approx((1.5 + 3.5 + 1.0) / 3)
    # Alpha over the 8 units (s1, s2 x 4 criteria) both people scored.
    assert human.paired_units == 8
    pairs = [[1, 2], [2, 2], [3, 3], [4, 5], [3, 4], [3, 4], [3, 4], [3, 4]]
    assert human.alpha_interval == pytest.approx(
        krippendorff_alpha([[float(v) for v in p] for p in pairs], "interval")
    )
    model = annotated_penalty(notes, "gpqa", "model", within)
    assert model is not None and model.value == 5.0 and model.samples == 1
    assert not model.complete and model.coverage("f") == (
        "model annotations in f score 1 of 3 samples of the representative set"
    )
    assert model.source("f").label == "model annotator: openai:x over 1 sample (f)"
    assert human.source("f").label == "annotated: 2 humans over 3 samples (f)"
    assert annotated_penalty(notes, "mmlu", "human", within) is None
    # People's first, then the model's; one sample scored outside the set.
    assert annotated_penalties(notes, "gpqa", within) == [human, model]
    assert scored_outside(notes, "gpqa", within) == 1
    # Another set (one more sample, unscored): the same scores, no longer the whole set.
    wider = annotated_penalty(notes, "gpqa", "human", [*within, "s4"])
    assert wider is not None and (wider.value, wider.samples, wider.set_size) == (
        human.value, 3, 4
    )  # fmt: skip
    assert not wider.complete


def test_annotations_file_appends_and_reads_back(tmp_path: Path) -> None:
    path = annotations_file(tmp_path / "deep", "gpqa")
    append_annotation(path, note("alice", "s1", 1, 2, 3, 4))
    append_annotation(path, note("carol", "s1", 2, 2, 2, 2))
    assert [a.annotator for a in read_annotations(path)] == ["alice", "carol"]
    # A session killed mid-line leaves a torn tail: skipped, not an error.
    with path.open("a") as fh:
        fh.write('{"dataset": "gpqa", "sample_id": "s2", "annot')
    assert len(read_annotations(path)) == 2
    # A damaged line elsewhere is one clear error naming the line.
    path.write_text(path.read_text().replace('"reasoning":2', '"reasoning":9', 1) + "\n")
    with pytest.raises(AnnotationsError, match=r"gpqa\.jsonl:2: scores\.reasoning"):
        read_annotations(path)
    assert read_annotations(tmp_path / "missing.jsonl") == []


TABLE_4_VALUES = {"mmlu": 3.03, "gsm8k": 2.14, "humaneval": 4.68, "boolq": 1.71, "csqa": 2.52,
                  "iwslt": 1.92, "samsum": 2.23}  # fmt: skip
BORROWED = {"mmlu_pro": "mmlu", "gpqa": "mmlu", "headqa": "mmlu", "medbullets": "mmlu",
            "medcalc": "gsm8k", "medec": "boolq"}  # fmt: skip


def test_every_dataset_says_where_its_penalty_comes_from() -> None:
    for name, cls in TASKS.items():
        if name not in {*TABLE_4_VALUES, *BORROWED, "depthqa"}:
            continue  # a plugin's, registered by another test
        assert cls.penalty_source != UNSTATED, name
        if name in TABLE_4_VALUES:
            assert (cls.penalty, cls.penalty_source) == (TABLE_4_VALUES[name], TABLE_4), name
        elif name in BORROWED:
            lender = TASKS[BORROWED[name]]
            assert cls.penalty == lender.penalty, name
            assert cls.penalty_source.label == f"borrowed from {lender.title} (no annotation)"
            assert not cls.penalty_source.by_humans
    assert not TASKS["depthqa"].penalty_source.by_humans


def test_set_size_and_allocation() -> None:
    assert [set_size(n, 0.05) for n in (1319, 164, 3270, 10, 1)] == [66, 8, 164, 1, 1]
    # One per category at least; the rest by largest remainder; never above a category's size.
    assert allocate({"a": 90, "b": 9, "c": 1}, 10) == {"a": 8, "b": 1, "c": 1}
    assert allocate({"a": 50, "b": 30, "c": 20}, 10) == {"a": 5, "b": 3, "c": 2}
    assert allocate({"a": 2, "b": 2, "c": 2, "d": 2}, 2) == {"a": 1, "b": 1, "c": 1, "d": 1}
    assert allocate({"a": 1, "b": 100}, 50) == {"a": 1, "b": 49}


def test_representative_set_spreads_over_categories(data_dir: Path) -> None:
    task = get_task("mmlu_pro", data_dir)
    drawn = representative_set(task, seed=0)
    population = task.load_samples()
    assert drawn.stratum == "category" and drawn.population == len(population)
    assert len(drawn.samples) == set_size(len(population), 0.05)
    sizes: dict[str, int] = {}
    for s in population:
        sizes[s.meta["category"]] = sizes.get(s.meta["category"], 0) + 1
    got: dict[str, int] = {}
    for s in drawn.samples:
        got[s.meta["category"]] = got.get(s.meta["category"], 0) + 1
    assert set(got) == set(sizes) and drawn.strata == len(sizes)
    for category, n in sizes.items():  # proportional, within one
        assert abs(got[category] - len(drawn.samples) * n / len(population)) < 1
    # Seeded: the same draw again, another with another seed; categories mixed in the order.
    assert [s.id for s in representative_set(task, seed=0).samples] == [s.id for s in drawn.samples]
    assert {s.id for s in representative_set(task, seed=1).samples} != {s.id for s in drawn.samples}
    assert len({s.meta["category"] for s in drawn.samples[:10]}) > 1


def test_representative_set_without_categories(data_dir: Path) -> None:
    drawn = representative_set(get_task("gsm8k", data_dir), seed=3)
    assert drawn.stratum is None and len(drawn.samples) == 66
    assert len({s.id for s in drawn.samples}) == 66


def test_penalty_bare_number_is_set_by_hand() -> None:
    p = Penalty.model_validate(2.5)
    assert (p.value, p.source.kind) == (2.5, "set")
    with pytest.raises(ValueError):
        Penalty.model_validate(-1)
    for bad in ("inf", "nan"):  # a config file's inf: every HPI would be infinite
        with pytest.raises(ValueError):
            Penalty.model_validate(float(bad))


def test_how_a_run_chooses_penalties(tmp_path: Path, data_dir: Path) -> None:
    spec = RunSpec(dataset=["boolq", "gpqa", "medcalc"])
    chosen = run_penalties(spec)
    assert chosen["boolq"] == Penalty(value=1.71, source=TABLE_4)
    assert chosen["gpqa"].source.label == "borrowed from MMLU (no annotation)"
    notices = penalty_notices(chosen)
    assert [n.split(":")[0] for n in notices] == ["gpqa", "medcalc"]
    assert "borrowed from GSM8K (no annotation)" in notices[1]
    assert "hpt annotate medcalc" in notices[1]

    # Annotations measure it once they cover the representative set (people's over a
    # model's); a value set by hand wins over both.
    ids = [s.id for s in representative_set(get_task("gpqa", data_dir)).samples]
    assert len(ids) == 9

    def penalty() -> Penalty:
        spec = RunSpec(dataset=["gpqa"], annotations=tmp_path, data_dir=data_dir)
        return run_penalties(spec)["gpqa"]

    path = annotations_file(tmp_path, "gpqa")
    for sample_id in ids:
        append_annotation(path, note("model:m", sample_id, 5, 5, 5, 5, kind="model"))
    with_model = penalty()
    assert (with_model.value, with_model.source.kind) == (5.0, "model")
    assert with_model.source.label == f"model annotator: m over 9 samples ({path})"
    assert "a model's scores" in penalty_notices({"gpqa": with_model})[0]
    for sample_id in ids:
        append_annotation(path, note("alice", sample_id, 1, 2, 3, 4))
    by_people = penalty()
    assert (by_people.value, by_people.source.kind) == (2.5, "human")
    assert by_people.source.note is None and penalty_notices({"gpqa": by_people}) == []
    given = RunSpec(dataset=["gpqa"], annotations=tmp_path, penalties={"gpqa": 4.0})
    assert run_penalties(given)["gpqa"].value == 4.0
    assert penalty_notices(run_penalties(given)) == []

    with pytest.raises(ConfigError, match="csqa, which the run does not evaluate"):
        run_penalties(RunSpec(dataset=["gpqa"], penalties={"csqa": 1.0}))
    with pytest.raises(ConfigError, match="no such directory"):
        run_penalties(RunSpec(dataset=["gpqa"], annotations=tmp_path / "nope"))


def test_a_partly_annotated_set_is_not_used(tmp_path: Path, data_dir: Path) -> None:
    """2 of GSM8K's 66 samples scored by one person, and samples of another set: the set is
    not measured, so table 4's penalty stays, and the run's notice says why."""
    task = get_task("gsm8k", data_dir)
    ids = [s.id for s in representative_set(task).samples]
    others = [s.id for s in representative_set(task, seed=1).samples if s.id not in ids]
    assert len(ids) == 66 and len(others) > 4
    path = annotations_file(tmp_path, "gsm8k")

    def add(who: str, sample_ids: list[str], *scores: int, kind: AnnotatorKind = "human") -> None:
        for sample_id in sample_ids:
            append_annotation(path, note(who, sample_id, *scores, kind=kind, dataset="gsm8k"))

    def penalty() -> Penalty:
        spec = RunSpec(dataset=["gsm8k"], annotations=tmp_path, data_dir=data_dir)
        return run_penalties(spec)["gsm8k"]

    add("bob", others[:4], 5, 5, 5, 5)  # another --seed's set only: none of this one
    none_of_it = penalty()
    assert (none_of_it.value, none_of_it.source.kind) == (2.14, "paper")
    assert "score none of the 66 samples" in (none_of_it.source.note or "")
    assert "only 4 of another set" in (none_of_it.source.note or "")
    add("alice", ids[:2], 1, 1, 1, 1)
    partial = penalty()
    assert (partial.value, partial.source.label) == (2.14, TABLE_4.label)
    assert partial.source.note == (
        f"human annotations in {path} score 2 of 66 samples of the representative set: not "
        "used until every one is scored (`hpt annotate gsm8k`)"
    )
    assert penalty_notices({"gsm8k": partial}) == [
        f"gsm8k: an unresolved sample scores m + 2.14, {TABLE_4.label}; {partial.source.note}"
    ]
    # A model scored the whole set: its penalty is used, the people's partial set noted.
    add("model:m", ids, 3, 3, 3, 3, kind="model")
    modelled = penalty()
    assert (modelled.value, modelled.source.kind) == (3.0, "model")
    (notice,) = penalty_notices({"gsm8k": modelled})
    assert "score 2 of 66 samples" in notice and "a model's scores" in notice
    # People finish the set: theirs, over the 66 samples only (bob's 4 left out).
    add("carol", ids[2:], 2, 2, 2, 2)
    done = penalty()
    assert done.value == pytest.approx((2 * 1 + 64 * 2) / 66)
    assert done.source.label == f"annotated: 2 humans over 66 samples ({path})"
    assert done.source.note is None and penalty_notices({"gsm8k": done}) == []


def test_resuming_needs_no_annotations_directory(tmp_path: Path) -> None:
    """Penalties saved in run.json (or set by hand) need no annotations folder: it may be gone."""
    saved = Penalty(value=2.5, source=TABLE_4)
    spec = RunSpec(dataset=["boolq"], penalties={"boolq": saved}, annotations=tmp_path / "gone")
    assert run_penalties(spec) == {"boolq": saved}
    with pytest.raises(ConfigError, match="no such directory"):  # gpqa still needs one
        run_penalties(spec.model_copy(update={"dataset": ["boolq", "gpqa"]}))
