"""Reports of reasoning models' runs (issue 26): cells of different effort or thinking budget
stay apart in every table, in effort order; a model x dataset run at several settings gets a
table of HPI, accuracy, tokens and cost against them; reasoning tokens and truncations are
shown where recorded, and a run without any reasoning setting reports exactly as before."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hpt.reports import api
from hpt.reports.ceiling_inputs import read_runs
from hpt.reports.cells import collect
from hpt.reports.cells_csv import CSV_COLUMNS
from hpt.reports.comparisons import compare
from hpt.reports.efforts import table_efforts
from hpt.reports.truncation import TRUNCATION_WARNING_SHARE, heavily_cut, truncations
from hpt.results.records import Cell, SampleRecord, Selection
from hpt.results.tally import Summary
from tests.run_fixtures import make_record, make_summary, write_run

PRICES = "[alpha]\ninput = 1.0\noutput = 10.0\n[beta]\ninput = 1.0\noutput = 1.0\n"


def thinking(sample_id: str, level: int | None, *, effort: str | None = None,
             budget: int | None = None, model: str = "alpha", dataset: str = "boolq",
             thought: int | None = 10, truncated: dict[int, str] | None = None) -> SampleRecord:  # fmt: skip
    """A climb whose every call thought ``thought`` tokens (None: the provider counted none)
    inside 10 + thought completion tokens; ``truncated``: {level: where} for failed levels."""
    out = 10 + (thought or 0)
    record = make_record(sample_id, model=model, dataset=dataset, level=level, tokens=(100, out))
    record.reasoning_effort, record.thinking_budget = effort, budget
    for attempt in record.attempts:
        for call in attempt.calls:
            call.usage.reasoning_tokens = thought
            call.reasoning = "Let me weigh both answers first."
        attempt.truncated = (truncated or {}).get(attempt.level)  # type: ignore[assignment]
    return record


def efforts_run(directory: Path) -> Path:
    """alpha on boolq at low, medium and high effort; beta at high and low (reasoning tokens
    not counted by its provider); gamma on csqa at the default and two thinking budgets.
      alpha low:    levels 1, 2, 2, -  -> HPI (1+2+2+6.71)/4 = 2.9275, 10 calls
      alpha medium: levels 1, 1, 2, -  -> HPI 2.6775, 9 calls, d's L5 cut inside its answer
      alpha high:   levels 1, 1, 1, 2  -> HPI 1.25, 5 calls, d's L1 cut inside its thinking"""
    recs = []
    for effort, levels, thought in (("high", (1, 1, 1, 2), 70), ("low", (1, 2, 2, None), 10),
                                    ("medium", (1, 1, 2, None), 30)):  # fmt: skip
        for sample, level in zip("abcd", levels, strict=True):
            cut = {"high": {1: "thinking"}, "medium": {5: "answer"}}.get(effort, {})
            recs.append(thinking(sample, level, effort=effort, thought=thought,
                                 truncated=cut if sample == "d" else None))  # fmt: skip
    for effort, level in (("high", 1), ("low", 2)):
        recs += [thinking(s, level, effort=effort, model="beta", thought=None) for s in "abcd"]
    for budget, level in ((4096, 1), (None, 3), (1024, 2)):
        recs += [thinking(s, level, budget=budget, model="gamma", dataset="csqa", thought=5)
                 for s in ("q1", "q2")]  # fmt: skip
    return write_run(directory, recs)


@pytest.fixture
def report(tmp_path: Path) -> tuple[Path, str]:
    run = efforts_run(tmp_path / "run")
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES + "[gamma]\ninput = 0.0\noutput = 2.0\n")
    written = api.report([run], prices=prices, plots=False)
    return run / "report", written.text


def _rows(md: str, section: str) -> list[list[str]]:
    """The pipe table under ``## section``, header first, cells stripped."""
    body = md.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in body.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines if "---|" not in line]


