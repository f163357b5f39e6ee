"""``hpt view`` in a real headless Chromium (Debian's package): clicks, DOM and a screenshot."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from PIL import Image

from hpt.backends.base import Message
from hpt.results import Attempt, Call
from hpt.results.records import DepthRecord, SampleRecord, Verdict
from hpt.tasks.base import Sample
from hpt.tasks.csqa import CommonsenseQA
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
    assert not page.is_visible("#f-variant")  # a run without variants has no such filter
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


def test_serve_on_localhost(browser: object, big_run: Path) -> None:
    """--serve serves the live page: a big run arrives in parts, all of it."""
    proc = subprocess.Popen([HPT, "view", str(big_run), "--serve"], stdout=subprocess.PIPE,
                            text=True, env={**os.environ})  # fmt: skip
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
        page.wait_for_function(
            f"() => document.querySelector('#count').textContent.startsWith('{N:,} of {N:,}')"
        )
        assert page.locator("[data-testid=summary] tbody tr").count() == 8
        assert page.errors == []
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert not (big_run / "view.html").exists()  # nothing written
    both = hpt("view", str(big_run), "--serve", "--out", "x.html")
    assert both.returncode == 2 and "--serve writes no file" in both.stderr


def test_opens_on_the_summary_with_whole_ids(ladder_page: object, tmp_path: Path) -> None:
    """The first screen is the run's summary, hpt's own numbers; sample ids are not cut."""
    ladder_page.click("#to-summary")  # type: ignore[attr-defined]
    summary = ladder_page.locator("[data-testid=summary]")  # type: ignore[attr-defined]
    assert summary.is_visible()
    run = Path(ladder_page.url.removeprefix("file://")).parent  # type: ignore[attr-defined]
    from hpt.reports.cells import collect

    reports = collect([run])
    shown = summary.locator("tbody tr")
    assert shown.count() == len(reports) == 2
    for report in reports:
        s = report.summary
        row = summary.locator(f"tr[data-cell='{s.cell.title}']")
        cell = {key: row.locator(f"td[data-key={key}]").inner_text()
                for key in ("samples", "n", "hpi", "chance_hpi", "accuracy", "errors")}  # fmt: skip
        assert cell == {"samples": str(s.samples), "n": str(s.n), "hpi": f"{s.hpi:.3f}",
                        "chance_hpi": f"{s.chance_hpi:.3f}" if s.chance_hpi is not None else "–",
                        "accuracy": f"{s.accuracy:.3f}", "errors": str(s.errors)}  # fmt: skip
    assert summary.locator("tr[data-cell] td[data-key=errors]").all_inner_texts().count("1") == 1
    # Whole ids: each sample cell shows its full text and nothing overflows it.
    ladder_page.fill("#f-text", "sample-with")  # type: ignore[attr-defined]
    ladder_page.set_viewport_size({"width": 900, "height": 700})  # type: ignore[attr-defined]
    ids = ladder_page.locator("#rows tr td:nth-child(1)")  # type: ignore[attr-defined]
    assert ids.count() == 40
    for k in (0, 17, 39):
        td = ids.nth(k)
        assert td.inner_text() == f"sample-with-a-long-identifier-{k:04d}"
        assert td.evaluate("td => td.scrollWidth <= td.clientWidth"), td.inner_text()
    ladder_page.set_viewport_size({"width": 1400, "height": 900})  # type: ignore[attr-defined]
    ladder_page.fill("#f-text", "")  # type: ignore[attr-defined]


def test_view_errors(tmp_path: Path) -> None:
    missing = hpt("view", str(tmp_path / "nope"), "--no-open")
    assert missing.returncode == 2 and "is not a run directory" in missing.stderr


def _read_by(task: CommonsenseQA, completion: str, finish: str) -> Attempt:
    """An unresolved attempt as the ladder records it: the task's check of ``completion``,
    its call ending ``finish``."""
    sample = Sample(id="pickle", target="C", fields={
        "question": "What green vegetable is soaked in brine to make a pickle?",
        "options": list(zip("ABCDE", ["carrot", "potato", "cucumber", "onion", "lettuce"],
                            strict=True))})  # fmt: skip
    call = Call(purpose="answer", model="alpha", messages=[Message(role="user", content="Q")],
                completion=completion, finish_reason=finish)  # fmt: skip
    # In a thread of its own: Playwright's sync API keeps an event loop running in this one.
    with ThreadPoolExecutor(1) as pool:
        check = pool.submit(asyncio.run, task.acheck_reply(sample, completion, [call])).result()
    assert check.parsed is None
    return Attempt(level=1, strategy="role", calls=[call], completion=completion,
                   parsed=None, resolved=False, detail=check.detail)  # fmt: skip


def test_an_unread_answer_says_why(browser: object, tmp_path: Path) -> None:
    """A conflict is named a conflict, with its detail; so is a loop; plain prose without an
    answer stays "unparseable"."""
    task = CommonsenseQA()
    record = make_record("unread", dataset="csqa", level=None, m=3, target="C")
    record.attempts[0] = _read_by(task, 'D. "cucumber"', "stop")
    record.attempts[1] = _read_by(task, "The answer is D.\n" * 6 + "The", "length")
    record.attempts[1].level, record.attempts[2].level = 2, 3
    run = write_run(tmp_path / "run", [record])
    out = run / "view.html"
    write_view([run], out)
    page = _page(browser, out.as_uri())
    page.click("#rows tr >> nth=0")
    page.wait_for_selector("section.attempt")
    facts = page.evaluate(  # type: ignore[attr-defined]
        """() => [...document.querySelectorAll('section.attempt dl.facts')].map((dl) =>
          Object.fromEntries([...dl.querySelectorAll('dt')].map((dt) =>
            [dt.textContent, dt.nextElementSibling.textContent])))"""
    )
    assert facts[0]["parsed answer"] == "(none: conflict)"
    assert facts[0]["check"] == 'conflict: D is written with option C\'s text "cucumber"'
    assert facts[1]["parsed answer"] == "(none: repeating loop)"
    assert facts[1]["check"] == (
        'repeating loop: cut off at the length limit repeating "The answer is D." 6 times'
    )
    assert facts[2]["parsed answer"] == "(none: unparseable)"
    assert "check" not in facts[2]
    assert not page.errors  # type: ignore[attr-defined]


# ---- DepthQA records: the node, its neighbourhood in the question graph, its conversation

BOLD = "<b>x</b>"


def _depth_record(node: str, depth: int, preds: list[str], succs: list[str], score: int | None,
                  variant: str = "multi-turn", prompt: list[Message] | None = None,
                  prediction: str = "an answer", node_id: str | None = None) -> DepthRecord:  # fmt: skip
    """One node's record in one cell: a single zero-shot-like attempt judged ``score``."""
    prompt = prompt or [Message(role="user", content=f"## Question:\nquestion {node}")]
    call = Call(purpose="answer", model="alpha", messages=prompt, completion=prediction)
    resolved = score is not None and score >= 4
    attempt = Attempt(level=1, strategy="depth_zero_shot", calls=[call], completion=prediction,
                      parsed=prediction, resolved=resolved,
                      verdict=Verdict(score=score, feedback=f"feedback on {node}",
                                      replies=[f"reply on {node} [RESULT] {score}"]))  # fmt: skip
    return DepthRecord(
        sample_id=node, dataset="depthqa", model="alpha", variant=variant,
        strategies=["depth_zero_shot"], m=1, penalty=1.0, target=f"reference for q_{node}",
        resolved_level=1 if resolved else None,
        hpi_score=None if score is None else 1.0 if resolved else 2.0,
        attempts=[attempt], node_id=node_id or node, qid=f"q_{node}", depth=depth,
        predecessors=preds, successors=succs, prompt=prompt, prediction=prediction,
        judge_score=score, feedback=f"feedback on {node}",
        judge_replies=[f"reply on {node} [RESULT] {score}"],
        min_k_prob=0.1234 if node == "c" else None,
    )  # fmt: skip


