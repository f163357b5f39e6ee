"""DepthQA summaries: a climb the judge left without a score is missing -- outside n, the HPI,
accuracy, level counts, depth means and discrepancies, counted apart -- never unresolved."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpt.reports.cells import CellReport
from hpt.reports.cells_csv import csv_rows
from hpt.reports.tables import table_levels
from hpt.results import Attempt, summarize
from hpt.results.info import TaskInfo
from hpt.results.records import DepthRecord, Verdict
from hpt.results.scoring import scored, unjudged
from hpt.results.tally import Summary, summarize_cells
from hpt.tasks import TASKS
from hpt.tasks.depthqa import EMPTY_SCORE

PENALTY = 1.0
LADDER = ["depth_zero_shot", "depth_gold"]
# depth 1: a, b; depth 2: c <- a, b; depth 3: d <- c
EDGES = {"a": (1, [], ["c"]), "b": (1, [], ["c"]), "c": (2, ["a", "b"], ["d"]),
         "d": (3, ["c"], [])}  # fmt: skip


def attempt(level: int, score: int | None) -> Attempt:
    """One level's answer, judged (score None: no valid [RESULT] after the retries)."""
    verdict = Verdict(score=score, replies=["Feedback: fine."] * 3)
    return Attempt(level=level, strategy=LADDER[level - 1], completion="an answer",
                   resolved=score is not None and score >= 4, verdict=verdict)  # fmt: skip


def node(node_id: str, *attempts: Attempt, strategies: list[str] | None = None,
         draw: int = 0) -> DepthRecord:  # fmt: skip
    """The record as the run writes it (hpi_score as hpt before this fix saved it too: every
    climb that did not resolve at m + penalty)."""
    strategies = strategies or LADDER[: len(attempts)]
    m = len(strategies)
    winner = next((a.level for a in attempts if a.resolved), None)
    depth, preds, succs = EDGES[node_id]
    final = next((a for a in attempts if a.resolved), attempts[-1])
    return DepthRecord(
        sample_id=node_id, draw=draw, dataset="depthqa", model="m", strategies=strategies, m=m,
        penalty=PENALTY, target="ref", resolved_level=winner,
        hpi_score=float(winner) if winner else m + PENALTY, attempts=list(attempts),
        node_id=node_id, qid=f"q_{node_id}", depth=depth, predecessors=preds, successors=succs,
        judge_score=final.verdict.score if final.verdict else None, variant="zero-shot",
    )  # fmt: skip


def _summary(records: list[DepthRecord], m: int = 1, mode: str = "standard") -> Summary:
    return summarize(records, dataset="depthqa", model="m", mode=mode, m=m, penalty=PENALTY)


def test_a_cell_the_judge_never_scored_has_no_figures() -> None:
    records = [node(n, attempt(1, None)) for n in EDGES]
    s = _summary(records)
    assert (s.n, s.samples, s.judge_missing, s.errors, s.unresolved) == (0, 4, 4, 0, 0)
    assert s.hpi is None and s.accuracy is None and s.level1_accuracy is None
    assert s.level_counts == {1: 0}
    assert s.depth_scores == {"1": None, "2": None, "3": None}
    assert s.depth_nodes == {"1": 0, "2": 0, "3": 0}
    assert s.forward_discrepancy is not None and s.backward_discrepancy is not None
    assert s.forward_discrepancy["overall"].nodes == 0
    assert s.backward_discrepancy["overall"].value is None
    assert not any(scored(r) for r in records)


def test_missing_nodes_are_left_out_of_every_figure() -> None:
    # a 5, b missing, c 4, d 1: HPI over a, c, d = (1 + 1 + 2) / 3; accuracy 2/3.
    records = [node("a", attempt(1, 5)), node("b", attempt(1, None)), node("c", attempt(1, 4)),
               node("d", attempt(1, 1))]  # fmt: skip
    s = _summary(records)
    assert (s.n, s.judge_missing, s.unresolved) == (3, 1, 1)
    assert s.hpi == pytest.approx(4 / 3)
    assert s.accuracy == pytest.approx(2 / 3) == s.level1_accuracy
    assert s.depth_scores == {"1": 5.0, "2": 4.0, "3": 1.0}
    assert s.depth_nodes == {"1": 1, "2": 1, "3": 1}
    # c's forward gap uses a alone (b has no score): (5 - 4) / 4.
    assert s.forward_discrepancy is not None
    assert s.forward_discrepancy["d1_d2"].value == pytest.approx(0.25)