def test_the_effort_table(report: tuple[Path, str]) -> None:
    _, md = report
    rows = _rows(md, "Against reasoning effort")
    assert rows[0] == ["dataset", "model", "mode", "effort", "thinking budget", "HPI",
                       "accuracy %", "truncated", "completion tokens", "reasoning tokens",
                       "completion tokens / sample", "cost USD"]  # fmt: skip
    table = {(r[1], r[3], r[4]): r for r in rows[1:]}
    # Every cell once, each model's from least to most: efforts, then budgets (default first).
    assert [(r[1], r[3], r[4]) for r in rows[1:]] == [
        ("alpha", "low", "default"), ("alpha", "medium", "default"),
        ("alpha", "high", "default"), ("beta", "low", "default"), ("beta", "high", "default"),
        ("gamma", "default", "default"), ("gamma", "default", "1024"),
        ("gamma", "default", "4096"),
    ]  # fmt: skip
    low, medium, high = (table["alpha", e, "default"] for e in ("low", "medium", "high"))
    assert low[:3] == ["boolq", "alpha", "standard"]
    assert low[5].startswith("2.93 [") and low[6].startswith("75.00 [")
    assert medium[5].startswith("2.68 [") and high[5].startswith("1.25 [")
    assert high[6] == "100.00 [100.00, 100.00]"
    # Truncated attempts of those made, completion tokens (reasoning inside them), reasoning
    # tokens, per sample, cost. Cost: reasoning tokens are billed once, as the completion tokens they are
    # part of: alpha high, 500 prompt at 1 + 400 completion at 10 USD per million = 0.0045
    # (adding its 350 reasoning tokens again would make it 0.0080).
    assert low[7:] == ["0", "200", "100", "50", "0.0030"]
    assert medium[7:] == ["1 / 9 (11%)", "360", "270", "90", "0.0045"]
    assert high[7:] == ["1 / 5 (20%)", "400", "350", "100", "0.0045"]
    # beta's provider counted no reasoning tokens: "-", not 0.
    assert table["beta", "low", "default"][9] == "-"
    assert table["gamma", "default", "1024"][:3] == ["csqa", "gamma", "standard"]
    # Under the table, one line for each cell cut at a tenth or more of its attempts.
    section = md.split("## Against reasoning effort", 1)[1].split("\n## ", 1)[0]
    assert [line for line in section.splitlines() if line.startswith("- ")] == [
        f"- boolq · alpha · standard · effort {effort}: {share} of attempts ({cut}) cut off at "
        "the token limit, each cut attempt unresolved: its HPI measures the token budget as "
        "much as the model (raise `--max-tokens`)."
        for effort, share, cut in (("medium", "11%", "1 of 9"), ("high", "20%", "1 of 5"))
    ]


