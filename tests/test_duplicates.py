"""Duplicate records (two writers, hand-merged files) are counted once per (sample, draw) of a
cell by every reader -- summarize, report, view, agreement, ceiling -- which keep the first
record, as ``hpt run --resume`` does, and say on stderr how many they dropped."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from hpt.cli.main import main
from hpt.results.reader import RecordReader, read_records
from hpt.results.records import Attempt, DepthRecord, SampleRecord, Verdict
from tests.run_fixtures import make_record, write_run


@dataclass
class Outcome:
    code: int
    out: str
    err: str


def invoke(capsys: pytest.CaptureFixture[str], *argv: object) -> Outcome:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err)


def note(directory: Path, n: int) -> str:
    return (
        f"hpt: note: {directory / 'samples.jsonl'} holds {n} duplicate record"
        f"{'s' if n != 1 else ''} of the same sample and draw; each was counted once"
    )


def lines(records: list[SampleRecord]) -> list[str]:
    return [r.model_dump_json() + "\n" for r in records]


def duplicate(directory: Path, extra: list[str]) -> None:
    """Append ``extra`` lines to ``directory``'s records, after a copy of its first line (a
    duplicate need not come at the end)."""
    original = (directory / "samples.jsonl").read_text().splitlines(keepends=True)
    merged = [original[0], *original, *extra]
    (directory / "samples.jsonl").write_text("".join(merged))


# ---------------------------------------------------------------- the reader


def test_the_reader_keeps_the_first_record_and_counts_the_rest(tmp_path: Path) -> None:
    first = make_record("a", level=1)
    later = make_record("a", level=3)  # the same sample and draw, another outcome
    other_draw = make_record("a", level=2).model_copy(update={"draw": 1})
    other_cell = make_record("a", model="beta", level=4)
    run = write_run(tmp_path / "run", [first, other_draw, later, other_cell, first])
    told: list[tuple[Path, int]] = []
    reader = RecordReader(run, on_duplicates=lambda path, n: told.append((path, n)))
    kept = list(reader)
    assert [(r.model, r.draw, r.resolved_level) for r in kept] == [
        ("alpha", 0, 1), ("alpha", 1, 2), ("beta", 0, 4)]  # fmt: skip
    assert reader.duplicates == 2 and told == [(run / "samples.jsonl", 2)]
    assert {c.model: n for c, n in reader.duplicates_by_cell.items()} == {"alpha": 2}
    # Each pass reads the file afresh and counts again.
    assert len(list(reader)) == 3 and reader.duplicates == 2 and len(told) == 2


def test_the_default_reader_says_it_once_on_stderr(tmp_path: Path, capsys) -> None:
    run = write_run(tmp_path / "run", [make_record("a", level=1)] * 3)
    assert len(list(read_records(run))) == 1
    assert capsys.readouterr().err == note(run, 2) + "\n"
    assert len(list(read_records(run, on_duplicates=None))) == 1
    assert capsys.readouterr().err == ""
    clean = write_run(tmp_path / "clean", [make_record("a", level=1)])
    assert len(list(read_records(clean))) == 1
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- every command


def _records() -> list[SampleRecord]:
    recs = [make_record(s, level=lv) for s, lv in
            (("a", 1), ("b", 1), ("c", 2), ("d", None), ("e", 3))]  # fmt: skip
    recs += [make_record("a", model="beta", level=2), make_record("b", model="beta", level=None)]
    recs += [make_record("q", dataset="csqa", level=1, penalty=1.65)]
    return recs


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, list[str]]:
    """A run, and the lines that duplicate some of its records: an exact copy, and copies
    of the same samples and draws with other outcomes (counted, they would move every
    number)."""
    run = write_run(tmp_path / "run", _records())
    extra = lines([
        make_record("a", level=1),
        make_record("d", level=1),
        make_record("b", model="beta", level=1, tokens=(9000, 900)),
        make_record("q", dataset="csqa", level=None, penalty=1.65),
    ])  # fmt: skip
    return run, extra


def test_summarize_counts_each_sample_once(runs, capsys) -> None:
    run, extra = runs
    clean = invoke(capsys, "summarize", run)
    assert clean.code == 0 and clean.err == ""
    duplicate(run, extra)
    dup = invoke(capsys, "summarize", run)
    assert dup.code == 0
    assert dup.out == clean.out
    assert dup.err.strip() == note(run, 5)
    cells = json.loads(dup.out[dup.out.index("[\n") :])
    assert sum(c["samples"] for c in cells) == len(_records())


def test_report_counts_each_sample_once_and_says_so(runs, capsys, tmp_path) -> None:
    run, extra = runs
    out = tmp_path / "report"
    assert invoke(capsys, "report", run, "--out", out, "--no-plots").code == 0
    clean_csv, clean_md = (out / "cells.csv").read_text(), (out / "report.md").read_text()
    duplicate(run, extra)
    dup = invoke(capsys, "report", run, "--out", out, "--no-plots")
    assert dup.code == 0 and note(run, 5) in dup.err.splitlines()
    assert (out / "cells.csv").read_text() == clean_csv
    md = (out / "report.md").read_text()
    assert md.startswith(clean_md.split("## Notes on the data")[0])
    said = [line for line in md.splitlines() if "duplicate record" in line]
    assert len(said) == 3  # one per cell that had any: alpha boolq, beta boolq, alpha csqa
    assert any("3 duplicate records" in s and "boolq · alpha · standard" in s for s in said)


def test_view_counts_each_sample_once(runs, capsys, tmp_path) -> None:
    run, extra = runs
    page = tmp_path / "view.html"
    assert invoke(capsys, "view", run, "--out", page, "--no-open").code == 0
    clean = page.read_text()
    duplicate(run, extra)
    dup = invoke(capsys, "view", run, "--out", page, "--no-open")
    assert dup.code == 0 and f"({len(_records())} samples" in dup.out
    assert dup.err.strip() == note(run, 5)
    assert page.read_text() == clean


def test_view_refuses_a_cell_in_two_directories(runs, capsys, tmp_path) -> None:
    """A copy of a run given beside it would show (and count) each sample twice."""
    import shutil

    run, _ = runs
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    page = tmp_path / "view.html"
    both = invoke(capsys, "view", run, copy, "--out", page, "--no-open")
    assert both.code == 2 and not page.exists()
    assert both.err.startswith("hpt: error:") and f"is in both {run} and {copy}" in both.err


def test_ceiling_counts_each_sample_once(runs, capsys, tmp_path) -> None:
    from tests.test_ceiling import method_record

    run, extra = runs  # a ladder run: the HPT view
    base = write_run(tmp_path / "base", [
        method_record("a", "helm_baseline"), method_record("b", "helm_baseline", resolved=False),
        method_record("a", "helm_baseline", model="beta"),
    ])  # fmt: skip
    cot = write_run(tmp_path / "cot", [method_record(s, "dspy_cot") for s in "abc"])
    argv = ("ceiling", run, base, cot, "--out", tmp_path / "ceiling", "--no-plots")
    assert invoke(capsys, *argv).code == 0
    clean = (tmp_path / "ceiling" / "ceiling.json").read_text()
    duplicate(run, extra)
    duplicate(base, lines([method_record("b", "helm_baseline")] * 2))
    duplicate(cot, lines([method_record("c", "dspy_cot", resolved=False)]))
    dup = invoke(capsys, *argv)
    assert dup.code == 0
    assert dup.err.splitlines() == [note(run, 5), note(base, 3), note(cot, 2)]
    assert (tmp_path / "ceiling" / "ceiling.json").read_text() == clean
    result = json.loads(clean)
    ladders = {(row["model"], row["benchmark"]): row["n"] for row in result["hpt_view"]}
    assert ladders[("beta", "boolq")] == 2
    methods = {(r["model"], r["method"]): (r["n"], r["accuracy"]) for r in result["results"]}
    assert methods[("alpha", "helm_baseline")] == (2, 50.0)
    assert methods[("alpha", "dspy_cot")] == (3, 100.0)


def _node(node: str, depth: int, score: int) -> DepthRecord:
    verdict = Verdict(score=score, replies=[f"[RESULT] {score}"])
    attempt = Attempt(level=1, strategy="depth_zero_shot", completion="x", resolved=score >= 4,
                      verdict=verdict)  # fmt: skip
    return DepthRecord(
        sample_id=node, dataset="depthqa", model="m", variant="zero-shot",
        strategies=["depth_zero_shot"], m=1, penalty=1.0, target="ref",
        resolved_level=1 if score >= 4 else None, hpi_score=1.0 if score >= 4 else 2.0,
        attempts=[attempt], node_id=node, qid=f"q_{node}", depth=depth, judge_score=score,
    )  # fmt: skip


def test_agreement_counts_each_node_once(tmp_path, capsys) -> None:
    scores = {"a": (1, 5, 5), "b": (1, 2, 3), "c": (2, 4, 4), "d": (3, 1, 2), "e": (2, 3, 1)}
    first = write_run(tmp_path / "one", [_node(n, d, x) for n, (d, x, _) in scores.items()])
    second = write_run(tmp_path / "two", [_node(n, d, y) for n, (d, _, y) in scores.items()])
    report = tmp_path / "agreement.json"
    assert invoke(capsys, "agreement", first, second, "--out", report).code == 0
    clean = json.loads(report.read_text())
    # The second run holds node a and e again, judged otherwise: kept last, alpha would move.
    duplicate(second, lines([_node("a", 1, 1), _node("e", 2, 5)]))
    dup = invoke(capsys, "agreement", first, second, "--out", report)
    assert dup.code == 0 and dup.err.strip() == note(second, 3)
    assert json.loads(report.read_text()) == clean
    assert clean["units"] == 5 and clean["exact"] == pytest.approx(0.4)
