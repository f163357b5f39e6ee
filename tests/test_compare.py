"""Chance levels and paired comparisons end to end: three scripted models with known
per-sample outcomes run through ``hpt run`` against a loopback OpenAI-compatible server, then
``hpt compare`` and ``hpt report`` over the run; the expected numbers are worked out by hand
from the samples' gold answers."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from hpt.results.records import SampleRecord
from hpt.results.tally import Tally
from tests.run_fixtures import make_record, write_run
from tests.servers.answer_key import KeyedResponder
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_cli import assert_user_error, hpt

N = 6
PENALTY = 1.71  # BoolQ's HPI_dataset
# A coin-flip guesser on BoolQ's five-level ladder: sum_j j/2^j (j = 1..5) + (5 + 1.71)/2^5.
CHANCE_HPI = (16 + 16 + 12 + 8 + 5) / 32 + (5 + PENALTY) / 32
CHANCE_ACCURACY = 31 / 32


@pytest.fixture(scope="module")
def three_models(tmp_path_factory, data_dir, boolq_answers) -> tuple[Path, list[dict[str, Any]]]:
    """alpha and gamma resolve every sample at level 1; beta resolves at level 2 the samples
    whose answer is True and never resolves the others."""
    only_true = {k: v for k, v in boolq_answers.items() if v == "True"}
    players = {
        "alpha": KeyedResponder(boolq_answers, "role"),
        "gamma": KeyedResponder(boolq_answers, "role"),
        "beta": KeyedResponder(only_true, "zero_shot_cot"),
    }
    fake = FakeOpenAI(responder=lambda body: players[body["model"]](body), model_ids=tuple(players))
    server = ServerThread(fake.app()).start()
    home = tmp_path_factory.mktemp("compare")
    out, config = home / "run", home / "models.toml"
    config.write_text("".join(
        f'[models.{name}]\nprovider = "openai"\nmodel = "{name}"\n'
        f'endpoints = ["{server.base_url}"]\n\n'
        for name in players
    ))  # fmt: skip
    try:
        result = hpt("run", "--config", str(config), "--dataset", "boolq", "--model", "alpha",
                     "--model", "beta", "--model", "gamma", "--data-dir", str(data_dir),
                     "--out", str(out), "--limit", str(N), "--no-cache")  # fmt: skip
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return out, records


def _targets(records: list[dict[str, Any]]) -> tuple[int, int]:
    targets = {r["sample_id"]: r["target"] for r in records}
    trues = sum(t == "True" for t in targets.values())
    return trues, len(targets) - trues


def test_the_scripted_models_did_what_they_were_told(three_models) -> None:
    _, records = three_models
    trues, falses = _targets(records)
    assert trues and falses, "the test needs both answers among the samples"
    for r in records:
        model = r["model"]
        expected = 1 if model != "beta" else (2 if r["target"] == "True" else None)
        assert r["resolved_level"] == expected
        assert r["options"] == 2


def test_summaries_carry_the_chance_levels(three_models) -> None:
    out, _ = three_models
    cells = {c["model"]: c for c in json.loads((out / "summary.json").read_text())["cells"]}
    for cell in cells.values():
        assert cell["chance_hpi"] == pytest.approx(CHANCE_HPI)
        assert cell["chance_accuracy"] == pytest.approx(CHANCE_ACCURACY)
        assert cell["chance_level1_accuracy"] == pytest.approx(0.5)
    assert cells["alpha"]["hpi_skill"] == pytest.approx(1.0)  # everything at level 1
    beta = cells["beta"]
    assert beta["hpi_skill"] == pytest.approx((CHANCE_HPI - beta["hpi"]) / (CHANCE_HPI - 1))
    assert beta["hpi_skill"] < 0  # worse than flipping a coin at every level


def test_compare_all_pairs(three_models, tmp_path) -> None:
    out, records = three_models
    trues, falses = _targets(records)
    result = hpt("compare", str(out), "--out", str(tmp_path / "cmp"), "--detect", "0.5")
    assert result.returncode == 0, result.stderr
    found = json.loads((tmp_path / "cmp" / "comparisons.json").read_text())
    pairs = {(c["model_a"], c["model_b"]): c for c in found}
    assert list(pairs) == [("alpha", "beta"), ("alpha", "gamma"),
                           ("beta", "gamma")]  # fmt: skip
    for c in found:
        assert (c["dataset"], c["mode"], c["n"]) == ("boolq", "standard", N)
    ab = pairs[("alpha", "beta")]
    # alpha scores 1 everywhere; beta 2 on a True sample and 5 + 1.71 on a False one.
    diff = -(trues * 1 + falses * (4 + PENALTY)) / N
    assert ab["hpi_diff"] == pytest.approx(diff)
    assert ab["hpi_diff_low"] <= diff <= ab["hpi_diff_high"]
    assert ab["hpi_diff_high"] < 0
    # Every one of the N differences is negative: of the 2^N sign patterns only the observed
    # one and its mirror are as extreme.
    assert ab["hpi_p"] == pytest.approx(2 / 2**N)
    assert ab["accuracy_diff"] == pytest.approx(falses / N)
    assert (ab["only_a_resolved"], ab["only_b_resolved"]) == (falses, 0)
    assert ab["mcnemar_p"] == pytest.approx(min(1.0, 2 / 2**falses))
    ag = pairs[("alpha", "gamma")]
    assert (ag["hpi_diff"], ag["hpi_p"], ag["mcnemar_p"]) == (0.0, 1.0, 1.0)
    assert ag["hpi_diff_low"] == ag["hpi_diff_high"] == 0.0
    bg = pairs[("beta", "gamma")]
    assert bg["hpi_diff"] == pytest.approx(-diff)
    # Holm over the three: p = (2/64, 1, 2/64) -> (3 * 2/64, 1, 3 * 2/64).
    assert [c["p_holm"] for c in found] == pytest.approx([6 / 64, 1.0, 6 / 64])
    # Sizing: the paired differences' spread gives the detectable difference and the
    # samples a difference of 0.5 needs.
    diffs = [-1.0] * trues + [-(4 + PENALTY)] * falses
    mean = sum(diffs) / N
    spread = (sum((d - mean) ** 2 for d in diffs) / (N - 1)) ** 0.5
    z = 1.959963984540054 + 0.8416212335729143
    assert ab["hpi_diff_sd"] == pytest.approx(spread)
    assert ab["hpi_mde"] == pytest.approx(z * spread / N**0.5)
    assert ab["n_to_detect"] == -(-((z * spread / 0.5) ** 2) // 1)
    table = (tmp_path / "cmp" / "comparisons.md").read_text()
    assert "| boolq | standard | alpha | beta | 6 |" in table
    assert "n to detect 0.5" in table
    for ext in ("png", "svg"):
        assert (tmp_path / "cmp" / f"paired_differences.{ext}").stat().st_size > 1000


def test_compare_against_a_baseline(three_models, tmp_path) -> None:
    out, _ = three_models
    result = hpt("compare", str(out), "--baseline", "beta", "--out", str(tmp_path),
                 "--no-plots")  # fmt: skip
    assert result.returncode == 0, result.stderr
    found = json.loads((tmp_path / "comparisons.json").read_text())
    assert [(c["model_a"], c["model_b"]) for c in found] == [
        ("alpha", "beta"),
        ("gamma", "beta"),
    ]
    # Two comparisons, both p = 2/64: Holm doubles the smaller and keeps the order.
    assert [c["p_holm"] for c in found] == pytest.approx([4 / 64, 4 / 64])
    assert not list(tmp_path.glob("*.png"))


def test_report_holds_chance_levels_comparisons_and_sizing(three_models, tmp_path) -> None:
    out, _ = three_models
    result = hpt("report", str(out), "--out", str(tmp_path), "--detect", "0.25", "--no-plots")
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "report.md").read_text()
    assert f"(chance {CHANCE_HPI:.2f})" in text
    for section in ("## Chance levels", "## Paired comparisons", "## Sizing the next run"):
        assert section in text
    beta_row = next(line for line in text.splitlines() if line.startswith("| boolq | beta |"))
    assert beta_row.endswith("below chance |")
    assert "n to detect 0.25" in text
    assert len(json.loads((tmp_path / "comparisons.json").read_text())) == 3
    rows = list(csv.DictReader((tmp_path / "cells.csv").open()))
    assert [float(r["chance_hpi"]) for r in rows] == pytest.approx([CHANCE_HPI] * 3)
    assert "hpi_skill" in rows[0] and "chance_level1_accuracy" in rows[0]


def test_compare_needs_two_models(tmp_path) -> None:
    run = write_run(tmp_path / "one", [make_record(f"s{i}", level=1) for i in range(3)])
    assert_user_error(hpt("compare", str(run)), "nothing to compare", "alpha")


def test_compare_names_the_models_when_the_baseline_is_not_one(three_models, tmp_path) -> None:
    out, _ = three_models
    assert_user_error(
        hpt("compare", str(out), "--baseline", "delta", "--out", str(tmp_path)),
        "delta",
        "alpha, beta, gamma",
    )


def test_compare_refuses_a_missing_directory_and_a_bad_detect(tmp_path) -> None:
    assert_user_error(hpt("compare", str(tmp_path / "nowhere")), str(tmp_path / "nowhere"))
    result = hpt("compare", str(tmp_path), "--detect", "-1")
    assert result.returncode == 2 and "positive" in result.stderr


def test_models_that_share_no_samples_are_named_not_compared(tmp_path) -> None:
    records = [make_record("s1", model="alpha", level=1), make_record("s2", model="beta", level=2)]
    run = write_run(tmp_path / "run", records)
    assert_user_error(
        hpt("compare", str(run), "--out", str(tmp_path / "c")),
        "alpha and beta share no scored sample on boolq",
    )
    # Beside a pair that does share samples, the other is left out and named.
    records += [make_record(f"t{i}", model=m, level=1) for i in range(3) for m in ("beta", "gamma")]
    write_run(tmp_path / "run2", records)
    result = hpt("compare", str(tmp_path / "run2"), "--out", str(tmp_path / "c2"), "--no-plots")
    assert result.returncode == 0, result.stderr
    found = json.loads((tmp_path / "c2" / "comparisons.json").read_text())
    assert [(c["model_a"], c["model_b"], c["n"]) for c in found] == [("beta", "gamma", 3)]
    assert "alpha and gamma share no scored sample on boolq" in result.stdout


def test_models_on_different_ladders_are_not_compared(tmp_path) -> None:
    five = [make_record(f"s{i}", model="alpha", level=1) for i in range(3)]
    three = [
        make_record(f"s{i}", model="beta", level=1, m=3).model_copy(
            update={"strategies": ["role", "zero_shot_cot", "three_shot_cot"]}
        )
        for i in range(3)
    ]
    write_run(tmp_path / "a", five)
    write_run(tmp_path / "b", three)
    assert_user_error(
        hpt("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "c")),
        "alpha and beta climbed different ladders on boolq",
        "same --strategies",
    )
    # The report still stands, and says why it holds no comparison.
    result = hpt("report", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "r"),
                 "--no-plots")  # fmt: skip
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "r" / "report.md").read_text()
    assert "No paired comparisons: alpha and beta climbed different ladders" in text
    assert not (tmp_path / "r" / "comparisons.json").exists()


def test_a_record_with_an_impossible_option_count_is_one_clear_error(tmp_path) -> None:
    run = write_run(tmp_path / "run", [make_record("s1", level=1)])
    line = json.loads((run / "samples.jsonl").read_text())
    line["options"] = 0
    (run / "samples.jsonl").write_text(json.dumps(line) + "\n")
    assert_user_error(hpt("report", str(run), "--no-plots"), "options")


def test_repeated_draws_pair_per_sample_and_leave_mcnemar_out(tmp_path) -> None:
    records = []
    for draw in (0, 1):
        for model, level in (("alpha", 1), ("beta", 2 if draw == 0 else None)):
            r = make_record("s1", model=model, level=level)
            records.append(r.model_copy(update={"draw": draw}))
    write_run(tmp_path / "run", records)
    assert hpt("compare", str(tmp_path / "run"), "--out", str(tmp_path / "c"),
               "--no-plots").returncode == 0  # fmt: skip
    (c,) = json.loads((tmp_path / "c" / "comparisons.json").read_text())
    # One sample: alpha's mean score 1, beta's (2 + 6.71) / 2 (each model's own draws);
    # accuracy 1 against 1/2.
    assert c["n"] == 1 and c["draws"] == 2
    assert c["hpi_diff"] == pytest.approx(1 - (2 + 5 + PENALTY) / 2)
    assert c["accuracy_diff"] == pytest.approx(0.5)
    assert c["mcnemar_p"] is None


def _tally(records: list[SampleRecord], mode: str = "standard") -> Tally:
    tally = Tally(dataset="x", model="m", mode=mode, m=5, penalty=PENALTY)
    for r in records:
        tally.add(r)
    return tally


def test_chance_follows_each_samples_own_option_count() -> None:
    """MMLU-Pro's questions list 1 to 10 options: the cell's chance level is the mean of
    each sample's."""
    ten = make_record("a", level=1).model_copy(update={"options": 10})
    four = make_record("b", level=None).model_copy(update={"options": 4})
    one = make_record("c", level=1).model_copy(update={"options": 1})
    s = _tally([ten, four, one]).summary()

    def hpi(k: int) -> float:
        q = 1 - 1 / k
        return sum(j * q ** (j - 1) / k for j in range(1, 6)) + q**5 * (5 + PENALTY)

    assert s.chance_hpi == pytest.approx((hpi(10) + hpi(4) + 1.0) / 3)
    assert s.chance_accuracy == pytest.approx((1 - 0.9**5 + 1 - 0.75**5 + 1) / 3)
    assert s.chance_level1_accuracy == pytest.approx((0.1 + 0.25 + 1) / 3)


