"""How fast the trace viewer is on a big run, in headless Chromium (Debian's package).

Writes the viewer for N synthetic records (three calls each, prompts of a few hundred
characters) and times: writing the page, the page becoming ready, a filter over all rows,
and opening a sample from the last block (decompressing it on demand). Then the live view
(``hpt view --serve``) of the same run: the delay from a record appended to samples.jsonl to
its row counted in the page, median and 95th percentile over --appends appends.

    .venv/bin/python bench/viewer.py [--samples 10000]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.viewer.page import write_view  # noqa: E402
from tests.run_fixtures import make_record, write_run  # noqa: E402

ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
# The page counts n samples (the live view's table has caught up with them).
COUNTED = (
    "n => document.querySelector('#count').textContent.startsWith(n.toLocaleString('en') + ' of ')"
)
PASSAGE = "The passage says many things about the question at hand. " * 6


def live_delays(browser: Any, run: Path, template: Any, appends: int) -> list[float]:
    """Serve ``run`` live; append records one at a time, timing each until the page counts it."""
    proc = subprocess.Popen([str(REPO / ".venv/bin/hpt"), "view", str(run), "--serve"],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        url = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
        assert url, "no URL printed"
        page = browser.new_page()
        page.goto(url.group(0))
        total = sum(1 for _ in (run / "samples.jsonl").open())
        page.wait_for_function(COUNTED, arg=total, timeout=120_000)
        delays = []
        for k in range(appends):
            record = template.model_copy(update={"sample_id": f"live-{k}"})
            t = time.perf_counter()
            with (run / "samples.jsonl").open("a") as fh:
                fh.write(record.model_dump_json() + "\n")
            total += 1
            page.wait_for_function(COUNTED, arg=total)
            delays.append(time.perf_counter() - t)
        return delays
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--appends", type=int, default=50)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        records = [
            make_record(f"{PASSAGE} #{i}"[-40:], model="alpha" if i % 2 else "beta",
                        level=None if i % 4 == 0 else 3, final=PASSAGE)
            for i in range(args.samples)
        ]  # fmt: skip
        run = write_run(Path(tmp) / "run", records)
        out = Path(tmp) / "view.html"
        t = time.perf_counter()
        write_view([run], out)
        written = time.perf_counter() - t
        size = out.stat().st_size
        with sync_playwright() as p:
            chromium = shutil.which("chromium") or "/usr/bin/chromium"
            browser = p.chromium.launch(executable_path=chromium, args=ARGS)
            page = browser.new_page()
            t = time.perf_counter()
            page.goto(out.as_uri())
            page.wait_for_selector("body[data-ready='1']")
            ready = time.perf_counter() - t
            t = time.perf_counter()
            page.select_option("#f-model", "alpha")
            page.wait_for_function("document.querySelector('#count').textContent.includes(' of ')")
            filtered = time.perf_counter() - t
            page.select_option("#f-model", "")
            page.fill("#f-text", f"#{args.samples - 1}")
            t = time.perf_counter()
            page.click("#rows tr >> nth=0")
            page.wait_for_selector("section.attempt")
            opened = time.perf_counter() - t
            delays = live_delays(browser, run, records[0], args.appends)
            browser.close()
    delays.sort()
    p95 = delays[min(len(delays) - 1, round(0.95 * (len(delays) - 1)))]
    median = statistics.median(delays)
    print(f"live view: a record appended shows in the page after {median * 1000:.0f} ms median,"
          f" {p95 * 1000:.0f} ms p95 ({len(delays)} appends, {args.samples} samples)")  # fmt: skip
    print(f"{args.samples} samples: page {size / 1e6:.1f} MB written in {written:.2f} s; "
          f"ready in the browser {ready:.2f} s; filter {filtered * 1000:.0f} ms; "
          f"a sample from the last block opened in {opened * 1000:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