def test_every_table_keeps_efforts_apart(report: tuple[Path, str]) -> None:
    folder, md = report
    table1 = _rows(md, "Table 1")
    assert table1[0] == ["model", "reasoning", "boolq HPI", "boolq accuracy %", "csqa HPI",
                         "csqa accuracy %"]  # fmt: skip
    assert [r[:2] for r in table1[1:]] == [
        ["alpha", "effort low"], ["alpha", "effort medium"], ["alpha", "effort high"],
        ["beta", "effort low"], ["beta", "effort high"], ["gamma", "default"],
        ["gamma", "thinking 1024"], ["gamma", "thinking 4096"],
    ]  # fmt: skip
    assert table1[3][2].startswith("1.25 [") and table1[3][4] == "-"
    assert table1[7][4].startswith("2.00 [") and table1[7][2] == "-"
    levels = _rows(md, "Resolved per level")
    assert levels[0][-1] == "truncated"
    by_mode = {(r[1], r[2]): r for r in levels[1:]}
    assert by_mode["alpha", "standard · effort high"][-1] == "1 / 5 (20%; L1 1)"
    assert by_mode["alpha", "standard · effort medium"][-1] == "1 / 9 (11%; L5 1)"
    assert by_mode["alpha", "standard · effort low"][-1] == "0"
    usage = _rows(md, "Calls, tokens and cost")
    assert usage[0][6:] == ["completion tokens", "reasoning tokens", "cost USD", "USD / resolved"]
    by_mode = {(r[1], r[2]): r for r in usage[1:]}
    assert by_mode["alpha", "standard · effort high"][6:] == ["400", "350", "0.0045", "0.001125"]
    assert by_mode["beta", "standard · effort low"][7] == "-"
    assert usage[-1][0] == "**total**" and len(usage[-1]) == len(usage[0])
    sizing = {r[0] + " " + r[1] for r in _rows(md, "Sizing the next run")[1:]}
    assert "boolq · effort medium alpha" in sizing and "csqa · thinking 4096 gamma" in sizing
    # The cells file: the old columns in their order, the reasoning ones appended.
    with (folder / "cells.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == list(CSV_COLUMNS)
        rows = list(reader)
    assert list(CSV_COLUMNS[:32]) == OLD_CSV_COLUMNS
    assert list(CSV_COLUMNS[32:38]) == ["reasoning_effort", "thinking_budget", "reasoning_tokens",
                                        "truncated", "attempts", "selector_truncated"]  # fmt: skip
    found = {(r["model"], r["reasoning_effort"], r["thinking_budget"]): r for r in rows}
    assert len(found) == len(rows) == 8
    high = found["alpha", "high", ""]
    assert (high["reasoning_tokens"], high["truncated"], high["hpi"]) == ("350", "1:1", "1.25")
    assert int(high["attempts"]) > 0 and high["selector_truncated"] == "0"
    assert found["alpha", "medium", ""]["truncated"] == "5:1"
    assert found["alpha", "low", ""]["truncated"] == ""
    assert found["beta", "low", ""]["reasoning_tokens"] == ""
    assert found["gamma", "", "1024"]["reasoning_tokens"] == "20"


def test_comparisons_pair_equal_efforts_only(report: tuple[Path, str], tmp_path: Path) -> None:
    folder, md = report
    pairs = json.loads((folder / "comparisons.json").read_text())
    # alpha and beta at low, and at high; nothing at medium (beta has none), never across
    # efforts; gamma ran csqa alone.
    assert [(p["reasoning_effort"], p["model_a"], p["model_b"]) for p in pairs] == [
        ("low", "alpha", "beta"), ("high", "alpha", "beta")]  # fmt: skip
    low, high = pairs
    assert (low["hpi_a"], low["hpi_b"]) == (pytest.approx(2.9275), 2.0)
    assert (high["hpi_a"], high["hpi_b"]) == (1.25, 1.0)
    assert all("thinking_budget" not in p for p in pairs)  # unset: not written
    table = _rows(md, "Paired comparisons")
    assert [r[0] for r in table[1:]] == ["boolq · effort low", "boolq · effort high"]
    # The comparison names its cells as the records do.
    scores: dict[Cell, object] = {}
    collect([folder.parent], scores=scores)  # type: ignore[arg-type]
    found = compare(scores, baseline="beta").comparisons  # type: ignore[arg-type]
    assert [c.cell for c in found] == [Cell("boolq", "alpha", "standard", reasoning_effort=e)
                                       for e in ("low", "high")]  # fmt: skip
    # hpt compare writes the same pairs.
    written = api.compare([folder.parent], out=tmp_path / "cmp", plots=False)
    assert "| boolq · effort low | standard | alpha | beta | 4 |" in written.text


def test_ceiling_takes_a_setting_as_part_of_the_model(tmp_path: Path) -> None:
    """A ceiling's macro-average never mixes efforts: the setting goes with the model."""
    _, ladders = read_runs([efforts_run(tmp_path / "run")])
    assert [(r.model, r.benchmark) for r in ladders][:3] == [
        ("alpha · effort low", "boolq"), ("alpha · effort medium", "boolq"),
        ("alpha · effort high", "boolq")]  # fmt: skip
    assert ("gamma · thinking 1024", "csqa") in {(r.model, r.benchmark) for r in ladders}


def _summary(**extra: object) -> Summary:
    return make_summary(**{"attempts": 20, **extra})


def test_a_cells_cuts_are_counted_of_the_calls_made() -> None:
    """One formatter for the report's tables and the terminal's: cut of made, the share, and
    by level (selector turns apart); the bare count where a summary counted no attempts."""
    eleven = _summary(truncated={1: 8, 3: 3})
    assert truncations(eleven) == "11 / 20 (55%; L1 8, L3 3)"
    assert truncations(eleven, by_level=False) == "11 / 20 (55%)"
    assert truncations(_summary()) == truncations(_summary(), by_level=False) == "0"
    # Saved before hpt counted the attempts made: no share to give.
    old = _summary(truncated={1: 8, 3: 3}, attempts=0)
    assert (truncations(old), truncations(old, by_level=False)) == ("11 (L1 8, L3 3)", "11")
    assert not heavily_cut(old)
    # Adaptive: selector turns cut before naming a level are cuts too, of attempts and turns.
    adaptive = _summary(mode="adaptive", truncated={2: 1}, attempts=5, selector_turns=5,
                        selector_truncated=3)  # fmt: skip
    assert truncations(adaptive) == "4 / 10 (40%; L2 1, selector 3)"
    only_turns = _summary(mode="adaptive", selector_turns=8, selector_truncated=2)
    assert truncations(only_turns) == "2 / 28 (7%; selector 2)"
    # A cut among many is not "0%"; a tenth is heavily cut, just under it is not.
    assert truncations(_summary(truncated={1: 1}, attempts=300)) == "1 / 300 (<1%; L1 1)"
    assert heavily_cut(_summary(truncated={1: 2}, attempts=20))
    assert not heavily_cut(_summary(truncated={1: 2}, attempts=21))
    assert TRUNCATION_WARNING_SHARE == 0.10


def test_selector_turns_cut_off_are_reported(tmp_path: Path) -> None:
    """An adaptive cell whose selector turns alone were cut: the tables count them, of the
    attempts and turns made, and the line under the effort table names them."""
    recs = []
    for effort in ("low", "high"):
        for sample in "ab":
            record = make_record(sample, mode="adaptive", level=1, iteration=1)
            record.reasoning_effort = effort
            cut = effort == "low"  # cut before it named a level; at high, it named level 2
            record.selections = [
                Selection(iteration=1, answer="" if cut else "Level 2", level=None if cut else 2,
                          truncated=cut),
                Selection(iteration=2, answer="Level 1", level=1),
            ]  # fmt: skip
            recs.append(record)
    md = api.report([write_run(tmp_path / "run", recs)], plots=False).text
    efforts = {r[3]: r for r in _rows(md, "Against reasoning effort")[1:]}
    assert (efforts["low"][6], efforts["high"][6]) == ("2 / 6 (33%)", "0")
    assert "\n- boolq · alpha · adaptive · effort low: 33% of attempts and selector turns (2 of " \
           "6) cut off at the token limit" in md  # fmt: skip
    assert "effort high:" not in md
    levels = _rows(md, "Resolved per level")
    assert levels[0][-1] == "truncated"
    assert [r[-1] for r in levels[1:]] == ["2 / 6 (33%; selector 2)", "0"]
    # Cut turns are no hallucinations.
    assert [r[-2] for r in levels[1:]] == ["0.0", "0.0"]


def test_no_effort_table_for_a_single_setting(tmp_path: Path) -> None:
    """One effort per model x dataset: nothing to set side by side; the cells still say it."""
    recs = [thinking(s, 1, effort="high") for s in "ab"]
    reports = collect([write_run(tmp_path / "run", recs)])
    assert table_efforts(reports) is None
    md = api.report([tmp_path / "run"], plots=False).text
    assert "Against reasoning effort" not in md
    assert "| alpha | effort high | 1.00 [1.00, 1.00] |" in md


def plain_run(directory: Path) -> Path:
    """A run without any reasoning setting: two models on boolq (with option counts, so the
    chance table shows), one on HumanEval (a table of cells) and one adaptive climb."""
    recs = [make_record(s, level=lv) for s, lv in (("a", 1), ("b", 2), ("c", None))]
    recs += [make_record(s, model="beta", level=lv) for s, lv in (("a", 2), ("b", 1), ("c", 3))]
    for r in recs:
        r.options = 2
    recs += [make_record(f"h{i}", dataset="humaneval", level=i + 1, penalty=1.92) for i in range(2)]
    recs.append(make_record("ad", mode="adaptive", level=2, iteration=1))
    return write_run(directory, recs)


def test_a_run_without_reasoning_reports_as_before(tmp_path: Path) -> None:
    """report.md byte for byte as hpt wrote it before reasoning settings existed (rendered by
    commit 2ffb0be from these records); the CSV only gains its four empty columns."""
    run = plain_run(tmp_path / "run")
    prices = tmp_path / "prices.toml"
    prices.write_text("[alpha]\ninput = 2.0\noutput = 10.0\n[beta]\ninput = 1.0\noutput = 1.0\n")
    api.report([run], prices=prices, plots=False)
    md = (run / "report" / "report.md").read_text().replace(str(run), "RUN")
    assert md == BEFORE
    pairs = json.loads((run / "report" / "comparisons.json").read_text())
    assert "reasoning_effort" not in pairs[0] and "thinking_budget" not in pairs[0]
    with (run / "report" / "cells.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    # The reasoning columns are empty; attempts and selector_truncated are counts.
    assert {r[c] for r in rows for c in CSV_COLUMNS[32:36]} == {""}
    assert {r["selector_truncated"] for r in rows} == {"0"}


OLD_CSV_COLUMNS = [
    "dataset", "threshold", "model", "mode", "samples", "scored", "errors", "hpi", "hpi_low",
    "hpi_high", "chance_hpi", "hpi_skill", "accuracy", "accuracy_low", "accuracy_high",
    "chance_accuracy", "level1_accuracy", "chance_level1_accuracy", "pass_at_1",
    "text_metric", "text_score", "unresolved", "level_counts", "calls", "cached_calls",
    "prompt_tokens", "completion_tokens", "cost_usd", "hallucination_rate", "source",
    "variant", "judge_missing",
]  # fmt: skip

BEFORE = """# HPT report

Runs: `RUN`

Brackets are 95% percentile-bootstrap intervals over samples (2000 resamples, seed 0). Samples that ended in an error, or that a judge left without a valid score, are not scored.

## Table 1 · HPI (lower is better) and accuracy

| model | boolq HPI | boolq accuracy % |
|---|---|---|
| alpha | 3.24 [1.00, 6.71] (chance 1.99) | 66.67 [0.00, 100.00] |
| beta | 2.00 [1.00, 3.00] (chance 1.99) | 100.00 [100.00, 100.00] |

## Table 2 · HumanEval: HPI and pass@1

| model | HPI | pass@1 |
|---|---|---|
| alpha | 1.50 [1.00, 2.00] | 1.00 [1.00, 1.00] |

## Table 6 · Adaptive HPF: HPI

| model | boolq |
|---|---|
| alpha | 3.000 [3.00, 3.00] |
| beta | - |

## Table 7 · Adaptive HPF: performance

| dataset | metric | threshold | alpha |
|---|---|---|---|
| boolq | accuracy | - | 1.0000 |

## Chance levels

A uniform random guesser on the same samples and ladder: each level an independent guess among a sample's options. Skill puts that guesser at 0 and resolving every sample at level 1 at 1; below 0 is worse than guessing. *Below chance*: the figure's whole interval is worse than the guesser's; *within chance*: the interval reaches it. A model can beat chance on the HPI (it resolves early what it resolves) and still fall below it on accuracy (a guesser with a try at every level resolves most samples). Open-ended tasks and adaptive cells have no chance level.

| dataset | model | HPI | chance HPI | skill | accuracy % | chance % | level-1 % | chance level-1 % |  |
|---|---|---|---|---|---|---|---|---|---|
| boolq | alpha | 3.24 | 1.99 | -1.26 | 66.7 | 96.9 | 33.3 | 50.0 | HPI within chance; accuracy within chance |
| boolq | beta | 2.00 | 1.99 | -0.01 | 100.0 | 96.9 | 33.3 | 50.0 | HPI within chance |

## Paired comparisons

Paired over the samples both models scored. HPI A − B below 0: A resolved its samples at lower levels. Brackets: 95% paired percentile bootstrap (2000 resamples, seed 0); p: two-sided paired permutation test (sign flips; exact up to 16 differing samples, else 10,000 seeded draws); McNemar: exact, on the samples only one model resolved; Holm: adjusted over every comparison in this table. Smallest detectable: the HPI difference these samples find with 80% power at α = 0.05 (paired, normal approximation).

| dataset | mode | A | B | n | HPI A | HPI B | HPI A − B [95% CI] | p | p Holm | accuracy A − B | McNemar p | McNemar p Holm | smallest detectable |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
| boolq | standard | alpha | beta | 3 | 3.237 | 2.000 | +1.237 [-1.000, +3.710] | 0.7500 | 0.7500 | -33.3 pts | 1.0000 | 1.0000 | 3.824 |

## Sizing the next run

How far apart two models' HPIs must be for a paired comparison on this many samples to find the difference with 80% power (two-sided, α = 0.05), if the other model's per-sample scores spread like this one's and were uncorrelated with them. Models usually find the same samples hard, which makes a paired test stronger than this; a partner whose scores spread more makes it weaker. Where two models ran, the paired comparisons give the figure measured on both. A sample's repeated draws count once, averaged. `--detect D` adds the samples a difference of D needs.

| dataset | model | mode | samples | HPI σ | smallest detectable |
|---|---|---|---|---|---|
| boolq | alpha | standard | 3 | 3.049 | 6.975 |
| boolq | alpha | adaptive | 1 | - | - |
| humaneval | alpha | standard | 2 | 0.707 | 1.981 |
| boolq | beta | standard | 3 | 1.000 | 2.287 |

## Resolved per level

| dataset | model | mode | L1 | L2 | L3 | L4 | L5 | unresolved | errors | selector hallucination % |
|---|---|---|---|---|---|---|---|---|---|---|
| boolq | alpha | standard | 1 | 1 | 0 | 0 | 0 | 1 | 0 | - |
| boolq | alpha | adaptive | 0 | 1 | 0 | 0 | 0 | 0 | 0 | - |
| humaneval | alpha | standard | 1 | 1 | 0 | 0 | 0 | 0 | 0 | - |
| boolq | beta | standard | 1 | 1 | 1 | 0 | 0 | 0 | 0 | - |

## Calls, tokens and cost

Cost: USD of the calls sent, each token class at its price (fresh input, provider cache reads and writes, output with its reasoning tokens), calls answered through a provider's Batch API at batch prices. *Saved*: what the calls hpt's response cache answered (no model call made) would have cost. *USD / resolved*: the cost over the samples resolved. *Cached input*: the share of input tokens the provider read from its prompt cache.

| dataset | model | mode | samples | calls (not sent) | prompt tokens | completion tokens | cost USD | USD / resolved |
|---|---|---|---|---|---|---|---|---|
| boolq | alpha | standard | 3 | 8 (0) | 800 | 80 | 0.0024 | 0.001200 |
| boolq | alpha | adaptive | 1 | 2 (0) | 200 | 20 | 0.0006 | 0.000600 |
| humaneval | alpha | standard | 2 | 3 (0) | 300 | 30 | 0.0009 | 0.000450 |
| boolq | beta | standard | 3 | 6 (0) | 600 | 60 | 0.0007 | 0.000220 |
| **total** |  |  |  |  |  |  | 0.0046 |  |

- `alpha`: input 2, output 10 USD per million tokens (prices.toml; cache reads and cache writes billed as input)
- `beta`: input 1, output 1 USD per million tokens (prices.toml; cache reads and cache writes billed as input)

## Calls, cached input and cost per level

Each level's calls, its judge's and extractor's included, as the records keep them; adaptive HPF's selector turns apart. A level's calls are those of the samples that reached it.

| dataset | model | mode | level | strategy | calls (not sent) | prompt tokens | completion tokens | cost USD |
|---|---|---|---|---|---|---|---|---|
| boolq | alpha | standard | L1 | role | 3 (0) | 300 | 30 | 0.0009 |
| boolq | alpha | standard | L2 | zero_shot_cot | 2 (0) | 200 | 20 | 0.0006 |
| boolq | alpha | standard | L3 | three_shot_cot | 1 (0) | 100 | 10 | 0.0003 |
| boolq | alpha | standard | L4 | least_to_most | 1 (0) | 100 | 10 | 0.0003 |
| boolq | alpha | standard | L5 | generated_knowledge | 1 (0) | 100 | 10 | 0.0003 |
| boolq | alpha | adaptive | L1 | role | 1 (0) | 100 | 10 | 0.0003 |
| boolq | alpha | adaptive | L2 | zero_shot_cot | 1 (0) | 100 | 10 | 0.0003 |
| humaneval | alpha | standard | L1 | role | 2 (0) | 200 | 20 | 0.0006 |
| humaneval | alpha | standard | L2 | zero_shot_cot | 1 (0) | 100 | 10 | 0.0003 |
| boolq | beta | standard | L1 | role | 3 (0) | 300 | 30 | 0.0003 |
| boolq | beta | standard | L2 | zero_shot_cot | 2 (0) | 200 | 20 | 0.0002 |
| boolq | beta | standard | L3 | three_shot_cot | 1 (0) | 100 | 10 | 0.0001 |
"""


def test_a_share_near_all_is_not_all() -> None:
    from hpt.reports.truncation import percent

    assert [percent(x) for x in (0.001, 0.5, 0.996, 1.0)] == ["<1%", "50%", ">99%", "100%"]
