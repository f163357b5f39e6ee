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

from hpt.viewer.page import write_view
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


def _page(browser: object, url: str, width: int = 1300, height: int = 900) -> object:
    page = browser.new_page(viewport={"width": width, "height": height})  # type: ignore[attr-defined]
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
    # Two "fail" steps up to L3, then L3's "resolved" edge into the end node; nothing else.
    assert page.locator("svg.ladder path.edge.taken").count() == 3
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
    # Adaptive keeps its own drawing: selector edges, no "fail" steps down the ladder.
    assert page.locator("svg.ladder path[data-edge]").count() == 0


LONG_MODEL = "some-organisation/a-very-long-model-name-70B-Instruct-v0.3-awq-4bit"
LONG_DATASET = "commonsense_qa_with_a_rather_long_dataset_name"


@pytest.fixture(scope="module")
def ladder_page(browser: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A small run with long names, opened at 1400x900: climbs that stop at L2, L5, nowhere."""
    records = [
        make_record("at-two", level=2),
        make_record("at-five", level=5),
        make_record("never", level=None),
        make_record("broken", level=None, error="HTTP 400: too long"),
    ] + [
        make_record(f"sample-with-a-long-identifier-{i:04d}", model=LONG_MODEL,
                    dataset=LONG_DATASET, threshold=0.5, level=i % 5 + 1)
        for i in range(40)
    ]  # fmt: skip
    run = write_run(tmp_path_factory.mktemp("ladder") / "run", records)
    out = run / "view.html"
    write_view([run], out)
    page = _page(browser, out.as_uri(), width=1400, height=900)
    yield page
    page.close()  # type: ignore[attr-defined]


def _open(page: object, sample: str) -> dict[str, object]:
    """Open ``sample``; return its ladder: node states, edges (from>to) and edge labels."""
    page.fill("#f-text", sample)  # type: ignore[attr-defined]
    page.click("#rows tr >> nth=0")  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "s => document.querySelector('[data-testid=title]')?.textContent.startsWith(s + ' ')",
        arg=sample,
    )
    return page.evaluate(  # type: ignore[attr-defined,no-any-return]
        """() => {
          const svg = document.querySelector('svg.ladder');
          return {
            nodes: Object.fromEntries([...svg.querySelectorAll('[data-node]')]
              .map((g) => [g.dataset.node, g.getAttribute('class')])),
            edges: [...svg.querySelectorAll('path.edge')].map((p) => p.dataset.edge || '?'),
            labels: [...svg.querySelectorAll('text.label')].map((t) => t.textContent),
          };
        }"""
    )


def test_ladder_draws_only_the_path_taken(ladder_page: object) -> None:
    # Resolved at L2 of 5: L1 failed into L2, L2 resolved into the end; L3-L5 untried, unjoined.
    two = _open(ladder_page, "at-two")
    assert two["labels"] == ["fail", "resolved"]
    assert two["edges"] == ["L1>L2", "L2>end"]
    assert two["nodes"] == {"L1": "node failed", "L2": "node resolved", "L3": "node idle",
                            "L4": "node idle", "L5": "node idle", "end": "node end resolved"}  # fmt: skip
    # The exit edge goes around the untried levels, not through them.
    exit_d = ladder_page.get_attribute("path[data-edge='L2>end']", "d")  # type: ignore[attr-defined]
    assert exit_d is not None and " V" in exit_d

    # Resolved on the last rung: four "fail" steps, then straight down into the end.
    five = _open(ladder_page, "at-five")
    assert five["labels"] == ["fail"] * 4 + ["resolved"]
    assert five["edges"] == ["L1>L2", "L2>L3", "L3>L4", "L4>L5", "L5>end"]

    # Unresolved: every level failed, and the last one's edge into the end says so.
    never = _open(ladder_page, "never")
    assert never["labels"] == ["fail"] * 4 + ["unresolved"]
    assert never["edges"] == ["L1>L2", "L2>L3", "L3>L4", "L4>L5", "L5>end"]
    assert never["nodes"]["end"] == "node end failed"  # type: ignore[index]
    assert "unresolved" in (
        ladder_page.get_attribute("path[data-edge='L5>end']", "class") or ""  # type: ignore[attr-defined]
    )

    # An error stops the climb where it happened; its exit edge is marked "error".
    broken = _open(ladder_page, "broken")
    assert broken["labels"] == ["fail"] * 4 + ["error"]
    assert ladder_page.errors == []  # type: ignore[attr-defined]


def test_table_fits_its_panel_at_1400px(ladder_page: object, tmp_path: Path) -> None:
    ladder_page.fill("#f-text", "")  # type: ignore[attr-defined]
    ladder_page.wait_for_function(  # type: ignore[attr-defined]
        "() => document.querySelectorAll('#rows tr').length === 44"
    )
    sizes = ladder_page.evaluate(  # type: ignore[attr-defined]
        """() => {
          const list = document.getElementById('list'), table = list.querySelector('table');
          return { table: table.scrollWidth, panel: list.clientWidth, scroll: list.scrollWidth };
        }"""
    )
    assert sizes["table"] <= sizes["panel"], sizes
    assert sizes["scroll"] <= sizes["panel"], sizes  # no horizontal scroll bar either
    # A long value is cut in the cell but kept whole in its tooltip.
    cell = ladder_page.locator("#rows tr >> nth=10 >> td >> nth=2")  # type: ignore[attr-defined]
    assert cell.get_attribute("title") == LONG_MODEL
    assert cell.evaluate("td => td.scrollWidth > td.clientWidth")  # really cut, with an ellipsis
    # The numbers stay whole.
    numbers = ladder_page.locator("#rows tr >> nth=10 >> td.num")  # type: ignore[attr-defined]
    assert all(n.evaluate("td => td.scrollWidth <= td.clientWidth") for n in numbers.all())
    ladder_page.screenshot(path=str(tmp_path / "table.png"))  # type: ignore[attr-defined]


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
