"""The live display shows each backend's retries, rate-limit waits and concurrency."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from hpt.backends import BackendStats
from hpt.cli.progress import RichProgress, cells_table, print_table, summary_table
from hpt.graphs import DEFAULT_LADDER
from hpt.orchestrator import RunSpec
from hpt.orchestrator.budget import Spend
from hpt.results.tally import Summary


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
