"""The results room stands alone: a run directory is summarised, reported and viewed from its
own files, with no task, graph or run code loaded; report tables come from what the datasets
declared in run.json, not from dataset names in report code."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpt.reports.cells import collect
from hpt.reports.report_markdown import markdown
from hpt.results import Column, ReportTable, TaskInfo, read_run_info, summarize_cells
from hpt.results.reader import read_records
from hpt.results.textmetrics import corpus_bleu
from tests.run_fixtures import make_record, write_run
from tests.test_cli import hpt

REPO = Path(__file__).resolve().parents[1]
ROOM = REPO / "hpt" / "results"


def _mixed_run(tmp_path: Path) -> Path:
    """BoolQ, HumanEval and IWSLT cells: one per table HPT's datasets declare."""
    recs = [make_record("a", level=1), make_record("b", level=None)]
    recs += [make_record("h1", dataset="humaneval", level=2, penalty=4.68)]
    outputs = [("le chat est noir", "le chat est noir"), ("un chien", "le chien court")]
    for i, (out, ref) in enumerate(outputs):
        recs.append(
            make_record(f"t{i}", dataset="iwslt", threshold=0.15, level=1, penalty=1.92,
                        final=out, target=ref, score=0.5)
        )  # fmt: skip
    return write_run(tmp_path / "run", recs)


def test_the_room_imports_no_running_code() -> None:
    """hpt.results uses the message types of hpt.types, never a room that runs models, nor
    the rooms that read it."""
    forbidden = (
        "hpt.backends",
        "hpt.prompts",
        "hpt.structured",
        "hpt.graphs",
        "hpt.orchestrator",
        "hpt.tasks",
        "hpt.cli",
        "hpt.reports",
        "hpt.viewer",
    )
    for path in ROOM.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                assert not name.startswith(forbidden), f"{path.name} imports {name}"


# Report and view a run directory where no backend, task, graph or run module can even be
# imported.
_ALONE = """
import sys
for name in ("hpt.backends", "hpt.tasks", "hpt.structured", "hpt.graphs", "hpt.orchestrator",
             "hpt.cli"):
    sys.modules[name] = None  # any import of them now fails
from pathlib import Path
from hpt.reports.cells import collect
from hpt.reports.report_markdown import markdown
from hpt.results import read_run_info, read_records, summarize_cells
from hpt.viewer.page import write_view
run = Path(sys.argv[1])
reports = collect([run])
print(markdown(reports, [run]))
infos = read_run_info(run).tasks
print({s.dataset: s.text_score for s in summarize_cells(read_records(run), infos)})
print("viewed", write_view([run], run / "view.html"))
"""


