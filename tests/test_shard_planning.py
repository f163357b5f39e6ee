"""What --shard refuses before a run starts: a DSPy strategy that would make its program in
each shard (the shards' programs would differ, and hpt merge refuses them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpt.cli.main import main


def test_shards_refuse_making_a_program_each(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    out = tmp_path / "shard"
    rc = main(["run", "--dataset", "gsm8k", "--limit", "4", "--strategies", "dspy_predict",
               "--shard", "1/2", "--model", "openai:x", "--base-url", "http://127.0.0.1:1/v1",
               "--data-dir", str(data_dir), "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert "hpt: error: dspy_predict makes the program" in err
    assert "--program dspy_predict:gsm8k=" in err and err.count("\n") == 1
