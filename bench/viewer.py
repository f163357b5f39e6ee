"""How fast the trace viewer is on a big run, in headless Chromium (Debian's package).

Writes the viewer for N synthetic records (three calls each, prompts of a few hundred
characters) and times: writing the page, the page becoming ready, a filter over all rows,
and opening a sample from the last block (decompressing it on demand).

    .venv/bin/python bench/viewer.py [--samples 10000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.viewer.page import write_view  # noqa: E402
from tests.run_fixtures import make_record, write_run  # noqa: E402

ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
PASSAGE = "The passage says many things about the question at hand. " * 6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10_000)
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
            browser.close()
    print(f"{args.samples} samples: page {size / 1e6:.1f} MB written in {written:.2f} s; "
          f"ready in the browser {ready:.2f} s; filter {filtered * 1000:.0f} ms; "
          f"a sample from the last block opened in {opened * 1000:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
