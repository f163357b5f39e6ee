"""``hpt view --serve`` in a real headless Chromium while a scripted run appends records:
new rows and the updated summary show within seconds, a torn last line waits for its
newline, errors and the cost so far (spend.json) show, and the end of the run is named."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpt.orchestrator.budget import Spend
from hpt.results.tally import Tally
from tests.run_fixtures import make_record, write_run
from tests.test_cli import HPT
from tests.test_viewer import browser  # noqa: F401  (the module's Chromium fixture)

SOON = 5000  # ms: what "within a few seconds" allows


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A run directory with run.json only (no record yet), served live."""
    run = write_run(tmp_path / "run", [])
    (run / "samples.jsonl").unlink()
    proc = subprocess.Popen([HPT, "view", str(run), "--serve"], stdout=subprocess.PIPE,
                            text=True, env={**os.environ})  # fmt: skip
    try:
        assert proc.stdout is not None
        url = None
        for line in proc.stdout:
            if found := re.search(r"http://127\.0\.0\.1:\d+/", line):
                url = found.group(0)
                break
        assert url, "no URL printed"
        yield run, url
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) is not None


def _append(run: Path, text: str) -> None:
    with (run / "samples.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(text)


def _count(page: object, n: int) -> None:
    page.wait_for_function(  # type: ignore[attr-defined]
        "n => document.querySelector('#count').textContent.startsWith(n + ' of ' + n + ' ')",
        arg=n, timeout=SOON,
    )  # fmt: skip


def _cell(page: object, key: str) -> str:
    return page.inner_text(f"[data-testid=summary] tr[data-cell] td[data-key={key}]")  # type: ignore[attr-defined,no-any-return]


def test_live_view_follows_a_run(browser: object, served: tuple[Path, str]) -> None:  # noqa: F811
    run, url = served
    page = browser.new_page(viewport={"width": 1300, "height": 900})  # type: ignore[attr-defined]
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']")
    # Before the first record: the summary says so, the table is empty.
    assert "No record yet" in page.inner_text("[data-testid=summary]")
    assert page.inner_text("#count").startswith("0 of 0")

    records = [make_record(f"s{i}", level=(i % 3) + 1 if i % 4 else None) for i in range(6)]
    _append(run, "".join(r.model_dump_json() + "\n" for r in records[:3]))
    _count(page, 3)
    tally = Tally.of(records[0])
    for r in records[:3]:
        tally.add(r)
    assert _cell(page, "samples") == "3"
    assert _cell(page, "hpi") == f"{tally.summary().hpi:.3f}"

    # A torn last line is not a record until its newline lands.
    line = records[3].model_dump_json() + "\n"
    _append(run, line[:40])
    page.wait_for_timeout(800)  # several polls
    assert page.inner_text("#count").startswith("3 of 3")
    _append(run, line[40:])
    _count(page, 4)
    assert "s3" in page.inner_text("#rows")

    # An error shows in the table and the summary; the cost so far from spend.json.
    broken = make_record("broken", level=None, error="HTTP 500: overloaded")
    _append(run, broken.model_dump_json() + "\n")
    spend = Spend()
    spend.add("alpha", 0.0123, calls=7)
    (run / "spend.json").write_text(spend.model_dump_json())
    _count(page, 5)
    page.wait_for_function(
        "() => document.querySelector('[data-testid=spend]')?.textContent"
        ".startsWith('Cost so far: $0.0123 on 7 calls')", timeout=SOON,
    )  # fmt: skip
    page.wait_for_function(
        "() => document.querySelector('td[data-key=errors]').textContent === '1'", timeout=SOON
    )
    page.select_option("#f-level", "error")
    assert page.inner_text("#count").startswith("1 of 5") and "broken" in page.inner_text("#rows")
    page.click("#rows tr >> nth=0")  # the record, fetched from the server
    page.wait_for_selector("[data-testid=title]")
    assert "HTTP 500: overloaded" in page.inner_text("#detail")

    # The rest of the run, then its summary.json: the page says it is complete.
    page.select_option("#f-level", "")
    _append(run, "".join(r.model_dump_json() + "\n" for r in records[4:]))
    (run / "summary.json").write_text('{"complete": true, "cells": []}')
    _count(page, 7)
    page.click("#to-summary")
    page.wait_for_function(
        "() => document.querySelector('#live').textContent === 'complete'", timeout=SOON
    )
    assert _cell(page, "samples") == "7" and _cell(page, "errors") == "1"
    assert page.inner_text("[data-testid=spend]").startswith("Cost: $0.0123")
    assert errors == []
    page.close()


def test_serve_needs_a_run_directory(tmp_path: Path) -> None:
    from tests.test_cli import hpt

    missing = hpt("view", str(tmp_path), "--serve")
    assert missing.returncode == 2 and "is not a run directory (no run.json" in missing.stderr
