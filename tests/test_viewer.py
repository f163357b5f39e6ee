"""``hpt view`` in a real headless Chromium (Debian's package): clicks, DOM and a screenshot."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from hpt.orchestrator.viewer import write_view
from tests.run_fixtures import make_record, write_run
from tests.test_cli import HPT, hpt

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
N = 10_000
EVIL = '<img src=x onerror="window.pwned=1">'


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium not found: `make test` installs Debian's chromium (apt, as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10,000 samples over two models, two datasets and both modes; a few marked ones."""
    records = []
    for i in range(N):
        model = "alpha" if i % 2 else "beta"
        dataset = "boolq" if i % 3 else "csqa"
        mode = "adaptive" if i % 5 == 0 else "standard"
        level = None if i % 7 == 0 else (i % 5) + 1
        iteration = 1 if mode == "adaptive" and level else None
        records.append(make_record(f"s{i}", model=model, dataset=dataset, mode=mode, level=level,
                                   iteration=iteration, tokens=(10, 2)))  # fmt: skip
    records[4321] = make_record("needle", model="beta", level=3, final=EVIL)
    records[9999] = make_record("broken", model="alpha", level=None, error="HTTP 400: too long")
    return write_run(tmp_path_factory.mktemp("view") / "run", records)


def _page(browser: object, url: str) -> object:
    page = browser.new_page(viewport={"width": 1300, "height": 900})  # type: ignore[attr-defined]
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']")
    return page


def test_table_filters_and_a_sample_climb(browser: object, big_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "view.html"
    assert write_view([big_run], out) == N
    html = out.read_text()
    assert "http://" not in html.replace(
        "http://www.w3.org/2000/svg", ""
    )  # no CDN, nothing fetched
    page = _page(browser, out.as_uri())
    assert page.inner_text("#count") == f"{N:,} of {N:,} samples · page 1 of 100"
    assert page.locator("#rows tr").count() == 100

    page.select_option("#f-model", "alpha")
    page.select_option("#f-mode", "standard")
    expected = sum(1 for i in range(N) if i % 2 and i % 5) - 1  # s4321 became beta's needle
    assert page.inner_text("#count").startswith(f"{expected:,} of")
    page.select_option("#f-level", "none")
    levels = page.locator("#rows tr td:nth-child(5)").all_inner_texts()
    assert levels and set(levels) == {"unresolved"}
    page.select_option("#f-level", "error")
    assert page.inner_text("#count").startswith("1 of") and "broken" in page.inner_text("#rows")
    page.click("#rows tr >> nth=0")
    page.wait_for_selector("[data-testid=title]")
    assert "HTTP 400: too long" in page.inner_text("#detail")

    # Back to everything; find one sample by id, open it: its ladder shows the path taken.
    for sel in ("#f-model", "#f-mode", "#f-level"):
        page.select_option(sel, "")
    page.fill("#f-text", "needle")
    assert page.inner_text("#count").startswith("1 of")
    page.click("#rows tr >> nth=0")
    page.wait_for_selector("[data-testid=ladder]")
    states = {
        key: page.get_attribute(f"[data-node={key}]", "class")
        for key in ("L1", "L2", "L3", "L4", "end")
    }
    assert states == {"L1": "node failed", "L2": "node failed", "L3": "node resolved",
                      "L4": "node idle", "end": "node end resolved"}  # fmt: skip
    assert page.locator("svg.ladder path.edge.taken").count() == 2
    attempts = page.locator("section.attempt")
    assert attempts.count() == 3
    assert "Q needle at level 1" in attempts.nth(0).locator("pre.prompt").inner_text()
    # A model's answer is shown as text, never run as markup.
    assert attempts.nth(2).locator("pre.response").inner_text() == EVIL
    assert page.evaluate("window.pwned") is None

    # A sample deep in the run (another chunk), reached by paging.
    page.fill("#f-text", "")
    for _ in range(60):
        page.click("#next")
    assert "page 61 of 100" in page.inner_text("#count")
    row = page.locator("#rows tr >> nth=7")
    sample = row.locator("td >> nth=0").inner_text()
    row.click()
    page.wait_for_function(
        "s => document.querySelector('[data-testid=title]')?.textContent.startsWith(s)", arg=sample
    )
    assert page.errors == []

    # The screenshot shows the resolved node in its green and the failed ones in red.
    page.fill("#f-text", "needle")
    page.click("#rows tr >> nth=0")
    page.wait_for_selector("[data-node=L3].resolved")
    shot = Image.open(io.BytesIO(page.locator("svg.ladder").screenshot())).convert("RGB")
    colours = {c for _, c in shot.getcolors(1 << 20)}
    assert (0x2E, 0x7D, 0x32) in colours and (0xC6, 0x28, 0x28) in colours
    assert shot.width > 300 and shot.height > 200


def test_adaptive_sample_shows_selector_turns(browser: object, tmp_path: Path) -> None:
    rec = make_record("ad", mode="adaptive", level=2, iteration=3, hallucinations=2)
    run = write_run(tmp_path / "a", [rec])
    assert hpt("view", str(run), "--no-open").returncode == 0
    page = _page(browser, (run / "view.html").as_uri())
    page.click("#rows tr >> nth=0")
    page.wait_for_selector("[data-node=selector]")
    assert "2 hallucinated turns" in (page.text_content("svg.ladder") or "")
    assert page.locator("ol.selections li").count() == 2


def test_serve_on_localhost(browser: object, big_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "served.html"
    env = {**os.environ}
    proc = subprocess.Popen([HPT, "view", str(big_run), "--out", str(out), "--serve"],
                            stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        url = None
        assert proc.stdout is not None
        for line in proc.stdout:
            found = re.search(r"http://127\.0\.0\.1:\d+/", line)
            if found:
                url = found.group(0)
                break
        assert url, "no URL printed"
        page = _page(browser, url)
        assert page.inner_text("#count").startswith(f"{N:,} of")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_view_errors(tmp_path: Path) -> None:
    missing = hpt("view", str(tmp_path / "nope"), "--no-open")
    assert missing.returncode == 2 and "is not a run directory" in missing.stderr
