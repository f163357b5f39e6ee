"""``hpt report``: table numbers, bootstrap intervals and costs against hand-computed values."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

from hpt.reports.cells import bootstrap_ci, collect
from hpt.reports.comparisons import Comparison
from hpt.reports.report_markdown import markdown
from hpt.results.records import Cell
from hpt.results.tally import Tally
from tests.run_fixtures import make_record, write_run
from tests.test_cli import hpt


def _campaign(tmp_path: Path) -> Path:
    # alpha on boolq: levels 1,1,2,unresolved, plus one error (not scored)
    #   HPI = (1 + 1 + 2 + (5 + 1.71)) / 4 = 2.6775, accuracy 3/4
    # beta on boolq: 1,3  -> HPI 2.0, accuracy 1.0
    # alpha on csqa: unresolved x2 -> HPI 5 + 1.65 (csqa's penalty)
    recs = [
        make_record("a", level=1), make_record("b", level=1), make_record("c", level=2),
        make_record("d", level=None), make_record("e", level=None, error="HTTP 400"),
        make_record("a", model="beta", level=1, tokens=(1000, 100)),
        make_record("b", model="beta", level=3, tokens=(1000, 100)),
        make_record("q1", dataset="csqa", level=None, penalty=1.65),
        make_record("q2", dataset="csqa", level=None, penalty=1.65),
    ]  # fmt: skip
    return write_run(tmp_path / "run", recs)


def test_a_cell_has_one_label_whoever_carries_it(tmp_path: Path) -> None:
    """Records, tallies, summaries, report rows and comparisons name a cell by the same Cell,
    so every table spells it the same way: ``iwslt @0.15``, never ``iwslt@0.15``."""
    cell = Cell("iwslt", "alpha", "standard", 0.15)
    assert (cell.label, cell.dataset_label, cell.mode_label) == (
        "iwslt @0.15", "iwslt @0.15", "standard")  # fmt: skip
    assert cell.title == "iwslt @0.15 · alpha · standard"
    depth = Cell("depthqa", "alpha", "standard", None, "multi-turn")
    assert (depth.label, depth.dataset_label) == ("depthqa · multi-turn", "depthqa")
    assert depth.mode_label == "standard · multi-turn"
    assert depth.title == "depthqa · alpha · standard · multi-turn"
    tally = Tally(dataset="iwslt", model="alpha", mode="standard", m=5, penalty=1.92,
                  threshold=0.15)  # fmt: skip
    assert tally.cell == cell and tally.summary().cell == cell
    pair = Comparison(dataset="iwslt", mode="standard", threshold=0.15, model_a="alpha",
                      model_b="beta", n=1)  # fmt: skip
    assert pair.cell == cell
    recs = [make_record(s, dataset="iwslt", threshold=0.15, level=1, penalty=1.92) for s in "ab"]
    run = write_run(tmp_path / "run", recs)
    (report,) = collect([run])
    assert report.cell == cell == recs[0].cell
    md = markdown([report], [run])
    assert "| iwslt @0.15 | alpha | standard |" in md and "iwslt@" not in md


def test_tables_match_hand_computed_numbers(tmp_path: Path) -> None:
    reports = {(r.summary.dataset, r.summary.model): r for r in collect([_campaign(tmp_path)])}
    alpha = reports["boolq", "alpha"].summary
    assert alpha.hpi == pytest.approx(2.6775) and alpha.accuracy == 0.75
    assert (alpha.samples, alpha.n, alpha.errors, alpha.unresolved) == (5, 4, 1, 1)
    assert alpha.level_counts == {1: 2, 2: 1, 3: 0, 4: 0, 5: 0}
    assert reports["boolq", "beta"].summary.hpi == 2.0
    assert reports["csqa", "alpha"].summary.hpi == pytest.approx(6.65)
    # Tokens: alpha boolq climbed 1+1+2+5+5 levels at 100+10 tokens a call.
    assert (alpha.prompt_tokens, alpha.completion_tokens) == (1400, 140)
    md = markdown(list(reports.values()), [tmp_path / "run"])
    assert "| alpha | 2.68 [" in md and "| 75.00 [" in md
    assert "| beta | 2.00 [1.00, 3.00] | 100.00 [100.00, 100.00] |" in md
    assert "| csqa | alpha | standard | 0 | 0 | 0 | 0 | 0 | 2 | 0 | - |" in md


def test_bootstrap_intervals() -> None:
    # All the same: no spread at all.
    assert bootstrap_ci(Counter({3.0: 50})) == (3.0, 3.0)
    assert bootstrap_ci(Counter({5 + 1.71: 50_000})) == (6.71, 6.71)
    # The interval always holds the mean, however the floating-point sums round.
    low, high = bootstrap_ci(Counter({6.71: 49_999, 1.0: 1}))
    mean = (6.71 * 49_999 + 1.0) / 50_000
    assert low <= mean <= high
    assert bootstrap_ci(Counter()) is None
    # 200 of 400 resolved: the normal approximation gives 0.5 +- 1.96 * 0.025.
    low, high = bootstrap_ci(Counter({1.0: 200, 0.0: 200}))
    assert low == pytest.approx(0.451, abs=0.006) and high == pytest.approx(0.549, abs=0.006)
    # Against a brute-force bootstrap that resamples the samples themselves.
    values = np.array([1.0] * 7 + [2.0] * 5 + [3.0] * 2 + [6.71] * 6)
    rng = np.random.default_rng(1)
    brute = rng.choice(values, size=(20000, len(values))).mean(axis=1)
    expected = np.percentile(brute, [2.5, 97.5])
    got = bootstrap_ci(Counter(values.tolist()), resamples=20000)
    assert got == pytest.approx(tuple(expected), abs=0.05)
    assert bootstrap_ci(Counter(values.tolist())) == bootstrap_ci(Counter(values.tolist()))


def test_text_and_adaptive_tables(tmp_path: Path) -> None:
    recs = []
    for t, levels in ((0.15, [1, 2]), (0.2, [3, None])):
        for i, level in enumerate(levels):
            recs.append(make_record(f"s{i}", dataset="samsum", threshold=t, level=level,
                                    penalty=1.0, final="a summary", target="a summary", score=1.0))  # fmt: skip
    recs += [
        make_record("a", mode="adaptive", level=2, iteration=1),  # x + i = 3
        make_record("b", mode="adaptive", level=None, hallucinations=2),  # 5 + 1.71
    ]
    reports = collect([write_run(tmp_path / "t", recs)])
    md = markdown(reports, [tmp_path / "t"])
    assert "| model | samsum HPI @0.15 | samsum mean ROUGE-L F @0.15 | samsum HPI @0.2 |" in md
    assert "| alpha | 1.50 [1.00, 2.00] | 1.00 | 4.50 [3.00, 6.00] | 1.00 |" in md
    assert "## Table 6" in md and "| alpha | 4.855 [3.00, 6.71] |" in md
    assert "| boolq | accuracy | - | 0.5000 |" in md
    assert "| boolq | alpha | adaptive | 0 | 1 | 0 | 0 | 0 | 1 | 0 | 100.0 |" in md


def test_cli_writes_markdown_csv_and_plots_with_costs(tmp_path: Path) -> None:
    run = _campaign(tmp_path)
    prices = tmp_path / "prices.toml"
    prices.write_text("[alpha]\ninput = 2.0\noutput = 10.0\n[beta]\ninput = 1.0\noutput = 1.0\n")
    out = tmp_path / "rep"
    result = hpt("report", str(run), "--out", str(out), "--prices", str(prices))
    assert result.returncode == 0, result.stderr
    assert "## Table 1" in result.stdout
    rows = {(r["dataset"], r["model"]): r for r in csv.DictReader((out / "cells.csv").open())}
    # alpha boolq: 1400 in, 140 out -> 1400 * 2 / 1e6 + 140 * 10 / 1e6 = 0.0042
    assert float(rows["boolq", "alpha"]["cost_usd"]) == pytest.approx(0.0042)
    # beta boolq: 1 + 3 calls of 1000 in, 100 out at 1 USD each way -> 0.0044
    assert float(rows["boolq", "beta"]["cost_usd"]) == pytest.approx(0.0044)
    assert rows["boolq", "alpha"]["errors"] == "1" and rows["boolq", "alpha"]["scored"] == "4"
    assert (
        float(rows["boolq", "alpha"]["hpi_low"])
        <= 2.6775
        <= float(rows["boolq", "alpha"]["hpi_high"])
    )
    assert "| **total** |" in (out / "report.md").read_text()
    for stem in ("hpi", "levels"):
        assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        ElementTree.parse(out / f"{stem}.svg")  # well-formed SVG


def test_plots_of_cells_without_spread(tmp_path: Path) -> None:
    recs = [make_record(f"u{i}", level=None, penalty=1.68) for i in range(30)]
    run = write_run(tmp_path / "flat", recs)
    result = hpt("report", str(run))
    assert result.returncode == 0, result.stderr
    assert (run / "report" / "hpi.svg").exists()


def test_report_errors_are_one_clear_line(tmp_path: Path) -> None:
    run = _campaign(tmp_path)
    missing = hpt("report", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "is not a run directory" in missing.stderr
    twice = hpt("report", str(run), str(run), "--no-plots")
    assert twice.returncode == 2 and "report them separately" in twice.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[alpha]\ninput = -1\noutput = 1\n")
    priced = hpt("report", str(run), "--prices", str(bad))
    assert priced.returncode == 2 and "alpha.input" in priced.stderr
    (run / "samples.jsonl").open("a").write('{"not": "a record"}\n')
    corrupt = hpt("report", str(run))
    assert corrupt.returncode == 2 and "samples.jsonl:10: not a sample record" in corrupt.stderr