def test_report_summary_and_view_from_the_directory_alone(tmp_path: Path) -> None:
    run = _mixed_run(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", _ALONE, str(run)],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "## Table 1 · HPI (lower is better) and accuracy" in out
    assert "| model | boolq HPI | boolq accuracy % |" in out
    assert "## Table 2 · HumanEval: HPI and pass@1" in out
    assert "| model | iwslt HPI @0.15 | iwslt corpus BLEU @0.15 |" in out
    bleu = corpus_bleu(["le chat est noir", "un chien"], ["le chat est noir", "le chien court"])
    assert f"'iwslt': {bleu!r}" in out
    assert "viewed 5" in out
    assert (run / "view.html").stat().st_size > 1000


def test_cli_reports_with_an_empty_task_registry(tmp_path: Path) -> None:
    """``hpt report`` after a plugin emptied the registry: the same tables."""
    run = _mixed_run(tmp_path)
    plugin = tmp_path / "forget_tasks.py"
    plugin.write_text("from hpt.tasks import TASKS\nTASKS.clear()\n")
    env_path = f"{tmp_path}"
    normal = hpt("report", str(run), "--no-plots", "--out", str(tmp_path / "a"))
    empty = hpt(
        "--plugin", "forget_tasks", "report", str(run), "--no-plots", "--out",
        str(tmp_path / "b"), env={"PYTHONPATH": env_path},
    )  # fmt: skip
    assert normal.returncode == 0 and empty.returncode == 0, empty.stderr
    assert (tmp_path / "a" / "report.md").read_text().replace(str(tmp_path / "a"), "") == (
        tmp_path / "b" / "report.md"
    ).read_text().replace(str(tmp_path / "b"), "")
    assert "corpus BLEU" in (tmp_path / "b" / "report.md").read_text()


def test_old_run_directories_borrow_descriptions_from_installed_tasks(tmp_path: Path) -> None:
    """A run.json written before it described its tasks: the CLI asks the task registry."""
    run = _mixed_run(tmp_path)
    spec = json.loads((run / "run.json").read_text())
    del spec["tasks"]
    (run / "run.json").write_text(json.dumps(spec))
    assert read_run_info(run).tasks == {}
    result = hpt("report", str(run), "--no-plots")
    assert result.returncode == 0, result.stderr
    assert "iwslt corpus BLEU @0.15" in result.stdout and "## Table 2" in result.stdout
    # Without any description a dataset joins the generic answer table; nothing is lost.
    md = markdown(collect([run]), [run])
    assert "| model | boolq HPI | boolq accuracy % | humaneval HPI |" in md


def test_a_new_dataset_brings_its_own_table(tmp_path: Path) -> None:
    """No report code names a dataset: a toy dataset's declared table appears as declared."""
    toy_table = ReportTable(
        key="toy", title="Toy · HPI and level-1 accuracy", order=4, layout="cells",
        columns=(Column(label="HPI", value="hpi"),
                 Column(label="level-1 %", value="level1_accuracy", percent=True)),
    )  # fmt: skip
    info = TaskInfo(name="toy", title="Toy", kind="answer", table=toy_table)
    recs = [make_record(f"x{i}", dataset="toy", level=level) for i, level in enumerate([1, 2])]
    run = write_run(
        tmp_path / "toy", recs, spec={"dataset": ["toy"], "tasks": {"toy": info.model_dump()}}
    )
    md = markdown(collect([run]), [run])
    assert "## Toy · HPI and level-1 accuracy" in md
    assert "| model | HPI | level-1 % |" in md and "| alpha | 1.50 [1.00, 2.00] | 50.00 |" in md
    assert "## Table 1" not in md
    summary = summarize_cells(read_records(run), read_run_info(run).tasks)[0]
    assert summary.hpi == pytest.approx(1.5)


def test_cells_come_in_one_order_whatever_order_their_records_came_in(tmp_path: Path) -> None:
    # Records are written as calls return, so which cell's record comes first changes from
    # run to run; summaries, reports and cells.csv must not.
    records = [
        make_record("s1", model="beta", level=1),
        make_record("s1", model="alpha", mode="adaptive", threshold=0.5, level=1, iteration=1),
        make_record("s1", model="alpha", dataset="humaneval", level=2, penalty=4.68),
        make_record("s1", model="alpha", mode="adaptive", level=1, iteration=1),
        make_record("s1", model="alpha", level=2),
    ]
    expected = [
        ("alpha", "boolq", "standard", None),
        ("alpha", "boolq", "adaptive", None),
        ("alpha", "boolq", "adaptive", 0.5),
        ("alpha", "humaneval", "standard", None),
        ("beta", "boolq", "standard", None),
    ]
    for i, order in enumerate((records, records[::-1], records[2:] + records[:2])):
        cells = [(s.model, s.dataset, s.mode, s.threshold) for s in summarize_cells(order)]
        assert cells == expected
        reports = collect([write_run(tmp_path / f"run{i}", order)])
        assert [(r.summary.model, r.summary.dataset, r.summary.mode, r.summary.threshold)
                for r in reports] == expected  # fmt: skip
