"""``hpt export``'s messages: one line saying what was written where, or one line saying what
was wrong and what to do, with the exit code of whose fault it was."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hpt.cli.main import main
from hpt.exports import ExportError, export
from tests.run_fixtures import make_record, write_run
from tests.test_cli import hpt


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run-c", [make_record(f"s{i}", level=1) for i in range(3)])


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_an_export_says_what_it_wrote_where(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", str(run_dir), "--to", "inspect"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == f"exported 3 sample records as inspect to {run_dir / 'exports' / 'run-c.eval'}"
    assert (run_dir / "exports" / "run-c.eval").is_file()


def test_not_a_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path), "--to", "hf"]) == 2
    assert _error_line(capsys) == (
        f"hpt: error: {tmp_path} is not a run directory (no samples.jsonl)"
    )


def test_an_unknown_format(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["export", str(run_dir), "--to", "csv"])
    assert exit_.value.code == 2
    assert "invalid choice: 'csv'" in capsys.readouterr().err
    with pytest.raises(ExportError, match="unknown export format 'csv'; choose one of inspect, hf"):
        export(run_dir, "csv")


def test_a_missing_extra_names_what_to_install(
    run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if inspect_ai were not installed: the import system finds no such module.
    for name in [m for m in sys.modules if m == "inspect_ai" or m.startswith("inspect_ai.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delitem(sys.modules, "hpt.exports.inspect_log", raising=False)
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    assert main(["export", str(run_dir), "--to", "inspect"]) == 2
    assert _error_line(capsys) == (
        "hpt: error: --to inspect needs inspect_ai: pip install 'hpt[inspect]'"
    )
    assert not (run_dir / "exports").exists()


def test_push_is_refused_for_inspect(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(run_dir), "--to", "inspect", "--push", "me/logs"]) == 2
    assert _error_line(capsys) == (
        "hpt: error: --push does not apply to --to inspect: its export is a file; copy it "
        "where it should go"
    )


def test_an_unwritable_out(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert main(["export", str(run_dir), "--to", "hf", "--out", str(blocker / "sub")]) == 2
    line = _error_line(capsys)
    assert line.startswith(f"hpt: error: cannot write exports to {blocker / 'sub'}: ")
    assert line.endswith("Not a directory")


def test_a_push_the_hub_refuses_is_one_line(run_dir: Path, tmp_path: Path) -> None:
    # Offline mode (read when huggingface_hub is imported, so in a fresh process): the Hub
    # client refuses before any connection; the local export stands.
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home"), "HF_TOKEN": ""}
    result = hpt("export", str(run_dir), "--to", "hf", "--push", "someone/results", env=env)
    assert result.returncode == 1, result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert line.startswith("hpt: error: cannot push to someone/results: ")
    assert "offline mode is enabled" in line and line.endswith("(the local export is written)")
    assert (run_dir / "exports" / "hf" / "README.md").is_file()