def test_a_missing_verdict_anywhere_in_the_climb_leaves_it_unscored() -> None:
    # Level 1 unscored, level 2 resolved: it may have resolved at level 1 -- level unknown.
    climbed = node("a", attempt(1, None), attempt(2, 5), strategies=LADDER)
    failed = node("b", attempt(1, 2), attempt(2, 3), strategies=LADDER)
    assert unjudged(climbed.attempts) and not unjudged(failed.attempts)
    s = _summary([climbed, failed], m=2)
    assert (s.n, s.judge_missing) == (1, 1)
    assert s.hpi == pytest.approx(2 + PENALTY) and s.level_counts == {1: 0, 2: 0}
    assert s.depth_scores is not None and s.depth_scores["1"] == 3.0


def test_an_empty_answer_is_a_measured_failure() -> None:
    # Nothing to judge: the task gives the rubric's lowest score by rule (no judge call), so
    # the node counts in its depth's mean instead of vanishing from it.
    empty = node("a", attempt(1, EMPTY_SCORE))
    assert scored(empty)
    s = _summary([empty, node("b", attempt(1, 4))])
    assert (s.n, s.judge_missing, s.unresolved) == (2, 0, 1)
    assert s.hpi == pytest.approx((1 + PENALTY + 1) / 2)
    assert s.depth_nodes == {"1": 2, "2": 0, "3": 0} and s.depth_scores == {
        "1": 2.5, "2": None, "3": None}  # fmt: skip


def test_draws_of_a_node_count_only_where_scored() -> None:
    records = [node("a", attempt(1, 5)), node("a", attempt(1, None), draw=1),
               node("a", attempt(1, 3), draw=2)]  # fmt: skip
    s = _summary(records)
    assert (s.n, s.judge_missing) == (2, 1)
    assert s.depth_scores is not None and s.depth_scores["1"] == 4.0  # (5 + 3) / 2


def test_reports_count_missing_apart() -> None:
    [s] = summarize_cells([node("a", attempt(1, None)), node("b", attempt(1, 5))])
    report = CellReport(summary=s, info=TaskInfo(name="depthqa"))
    levels = table_levels([report])
    assert "| judge missing |" in levels.splitlines()[0]
    assert "| depthqa | m | standard · zero-shot | 1 | 0 | 0 | 1 | - |" in levels
    [row] = csv_rows([report])
    assert (row["scored"], row["judge_missing"], row["variant"]) == (1, 1, "zero-shot")
    assert row["hpi"] == 1.0


def test_adaptive_cells_have_no_level1_figures() -> None:
    from tests.run_fixtures import make_record

    records = [make_record("a", mode="adaptive", level=1, iteration=1),
               make_record("a", mode="adaptive", level=None),
               make_record("b", mode="adaptive", level=2, iteration=1)]  # fmt: skip
    records[1].draw = 1
    records += [make_record("b", mode="adaptive", level=1, iteration=2)]
    records[3].draw = 1
    s = summarize(records, dataset="boolq", model="m", mode="adaptive", m=5, penalty=1.71)
    assert s.level1_accuracy is None and s.chance_level1_accuracy is None
    assert s.accuracy == pytest.approx(3 / 4)
    assert set(s.pass_at_k) == {"hpf@1", "hpf@2"}
    [row] = csv_rows([CellReport(summary=s, info=TASKS["boolq"].info())])
    assert row["level1_accuracy"] is None and row["chance_level1_accuracy"] is None


def test_reports_read_records_saved_before_the_fix_the_same_way(tmp_path: Path) -> None:
    """Records from an older hpt carry hpi_score m + penalty for unjudged climbs; reports
    recompute from the attempts, so intervals, sizing and paired scores leave them out."""
    from hpt.reports.cells import collect
    from tests.run_fixtures import write_run

    records = [node("a", attempt(1, None)), node("b", attempt(1, 5)), node("c", attempt(1, 2))]
    assert records[0].hpi_score == 1 + PENALTY  # as saved before
    [r] = collect([write_run(tmp_path / "run", list(records))])
    assert (r.summary.n, r.summary.judge_missing) == (2, 1)
    assert r.summary.hpi == pytest.approx((1 + 1 + PENALTY) / 2)
    low, high = r.hpi_ci or (0.0, 0.0)
    assert (low, high) != (0.0, 0.0) and high <= 1 + PENALTY and r.distinct_samples == 2
    assert r.intervals["depth_scores.1"] == (5.0, 5.0) and "depth_scores.2" in r.intervals
