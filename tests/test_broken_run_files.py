"""Broken run files and report inputs -- binary bytes, text that is not UTF-8, a JSON value of
the wrong type, a file cut short -- are one ``hpt: error:`` line naming the file (and the
line, for samples.jsonl and --scores), exit 2, never a traceback; a record torn by a crash
(the last line, without its newline) is skipped, even when the cut fell inside a character."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from hpt.cli.main import main
from hpt.results.reader import read_records
from tests.run_fixtures import make_record, write_run

READERS = ("summarize", "report", "view", "ceiling")


def invoke(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except BaseException:
        pytest.fail(f"hpt {argv} raised:\n{traceback.format_exc()}")
    return code, capsys.readouterr().err


def command(name: str, run: Path, tmp_path: Path) -> list[object]:
    out = tmp_path / "out"
    return {
        "summarize": ["summarize", run],
        "report": ["report", run, "--out", out, "--no-plots"],
        "view": ["view", run, "--out", tmp_path / "view.html", "--no-open"],
        "ceiling": ["ceiling", run, "--out", out, "--no-plots"],
    }[name]


def one_line(code: int, err: str, *parts: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("hpt: error: "), err
    for part in parts:
        assert part in lines[0], err


@pytest.fixture
def run(tmp_path: Path) -> Path:
    recs = [make_record(s, level=1).model_copy(update={"strategies": ["role"], "m": 1})
            for s in "abc"]  # fmt: skip
    return write_run(tmp_path / "run", recs)


def record_line(sample: str) -> bytes:
    rec = make_record(sample, level=1).model_copy(update={"strategies": ["role"], "m": 1})
    return rec.model_dump_json().encode() + b"\n"


SAMPLES_CASES = {
    # what line 2 holds, and what the message says of it
    "binary": (b"\x00\x01\xff\xfe\x89PNG\r\n", ":2: not UTF-8 text"),
    "latin-1": ('{"sample_id": "caf\xe9"}\n'.encode("latin-1"), ":2: not UTF-8 text"),
    "a list": (b"[1, 2, 3]\n", ":2: not a sample record"),
    "a number": (b"42\n", ":2: not a sample record"),
    "a string": (b'"text"\n', ":2: not a sample record"),
    "null bytes": (b'{"sample_id": "a\x00"\n', ":2: not a sample record"),
    "cut short": (record_line("d")[:40] + b"\n", ":2: not a sample record"),
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("case", SAMPLES_CASES)
def test_a_broken_records_line_is_one_error(run, tmp_path, capsys, reader, case) -> None:
    bad, said = SAMPLES_CASES[case]
    (run / "samples.jsonl").write_bytes(record_line("a") + bad + record_line("b"))
    code, err = invoke(capsys, *command(reader, run, tmp_path))
    one_line(code, err, f"{run / 'samples.jsonl'}{said}")
    assert not (tmp_path / "view.html.tmp").exists()


RUN_JSON_CASES = {
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\xff", "not UTF-8 text"),
    "a list": (b"[1, 2]", "not a run description"),
    "a number": (b"3.5", "not a run description"),
    "cut short": (b'{"hpt_version": "1.0", "tasks": {"boolq": {"na', "not a run description"),
    "a wrong field": (b'{"strategies": 7}', "not a run description (strategies:"),
}


@pytest.mark.parametrize("reader", ["summarize", "report", "ceiling"])  # view reads no run.json
@pytest.mark.parametrize("case", RUN_JSON_CASES)
def test_a_broken_run_json_is_one_error(run, tmp_path, capsys, reader, case) -> None:
    bad, said = RUN_JSON_CASES[case]
    (run / "run.json").write_bytes(bad)
    code, err = invoke(capsys, *command(reader, run, tmp_path))
    one_line(code, err, str(run / "run.json"), said)


def test_a_torn_last_line_is_skipped_even_inside_a_character(run) -> None:
    whole = record_line("a") + record_line("b")
    rec = make_record("é", level=1).model_dump_json().encode()
    cut = rec[: rec.index("é".encode()) + 1]  # the first byte of a two-byte character
    (run / "samples.jsonl").write_bytes(whole + cut)
    assert [r.sample_id for r in read_records(run)] == ["a", "b"]
    (run / "samples.jsonl").write_bytes(whole + rec[:-10])  # cut short, no newline
    assert [r.sample_id for r in read_records(run)] == ["a", "b"]
    # Whole but for its newline, the last record counts.
    (run / "samples.jsonl").write_bytes(whole + rec)
    assert [r.sample_id for r in read_records(run)] == ["a", "b", "é"]


def test_an_unreadable_records_file_is_one_error(run, tmp_path, capsys) -> None:
    (run / "samples.jsonl").unlink()
    (run / "samples.jsonl").mkdir()
    one_line(*invoke(capsys, "summarize", run), "is not a run directory")


SCORES_CASES = {
    "binary": (b"model,benchmark,method,accuracy\n\x00\xff\xfe,x,y,1\n", ":2: not UTF-8 text"),
    "a huge field": (
        b'model,benchmark,method,accuracy\n"' + b"x" * 200_000 + b'",b,x,5\n',
        ":2: not CSV",
    ),
}


@pytest.mark.parametrize("case", SCORES_CASES)
def test_a_broken_scores_file_is_one_error(tmp_path, capsys, case) -> None:
    bad, said = SCORES_CASES[case]
    scores = tmp_path / "scores.csv"
    scores.write_bytes(bad)
    code, err = invoke(capsys, "ceiling", "--scores", scores, "--out", tmp_path, "--no-plots")
    one_line(code, err, f"{scores}{said}")


def test_a_scores_file_with_a_byte_order_mark_reads(tmp_path, capsys) -> None:
    scores = tmp_path / "scores.csv"
    rows = "model,benchmark,method,accuracy\nm,b,helm_baseline,50\nm,b,dspy_cot,60\n"
    scores.write_bytes(b"\xef\xbb\xbf" + rows.encode())
    code, err = invoke(capsys, "ceiling", "--scores", scores, "--out", tmp_path, "--no-plots")
    assert code == 0, err


def test_a_binary_prices_file_is_one_error(run, tmp_path, capsys) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    code, err = invoke(capsys, "report", run, "--prices", prices, "--out", tmp_path / "r")
    one_line(code, err, str(prices), "not UTF-8")