@pytest.fixture(scope="module")
def depth_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Depth 1: a (5), b (2); depth 2: c <- a, b (4); depth 3: e <- c, ghost (missing score;
    ghost is not in the run). The multi-turn cell, a zero-shot cell with other scores, and a
    plain HPT record beside them."""
    conversation = [
        Message(role="system", content="You are a helpful assistant."),
        Message(role="user", content="## Question:\nquestion a"),
        Message(role="assistant", content=BOLD),
        Message(role="user", content="## Question:\nquestion b"),
        Message(role="assistant", content="b's answer"),
        Message(role="user", content="Based on previous questions, ## Question:\nquestion c"),
    ]
    graph = [("a", 1, [], ["c"]), ("b", 1, [], ["c"]), ("c", 2, ["a", "b"], ["e"]),
             ("e", 3, ["c", "ghost"], [])]  # fmt: skip
    multi = {"a": 5, "b": 2, "c": 4, "e": None}
    records: list[SampleRecord] = [make_record("plain", level=2)]
    for node, depth, preds, succs in graph:
        records.append(_depth_record(node, depth, preds, succs, 1, variant="zero-shot"))
    for node, depth, preds, succs in graph:
        extra = {"prompt": conversation, "prediction": BOLD + EVIL} if node == "c" else {}
        records.append(_depth_record(node, depth, preds, succs, multi[node], **extra))  # type: ignore[arg-type]
    return write_run(tmp_path_factory.mktemp("depth") / "run", records)


def _hood(page: object) -> list[dict[str, str]]:
    return page.evaluate(  # type: ignore[attr-defined,no-any-return]
        """() => [...document.querySelectorAll('[data-testid=neighbourhood] .hood-node')]
          .map((b) => ({ node: b.dataset.node, role: b.dataset.role, label: b.textContent,
                         tag: b.tagName.toLowerCase(), depth: b.parentElement.dataset.depth,
                         colour: getComputedStyle(b).backgroundColor }))"""
    )


def test_depthqa_node_neighbourhood_and_conversation(
    browser: object, depth_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "view.html"
    assert write_view([depth_run], out) == 9
    page = _page(browser, out.as_uri())
    # The variant is a filter of its own and shows beside the mode.
    assert page.is_visible("#f-variant")
    options = page.locator("#f-variant option").all_inner_texts()
    assert options == ["all", "zero-shot", "multi-turn"]
    page.select_option("#f-variant", "multi-turn")
    assert page.inner_text("#count").startswith("4 of 9")
    modes = set(page.locator("#rows tr td:nth-child(4)").all_inner_texts())
    assert modes == {"standard · multi-turn"}
    # e's judge gave no valid score: not scored, not unresolved (b, scored 2, is unresolved).
    levels = page.locator("#rows tr td:nth-child(5)").all_inner_texts()
    assert sorted(levels) == ["L1", "L1", "not scored", "unresolved"]

    _open(page, "c")
    title = page.inner_text("[data-testid=title]")
    assert title == "c · depthqa · alpha · standard · multi-turn"
    depth = page.inner_text("[data-testid=depth]")
    assert "q_c" in depth and "0.1234" in depth
    assert page.inner_text("[data-testid=judge-score]") == "4 / 5"
    # Feedback and raw replies are there, folded.
    assert not page.is_visible("pre.feedback")
    page.click("[data-testid=depth] summary:has-text('judge feedback')")
    assert page.inner_text("pre.feedback") == "feedback on c"
    assert page.locator("[data-testid=depth] summary:has-text('raw judge replies (1)')").count()

    # Two predecessors above, the node, one successor below: scores from this cell only
    # (the zero-shot cell scores every node 1), the missing one grey.
    hood = _hood(page)
    assert [(h["node"], h["role"], h["depth"], h["label"]) for h in hood] == [
        ("a", "pred", "1", "a · 5"), ("b", "pred", "1", "b · 2"),
        ("c", "self", "2", "c · 4"), ("e", "succ", "3", "e · –"),
    ]  # fmt: skip
    colour = {h["node"]: h["colour"] for h in hood}
    grey = "rgb(217, 217, 217)"
    assert colour["e"] == grey
    assert len({colour["a"], colour["b"], colour["c"], grey}) == 4
    assert [h["tag"] for h in hood] == ["button", "button", "span", "button"]

    # The conversation: role-labelled turns, then the answer judged; model output is text.
    turns = page.locator("[data-testid=conversation] .turn")
    roles = [t.get_attribute("data-role") for t in turns.all()]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert turns.nth(2).locator("pre").inner_text() == BOLD
    assert turns.nth(5).locator("pre").inner_text().startswith("Based on previous questions")
    assert turns.nth(6).locator(".role").inner_text().lower() == "assistant · the answer judged"
    assert turns.nth(6).locator("pre").inner_text() == BOLD + EVIL
    assert page.locator("[data-testid=conversation] b, [data-testid=conversation] img").count() == 0
    assert page.evaluate("window.pwned") is None
    # The attempts follow, as for any record.
    assert page.locator("section.attempt").count() == 1

    # A predecessor opens its own record, in the same cell.
    page.click("[data-testid=neighbourhood] button[data-node=a]")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=title]')?.textContent.startsWith('a ')"
    )
    assert page.inner_text("[data-testid=title]").endswith("· multi-turn")
    assert [(h["node"], h["label"]) for h in _hood(page)] == [("a", "a · 5"), ("c", "c · 4")]
    # And on to e, whose predecessor "ghost" is not in the run: grey, not a link.
    page.click("[data-testid=neighbourhood] button[data-node=c]")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=title]')?.textContent.startsWith('c ')"
    )
    page.click("[data-testid=neighbourhood] button[data-node=e]")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=title]')?.textContent.startsWith('e ')"
    )
    ghost = next(h for h in _hood(page) if h["node"] == "ghost")
    assert ghost == {"node": "ghost", "role": "pred", "label": "ghost · –", "tag": "span",
                     "depth": "2", "colour": grey}  # fmt: skip
    assert page.inner_text("[data-testid=judge-score]") == "missing"
    # A climb no judge scored is not called unresolved: it is in no mean.
    assert "not scored: no valid judge verdict" in page.inner_text("#detail")
    assert page.locator("svg [data-node=end]").text_content() == "not scored"

    # The same node in the zero-shot cell is its own record, with its own scores.
    page.select_option("#f-variant", "zero-shot")
    _open(page, "c")
    assert page.inner_text("[data-testid=title]").endswith("· zero-shot")
    assert {h["label"] for h in _hood(page)} == {"a · 1", "b · 1", "c · 1", "e · 1"}

    # A plain HPT record beside them is shown as before: no node, no conversation.
    page.select_option("#f-variant", "")
    ladder = _open(page, "plain")
    assert page.inner_text("[data-testid=title]") == "plain · boolq · alpha · standard"
    assert ladder["edges"] == ["L1>L2", "L2>end"]
    assert page.locator("[data-testid=depth], [data-testid=conversation]").count() == 0
    assert page.errors == []


def test_index_rows_carry_judge_scores(tmp_path: Path) -> None:
    records: list[SampleRecord] = [
        make_record("plain", level=1),
        _depth_record("a", 1, [], ["c"], 5),
        _depth_record("n7", 2, ["a"], [], None, node_id="c"),
    ]
    out = tmp_path / "view.html"
    write_view([write_run(tmp_path / "run", records)], out)
    found = re.search(r'id="hpt-index">(.*?)</script>', out.read_text())
    assert found is not None
    index = json.loads(found.group(1))
    assert [len(r) for r in index["rows"]] == [9, 11, 12]
    assert index["rows"][1][9:] == [5, 1] and index["rows"][2][9:] == [None, 2, "c"]
    assert [c["variant"] for c in index["cells"]] == [None, "multi-turn"]


# ---- Reasoning models: the thinking folded apart from the answer, truncation named

THOUGHT = "So the answer is 49. No: 6 * 7 = 42, and " + EVIL


def _thinking_record(sample: str, effort: str, usage_reasoning: int | None = 120) -> SampleRecord:
    """Level 1 cut off inside its thinking (no answer); level 2 thinks, then answers **42**."""
    record = make_record(sample, level=2, final="**42**", target="42")
    record.reasoning_effort = effort
    cut, answered = record.attempts
    cut.truncated = "thinking"
    cut.completion = cut.calls[0].completion = ""
    cut.calls[0].reasoning = "Let me see: the answer is 42 because"
    cut.calls[0].finish_reason = "length"
    answered.calls[0].reasoning = THOUGHT
    answered.calls[0].usage.reasoning_tokens = usage_reasoning
    return record


def test_reasoning_is_folded_apart_from_the_answer(browser: object, tmp_path: Path) -> None:
    records = [_thinking_record("think", "high"), _thinking_record("quick", "low", None),
               make_record("plain", level=1)]  # fmt: skip
    run = write_run(tmp_path / "run", records)
    assert hpt("view", str(run), "--no-open").returncode == 0
    page = _page(browser, (run / "view.html").as_uri())
    # The cell list names each cell's effort; a filter picks one, least effort first.
    assert page.locator("#f-reasoning option").all_inner_texts() == ["all", "effort low",
                                                                    "effort high"]  # fmt: skip
    modes = page.locator("#rows tr td:nth-child(4)").all_inner_texts()
    assert sorted(modes) == ["standard", "standard · effort high", "standard · effort low"]
    page.select_option("#f-reasoning", "effort high")
    assert page.inner_text("#count").startswith("1 of 3")

    _open(page, "think")
    title = page.inner_text("[data-testid=title]")
    assert title == "think · boolq · alpha · standard · effort high"
    cut, answered = page.locator("section.attempt").all()
    # Level 1 says where it was cut, visibly, in its heading.
    badge = cut.locator("h3 [data-testid=truncated]")
    assert badge.is_visible() and badge.inner_text() == "truncated inside its thinking"
    assert answered.locator("[data-testid=truncated]").count() == 0
    # The thinking is there, folded: closed, its text hidden, its size in the label.
    fold = answered.locator("details[data-testid=thinking]")
    assert fold.get_attribute("open") is None
    assert not fold.locator("pre.reasoning").is_visible()
    assert fold.locator("summary").inner_text() == f"thinking ({len(THOUGHT)} chars)"
    # The answer stands apart, outside the fold, and holds none of the thinking.
    answer = answered.locator(".call > pre.response")
    assert answer.is_visible() and answer.inner_text() == "**42**"
    assert answered.locator(".call > .role").last.inner_text().lower() == "answer"
    assert "(120 thinking)" in answered.locator(".call h4").inner_text()
    # A click opens it; the thinking is text, never markup.
    fold.locator("summary").click()
    assert fold.get_attribute("open") is not None
    assert fold.locator("pre.reasoning").is_visible()
    assert fold.locator("pre.reasoning").inner_text() == THOUGHT
    assert page.evaluate("window.pwned") is None
    # The cut call's thinking is folded too, its answer empty.
    cut_fold = cut.locator("details[data-testid=thinking] summary")
    assert cut_fold.inner_text() == "thinking (36 chars)"

    # A call without thinking is shown as before: its response, no fold.
    page.select_option("#f-reasoning", "")
    _open(page, "plain")
    assert page.locator("details[data-testid=thinking], [data-testid=truncated]").count() == 0
    assert page.locator("section.attempt .call > .role").last.inner_text().lower() == "response"
    assert page.errors == []


def test_the_summary_prices_each_cell_as_hpt_report_does(browser: object, tmp_path: Path) -> None:
    """The cost column is hpt report's cost of each cell (its prices), – where a model has
    none; the static page and the live server both get it from the CLI's meter."""
    from hpt.cli.view import _cost_meter
    from hpt.reports.cells import collect
    from hpt.results.costs import PriceBook
    from hpt.viewer.index import ViewIndex

    records = [make_record(f"s{i}", model=model, level=(i % 3) + 1, tokens=(1000, 200))
               for i in range(6) for model in ("openai:gpt-4o-mini", "no-such-model")]  # fmt: skip
    run = write_run(tmp_path / "run", records)
    index = ViewIndex(_cost_meter())
    for record in records:
        index.add(record, run)
    shown = {s["title"]: s["cost_usd"] for s in index.summary()}
    expected = {r.summary.cell.title: r.cost_usd for r in collect([run], PriceBook.load())}
    assert shown == expected
    priced = [usd for usd in shown.values() if usd is not None]
    assert len(priced) == 1 and priced[0] > 0  # gpt-4o-mini has a price, the other none
    page = tmp_path / "view.html"
    done = hpt("view", str(run), "--out", str(page), "--no-open")
    assert done.returncode == 0, done.stderr
    assert f'"cost_usd":{priced[0]}' in page.read_text()
    shown_page = _page(browser, page.resolve().as_uri())
    costs = shown_page.locator("[data-testid=summary] td[data-key=cost_usd]").all_inner_texts()  # type: ignore[attr-defined]
    assert sorted(costs) == sorted(["–", f"${priced[0]:.4f}"])
    assert shown_page.errors == []  # type: ignore[attr-defined]