def test_no_chance_level_for_open_answers_adaptive_cells_or_old_records() -> None:
    open_answer = make_record("a", level=1)  # options None: a number, code, free text
    assert _tally([open_answer]).summary().chance_hpi is None
    coin = make_record("b", level=1).model_copy(update={"options": 2})
    assert _tally([coin, open_answer]).summary().chance_hpi is None
    adaptive = make_record("c", level=1, mode="adaptive", iteration=1)
    adaptive = adaptive.model_copy(update={"options": 2})
    summary = _tally([adaptive], mode="adaptive").summary()
    assert (summary.chance_hpi, summary.hpi_skill) == (None, None)
    # Errors are not scored and do not count toward the chance level either.
    failed = make_record("d", level=None, error="boom").model_copy(update={"options": 4})
    s = _tally([coin, failed]).summary()
    assert s.chance_level1_accuracy == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("dataset", "expected"),
    [("boolq", {2}), ("csqa", {5}), ("mmlu", {4}), ("gpqa", {4}), ("gsm8k", {None}),
     ("humaneval", {None}), ("medcalc", {None}), ("samsum", {None}), ("iwslt", {None}),
     ("mmlu_pro", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10})],
)  # fmt: skip
def test_each_dataset_says_how_many_answers_a_guess_picks_from(
    data_dir: Path, dataset: str, expected: set[int | None]
) -> None:
    from hpt.tasks import get_task

    task = get_task(dataset, data_dir)
    assert {task.answer_options(s) for s in task.load_samples()} == expected
