"""Model names are text: a model called ``[red]x[/]`` or ``:smile:`` prints as written in
tables, the live progress view and errors, never as rich markup or an emoji."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from hpt.backends import BackendStats
from hpt.cli.main import main
from hpt.cli.progress import RichProgress, cells_table, print_table
from hpt.orchestrator.spec import RunSpec
from hpt.results.tally import Tally
from tests.servers.openai_compat import FakeOpenAI, ServerThread

MARKUP = "[red]x[/]"
EMOJI = ":smile:"
MODELS = (f"openai:{MARKUP}", f"openai:{EMOJI}")
SMILE = "\N{SMILING FACE WITH OPEN MOUTH AND SMILING EYES}"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerThread]:
    fake = FakeOpenAI(responder=lambda body: "True", model_ids=(MARKUP, EMOJI))
    thread = ServerThread(fake.app()).start()
    # One endpoint for both models (--base-url names one model's).
    monkeypatch.setenv("OPENAI_BASE_URL", thread.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    yield thread
    thread.stop()


def assert_as_written(text: str) -> None:
    assert MARKUP in text and EMOJI in text and SMILE not in text, text


def hpt(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_tables_print_model_names_as_written(
    server: ServerThread, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code, stdout, stderr = hpt(
        capsys, "run", "--dataset", "boolq", "--model", MODELS[0], "--model", MODELS[1],
        "--data-dir", data_dir, "--limit", "1", "--strategies", "role", "--out", out,
        "--no-progress",
    )  # fmt: skip
    assert code == 0, stderr
    assert_as_written(stdout)
    code, stdout, _ = hpt(capsys, "summarize", out)  # one table per cell
    assert code == 0
    assert_as_written(stdout)
    code, stdout, _ = hpt(capsys, "report", out, "--no-plots")
    assert code == 0
    assert_as_written(stdout)


def test_errors_print_model_names_as_written(
    server: ServerThread, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, stderr = hpt(
        capsys, "run", "--dataset", "boolq", "--model", f"openai:[bold]{EMOJI}[/]",
        "--data-dir", data_dir, "--limit", "1", "--out", tmp_path / "run", "--no-progress",
    )  # fmt: skip
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("hpt: error:")
    assert f"[bold]{EMOJI}[/]" in lines[0] and SMILE not in lines[0]


def test_the_live_view_prints_model_names_as_written(tmp_path: Path) -> None:
    screen = io.StringIO()
    progress = RichProgress(Console(file=screen, force_terminal=True, width=300))
    spec = RunSpec(dataset=["boolq"], model=list(MODELS))
    progress.watch({name: BackendStats() for name in MODELS})
    progress.started(spec, total=2, out=tmp_path / "[blue]run[/]")
    tallies = [Tally(dataset="boolq", model=name, mode="standard", m=5, penalty=1.71)
               for name in MODELS]  # fmt: skip
    progress.console.print(progress._render(tallies))
    progress.stop()
    shown = screen.getvalue()
    assert_as_written(shown)
    assert "[blue]run[/]" in shown


def test_a_cells_table_off_a_terminal(tmp_path: Path) -> None:
    screen = io.StringIO()
    tallies = [Tally(dataset="boolq", model=name, mode="standard", m=5, penalty=1.71)
               for name in MODELS]  # fmt: skip
    print_table(Console(file=screen, width=80), cells_table([t.summary() for t in tallies]))
    assert_as_written(screen.getvalue())
