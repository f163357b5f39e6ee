"""The live display shows each backend's retries, rate-limit waits and concurrency."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from hpt.backends import BackendStats
from hpt.cli.progress import (
    MAX_WORKERS_SHOWN,
    RichProgress,
    cells_table,
    print_cells,
    print_table,
    summary_table,
)
from hpt.graphs import DEFAULT_LADDER
from hpt.orchestrator import RunSpec, SilentObserver, run_evaluation
from hpt.orchestrator.budget import Spend
from hpt.orchestrator.observer import AttemptWatcher, WorkerStats, WorkerWatcher
from hpt.results.records import Attempt, SampleRecord
from hpt.results.runfile import RunSummary
from hpt.results.tally import Summary, Tally
from tests.backend_helpers import serving
from tests.servers.answer_key import KeyedResponder, strategy_of
from tests.servers.openai_compat import FakeOpenAI


def test_live_view_shows_backend_counters(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = RichProgress(Console(file=out, force_terminal=True, width=200))
    stats = BackendStats(calls=40, cache_hits=7, retries=3, rate_limited=2,
                         rate_limit_wait_s=4.25, in_flight=5, concurrency=16)  # fmt: skip
    progress.watch({"tgi:http://gpu-1:8080": stats})
    progress.started(RunSpec(dataset="boolq"), total=10, out=tmp_path)
    stats.retries = 4  # counters are read on every refresh, not copied once
    progress.stop()
    text = out.getvalue()
    assert "tgi:http://gpu-1:8080: in flight 5/16" in text
    assert "retries 4" in text and "rate-limited 2" in text and "held back 4.2 s" in text
    assert "cache hits 7" in text


def test_live_view_shows_the_spend_of_a_run_with_a_budget(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = RichProgress(Console(file=out, force_terminal=True, width=200))
    spend = Spend()
    progress.watch({})
    progress.watch_spend(spend, 2.0, 500)
    progress.started(RunSpec(dataset="boolq"), total=10, out=tmp_path)
    spend.add("openai:gpt-4o-mini", 0.0425, calls=17)  # the ledger is read on every refresh
    progress.stop()
    assert "spent $0.0425 of $2.00 · calls 17 of 500" in out.getvalue()


LONG_MODEL = "meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo@http://gpu-node-17.cluster:8080"


def _summary(dataset: str, model: str, **extra: object) -> Summary:
    fields: dict[str, object] = dict(
        mode="standard", n=1000, samples=1002, m=5, penalty=1.71, hpi=1.734, accuracy=0.912,
        level1_accuracy=0.655, level_counts={1: 655, 2: 200}, unresolved=88, errors=2,
        calls=1900, prompt_tokens=1_234_567, completion_tokens=234_567,
    )  # fmt: skip
    return Summary.model_validate({"dataset": dataset, "model": model, **fields, **extra})


def _plain(**console: object) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, **console), out  # type: ignore[arg-type]


def test_tables_off_a_terminal_keep_every_name_whole() -> None:
    summaries = [_summary("boolq", LONG_MODEL), _summary("commonsense_qa", "alpha", threshold=0.5),
                 _summary("samsum", LONG_MODEL, text_metric="rougeL", text_score=0.41)]  # fmt: skip
    console, out = _plain()
    assert not console.is_terminal and console.width == 80  # what `hpt run > log` gets
    print_table(console, cells_table(summaries))
    text = out.getvalue()
    assert "…" not in text, text
    header = next(line for line in text.splitlines() if "dataset" in line)
    for name in ("dataset", "model", "mode", "scored", "HPI", "chance HPI", "accuracy",
                 "L1 accuracy", "metric", "errors"):  # fmt: skip
        assert f" {name} " in header, header
    assert LONG_MODEL in text and "commonsense_qa @0.5" in text and "rougeL 0.410" in text
    assert "HPF runs (HPI: lower is better)" in text
    assert "\x1b[" not in text  # plain text: no colour codes in the log

    # The one-cell summary: its title holds the model label, and stays on one line.
    console, out = _plain()
    print_table(console, summary_table(summaries[0], list(DEFAULT_LADDER)))
    text = out.getvalue()
    assert "…" not in text, text
    assert f"HPF · boolq · {LONG_MODEL}" in text
    assert "level-1 accuracy (single prompt)" in text and "resolved at L2 zero_shot_cot" in text
    assert "1234567 + 234567" in text


def test_tables_on_a_terminal_or_narrow_content_are_printed_as_before() -> None:
    # On a terminal rich fits the table to the window, as it always did.
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200, color_system=None)
    table = cells_table([_summary("boolq", LONG_MODEL)])
    print_table(console, table)
    assert out.getvalue() == _rendered(console, cells_table([_summary("boolq", LONG_MODEL)]))
    # Off a terminal a table that fits in 80 columns is printed the ordinary way.
    console, out = _plain()
    print_table(console, summary_table(_summary("boolq", "alpha"), ["role"]))
    assert out.getvalue() == _rendered(console, summary_table(_summary("boolq", "alpha"), ["role"]))
    assert max(map(len, out.getvalue().splitlines())) <= 80


def _terminal(width: int) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=width, color_system=None), out


def _campaign() -> list[Summary]:
    """Six cells: three datasets (one with a text metric) by two models, one mode."""
    return [_summary(dataset, model, **({"text_metric": "rougeL", "text_score": 0.2134}
                                         if dataset == "samsum" else {}))
            for dataset in ("boolq", "samsum", "gsm8k")
            for model in ("local", "gpt-4o-mini")]  # fmt: skip


def test_the_closing_table_on_an_80_column_terminal_cuts_nothing() -> None:
    summaries = _campaign()
    console, out = _terminal(80)
    print_cells(console, summaries)
    text = out.getvalue()
    lines = text.splitlines()
    assert "…" not in text, text
    assert max(map(len, lines)) <= 80, text
    # The mode all cells share goes into the title; the rest are columns with short headers,
    # explained under the table.
    assert "HPF runs · standard (HPI: lower is better)" in text
    header = next(line for line in lines if line.startswith("dataset"))
    assert header.split() == ["dataset", "model", "n", "HPI", "chance", "acc", "L1", "metric",
                              "err"]  # fmt: skip
    row = next(line for line in lines if line.startswith("samsum") and "gpt-4o-mini" in line)
    assert row.split() == ["samsum", "gpt-4o-mini", "1000", "1.734", "-", "0.912", "0.655",
                           "rougeL", "0.213", "2"]  # fmt: skip
    assert "chance a guesser's HPI" in " ".join(lines[-2:])

    # Wide enough for the whole table: the whole table, as before.
    console, out = _terminal(160)
    print_cells(console, summaries)
    assert out.getvalue() == _rendered(console, cells_table(summaries))


def test_a_terminal_too_narrow_for_any_table_gets_the_cells_one_by_one() -> None:
    summaries = [_summary("boolq", LONG_MODEL), _summary("samsum", "alpha", text_metric="rougeL",
                                                         text_score=0.41)]  # fmt: skip
    for width in (80, 40):  # a 79-character model name leaves no room for a table at 80
        console, out = _terminal(width)
        print_cells(console, summaries)
        text = out.getvalue()
        lines = text.splitlines()
        assert "…" not in text and max(map(len, lines)) <= width, text
        figures = " ".join(line.strip() for line in lines)
        for figure in ("scored 1000", "HPI 1.734", "chance HPI -", "accuracy 0.912",
                       "L1 accuracy 0.655", "metric rougeL 0.410", "errors 2"):  # fmt: skip
            assert figure in figures, text  # each figure whole on one line
        assert "samsum · alpha · standard" in lines
        assert LONG_MODEL in "".join(lines), text  # folded, never cut


def _rendered(console: Console, table: object) -> str:
    with console.capture() as capture:
        console.print(table)
    return capture.get()


def _lines(table: object) -> list[str]:
    console, out = _plain(width=200)
    console.print(table)
    return [" ".join(x.replace("│", " ").split()) for x in out.getvalue().splitlines()]


def test_a_cell_lists_only_the_levels_its_ladder_has() -> None:
    # A DepthQA mode's cell is one level, whatever ladder the run was given.
    one = _summary("depthqa", "alpha", m=1, level_counts={1: 3}, strategies=["depth_zero_shot"],
                   variant="zero-shot")  # fmt: skip
    lines = _lines(summary_table(one, list(DEFAULT_LADDER)))
    assert "HPF · depthqa · alpha · zero-shot" in lines
    assert "resolved at L1 depth_zero_shot 3" in lines
    assert not any(line.startswith("resolved at L2") for line in lines)
    # A summary saved without its ladder: the run's names only if they fit the cell.
    bare = _summary("depthqa", "alpha", m=1, level_counts={1: 3})
    assert "resolved at L1 3" in _lines(summary_table(bare, list(DEFAULT_LADDER)))


def test_adaptive_summaries_show_no_single_prompt_figures() -> None:
    s = _summary("boolq", "alpha", mode="adaptive", level1_accuracy=None,
                 strategies=list(DEFAULT_LADDER), selector_turns=10, hallucinations=1,
                 hallucination_rate=0.1)  # fmt: skip
    lines = _lines(summary_table(s))
    assert not any("level-1" in line for line in lines), lines
    assert "HPI (lower is better) 1.734" in lines and "HPF accuracy 0.912" in lines
    assert "selector hallucinations / turns 1 / 10 (0.100)" in lines
    cells = _lines(cells_table([s]))
    row = next(line for line in cells if line.startswith("boolq alpha adaptive"))
    assert row.split()[6:8] == ["0.912", "-"]  # accuracy, then no L1 accuracy


LADDER3 = ["role", "zero_shot_cot", "three_shot_cot"]


def _spec(base_url: str, data_dir: Path, out: Path, **extra: Any) -> RunSpec:
    fields: dict[str, Any] = dict(
        dataset="boolq", model="openai:test-model", base_url=base_url, strategies=LADDER3,
        data_dir=data_dir, out=out, concurrency=1,
    )  # fmt: skip
    return RunSpec(**{**fields, **extra})


def _frame(progress: RichProgress) -> str:
    """The live view as it stands, in plain text."""
    console = Console(file=io.StringIO(), width=200, color_system=None)
    with console.capture() as capture:
        console.print(progress._current())
    return "".join(line.rstrip() + "\n" for line in capture.get().splitlines())


async def test_attempts_are_heard_per_level_as_they_finish(
    boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    # Each sample climbs three levels, resolving at the third: the view shows the first two
    # levels tried while the sample's record does not exist yet (the bar still at 0).
    keyed = KeyedResponder(boolq_answers, "three_shot_cot")
    progress = RichProgress(Console(stderr=True, force_terminal=True, width=200))
    seen: list[str] = []

    def responder(body: dict[str, Any]) -> str:
        if strategy_of(body) == "three_shot_cot":  # the client waits for this very reply
            seen.append(_frame(progress))
        return keyed(body)

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with serving(FakeOpenAI(responder).app()) as srv:
        spec = _spec(srv.base_url, data_dir, tmp_path / "run", limit=2)
        result = await run_evaluation(spec, progress)
    assert result.summary.level_counts[3] == 2
    first, second = seen
    assert "0/2" in first and "levels tried/resolved  L1 1/0  L2 1/0\n" in first, first
    # (The first sample's record may still be on its way to the store: the bar says 0 or 1.)
    assert "levels tried/resolved  L1 2/0  L2 2/0  L3 1/1\n" in second, second
    # Model calls as they come back: six sent, the one being answered still out.
    calls = next(line for line in second.splitlines() if line.startswith("model calls"))
    assert " 5   (1 in flight)" in calls, calls
    captured = capsys.readouterr()
    assert captured.out == ""  # the live view writes to stderr only
    assert "levels tried/resolved  L1 2/0  L2 2/0  L3 2/2" in captured.err


async def test_an_attempt_watcher_hears_each_level_before_its_record(
    boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    events: list[tuple[object, ...]] = []

    class Heard(SilentObserver):
        def attempted(self, tally: Tally, attempt: Attempt) -> None:
            events.append((tally.cell.mode, attempt.level, attempt.resolved))

        def recorded(self, record: SampleRecord, tally: Tally) -> None:
            events.append(("recorded", record.resolved_level))

    keyed = KeyedResponder(boolq_answers, "zero_shot_cot")

    def responder(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if "Select only the index" in prompt:  # the adaptive selector: level 1, then 2
            return "2" if "Already tried" in prompt else "1"
        return keyed(body)

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    assert isinstance(Heard(), AttemptWatcher)
    with serving(FakeOpenAI(responder).app()) as srv:
        await run_evaluation(_spec(srv.base_url, data_dir, tmp_path / "std", limit=3), Heard())
        _heard_before_recorded(events, [("standard", 1, False), ("standard", 2, True)], 3)
        events.clear()
        # Adaptive: each selector turn's level is heard as its attempt finishes.
        spec = _spec(srv.base_url, data_dir, tmp_path / "ada", limit=2, mode="adaptive")
        await run_evaluation(spec, Heard())
        _heard_before_recorded(events, [("adaptive", 1, False), ("adaptive", 2, True)], 2)


def _heard_before_recorded(
    events: list[tuple[object, ...]], climb: list[tuple[object, ...]], samples: int
) -> None:
    """One climb at a time: each sample's attempts, in order, all heard before its record
    (which the writer may report after the next climb began)."""
    assert [e for e in events if e[0] != "recorded"] == climb * samples, events
    records = [i for i, e in enumerate(events) if e[0] == "recorded"]
    assert len(records) == samples
    for k, at in enumerate(records, 1):
        assert at - (k - 1) >= k * len(climb), events  # attempts heard before the k-th record


class Bare:
    """An observer written before attempts and workers: the four methods only."""

    def __init__(self) -> None:
        self.recorded_ids: list[str] = []

    def watch(self, backends: Mapping[str, BackendStats]) -> None:
        pass

    def started(self, spec: RunSpec, total: int, out: Path, done: int = 0) -> None:
        pass

    def recorded(self, record: SampleRecord, tally: Tally) -> None:
        self.recorded_ids.append(record.sample_id)

    def finished(self, result: RunSummary) -> None:
        pass


async def test_observers_without_the_new_methods_still_observe(
    boolq_answers: dict[str, str], data_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Neither hears attempts, so their runs set no listener on the climbs.
    assert not isinstance(Bare(), AttemptWatcher) and not isinstance(Bare(), WorkerWatcher)
    assert not isinstance(SilentObserver(), AttemptWatcher)
    assert isinstance(RichProgress(), AttemptWatcher) and isinstance(RichProgress(), WorkerWatcher)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    bare = Bare()
    with serving(FakeOpenAI(KeyedResponder(boolq_answers, "role")).app()) as srv:
        spec = _spec(srv.base_url, data_dir, tmp_path / "run", limit=3)
        result = await run_evaluation(spec, bare)
    assert len(bare.recorded_ids) == 3 and result.summary.level_counts[1] == 3


def test_each_worker_has_its_line_and_the_rest_are_counted(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = RichProgress(Console(file=out, force_terminal=True, width=200))
    n = MAX_WORKERS_SHOWN + 2
    workers = {f"worker {i}": WorkerStats(f"worker {i}", node=f"10.0.0.{i}", state="running")
               for i in range(1, n + 1)}  # fmt: skip
    progress.watch({})
    progress.watch_workers(workers)
    progress.started(RunSpec(dataset="boolq"), total=100, out=tmp_path)
    # Read live, not copied once.
    one = workers["worker 1"]
    one.samples, one.in_flight, one.calls, one.restarts = 12, 3, 36, 1
    workers[f"worker {n}"].state = "dead"
    workers["worker 2"].calls = 4
    frame = _frame(progress)
    progress.stop()
    assert "worker 1 on 10.0.0.1: running  samples 12  in flight 3  calls 36  restarts 1" in frame
    assert f"worker {MAX_WORKERS_SHOWN} on " in frame and f"worker {n - 1} on" not in frame
    assert "... and 2 more workers: 1 running, 1 dead" in frame
    # Spread over workers, the model calls are theirs.
    calls = next(line for line in frame.splitlines() if line.startswith("model calls"))
    assert calls.split()[-2] == "40", calls
    assert "worker 1 on 10.0.0.1: running  samples 12" in out.getvalue()
