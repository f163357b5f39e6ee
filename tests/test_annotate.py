"""``hpt annotate`` end to end: the browser page in headless Chromium, the terminal through
stdin, the LLM annotator against the loopback OpenAI-compatible server; and a run's penalty:
``--penalty``, ``--annotations`` and the once-only notice."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpt.cli.annotate import has_display
from hpt.orchestrator.annotate import representative_set
from hpt.results.annotations import annotations_file, append_annotation, read_annotations
from hpt.results.penalties import Annotation, Scores, annotated_penalty, krippendorff_alpha
from hpt.tasks import get_task
from tests.conftest import interruptible
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_cli import HPT, hpt

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
CRITERIA = ("reproduction", "interpretation", "reasoning", "application")
# What alice gives the 8 samples of HumanEval's representative set, in the order shown.
# Sample means 1, 2, 3.5, 3, 4, 2.5, 5, 2.5: HPI_dataset = 23.5 / 8 = 2.9375.
ALICE = [(1, 1, 1, 1), (2, 2, 2, 2), (5, 4, 3, 2), (3, 3, 3, 3), (4, 4, 4, 4), (1, 2, 3, 4),
         (5, 5, 5, 5), (2, 3, 2, 3)]  # fmt: skip


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium not found: `make test` installs Debian's chromium (apt, as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def annotate_cmd(data_dir: Path, out: Path, *extra: str) -> list[str]:
    return [HPT, "annotate", "humaneval", "--data-dir", str(data_dir), "--out", str(out), *extra]


def start_page(
    data_dir: Path, out: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        annotate_cmd(data_dir, out, "--annotator", "alice", *(extra or ["--no-open"])),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
        env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        found = re.search(r"annotate at (http://127\.0\.0\.1:\d+/)", line)
        if found:
            return proc, found.group(1)
    proc.wait(timeout=10)
    pytest.fail(f"no address printed: {proc.stderr.read() if proc.stderr else ''}")


def stopped(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Its whole output once it exits: read through the same text streams start_page read
    from (communicate() reads the pipes' descriptors, and would miss lines start_page's
    read-ahead already took, such as the one printed right after the address)."""
    proc.wait(timeout=30)
    assert proc.stdout is not None and proc.stderr is not None
    return proc.stdout.read(), proc.stderr.read()


def score(page: Any, scores: tuple[int, ...]) -> str:
    """Score the shown sample; return its id once the next one (or the end) is shown."""
    shown = page.get_attribute("body", "data-sample")
    assert page.is_disabled("#save")
    for key, value in zip(CRITERIA, scores, strict=True):
        page.click(f'[data-criterion="{key}"] button[data-score="{value}"]')
    assert page.get_attribute(f'[data-criterion="{CRITERIA[0]}"] button[data-score="{scores[0]}"]',
                              "aria-pressed") == "true"  # fmt: skip
    page.click("#save")
    page.wait_for_function("s => document.body.dataset.sample !== s", arg=shown)
    return str(shown)


def test_browser_page_end_to_end(browser: Any, data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "annotations"
    proc, url = start_page(data_dir, out)
    try:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']")
        assert page.inner_text("#progress") == "0 of 8 scored by alice"
        assert page.locator(".criterion").count() == 4
        assert "Application of Knowledge and Execution" in page.inner_text("#criteria")
        assert "def " in page.inner_text("#blocks")  # a HumanEval prompt, shown as text
        order = [score(page, ALICE[i]) for i in range(3)]
        assert page.inner_text("#progress") == "3 of 8 scored by alice"
        skipped = page.get_attribute("body", "data-sample")
        page.click("#skip")
        page.wait_for_function("s => document.body.dataset.sample !== s", arg=skipped)
        assert page.inner_text("#progress") == "3 of 8 scored by alice · 1 skipped"
        # Only this page can post: another origin lacks the session token.
        request = urllib.request.Request(url + "api/annotate", method="POST",
                                         data=b'{"sample_id": "x"}')  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 403
        assert errors == []
        page.close()
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = stopped(proc)
    assert proc.returncode == 0, stderr
    assert "stopped" in stdout and "saved 3 annotations by alice" in stdout
    assert "Traceback" not in stderr
    path = annotations_file(out, "humaneval")
    assert [a.sample_id for a in read_annotations(path)] == order

    # A new session resumes: what alice scored is skipped, the skipped sample comes back;
    # the server stops by itself once every sample is scored.
    proc, url = start_page(data_dir, out)
    try:
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']")
        assert page.inner_text("#progress") == "3 of 8 scored by alice"
        assert page.get_attribute("body", "data-sample") == skipped
        order += [score(page, ALICE[i]) for i in range(3, 8)]
        page.wait_for_selector("body[data-finished='1']")
        assert "Every sample of the representative set is scored" in page.inner_text("#finished")
        stdout, stderr = stopped(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    saved = read_annotations(path)
    assert [a.sample_id for a in saved] == order and len(set(order)) == 8
    assert all(a.annotator == "alice" and a.kind == "human" for a in saved)
    assert [a.scores.values() for a in saved] == ALICE
    measured = annotated_penalty(saved, "humaneval", "human", order)
    assert measured is not None and measured.value == pytest.approx(2.9375)
    assert re.search(r"HPI_dataset\s+│\s+2\.94", stdout), stdout
    assert re.search(r"samples\s+│\s+8 of 8", stdout), stdout
    assert "humaneval's own penalty: 4.68, HPT paper, table 4 (human annotators)" in stdout


def browser_env(tmp_path: Path, display: bool) -> tuple[dict[str, str], Path]:
    """$BROWSER a stand-in for a console browser (lynx over SSH): it notes the address it is
    given, then holds webbrowser.open until the test removes the note."""
    mark = tmp_path / "opened"
    script = tmp_path / "console-browser"
    script.write_text(f'#!/bin/sh\necho "$1" > {mark}\nwhile [ -e {mark} ]; do sleep 0.1; done\n')
    script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["BROWSER"] = str(script)
    if display:
        env["DISPLAY"] = ":99"
    return env, mark


def test_a_browser_that_waits_does_not_stop_the_page(data_dir: Path, tmp_path: Path) -> None:
    env, mark = browser_env(tmp_path, display=True)
    proc, url = start_page(data_dir, tmp_path / "annotations", "--port", "0", env=env)
    try:
        deadline = time.monotonic() + 30
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mark.exists() and mark.read_text().strip() == url
        # The browser is still open (webbrowser.open has not returned): the page answers.
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200
    finally:
        mark.unlink(missing_ok=True)
        proc.send_signal(signal.SIGINT)
        _, stderr = stopped(proc)
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr


def test_no_display_opens_no_browser(data_dir: Path, tmp_path: Path) -> None:
    assert not has_display({}, "linux") and not has_display({"DISPLAY": ""}, "linux")
    assert has_display({"WAYLAND_DISPLAY": "wayland-0"}, "linux") and has_display({}, "darwin")
    env, mark = browser_env(tmp_path, display=False)
    proc, url = start_page(data_dir, tmp_path / "annotations", "--port", "0", env=env)
    try:
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = stopped(proc)
    assert proc.returncode == 0, stderr
    assert not mark.exists() and "no display here: open the address in a browser" in stdout


def test_terminal_through_stdin(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "annotations"
    chosen = representative_set(get_task("humaneval", data_dir), seed=0)
    ids = [s.id for s in chosen.samples]
    # Another annotator scored every sample already (so agreement has pairs to compare).
    path = annotations_file(out, "humaneval")
    for sample_id, given in zip(ids, ALICE, strict=True):
        scores = Scores(**dict(zip(CRITERIA, given, strict=True)))
        append_annotation(path, Annotation(dataset="humaneval", sample_id=sample_id,
                                           annotator="alice", scores=scores))  # fmt: skip

    # Sample 1: a 7 is refused and asked again, then 2 2 2 2. Sample 2: skipped. Sample 3:
    # three scores, then the input ends: not saved.
    first = subprocess.run(annotate_cmd(data_dir, out, "--terminal", "--annotator", "carol"),
                           input="7\n2\n2\n2\n2\ns\n3\n3\n3\n", capture_output=True, text=True,
                           timeout=120)  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "'7': type 1 to 5, s to skip, q to stop" in first.stdout
    assert "saved 1 annotations by carol" in first.stdout
    carol = [a for a in read_annotations(path) if a.annotator == "carol"]
    assert [(a.sample_id, a.scores.values()) for a in carol] == [(ids[0], (2, 2, 2, 2))]

    # Resumed: 7 to go, the skipped one first; six scored 4 4 4 4, then q.
    second = subprocess.run(annotate_cmd(data_dir, out, "--terminal", "--annotator", "carol"),
                            input="4\n4\n4\n4\n" * 6 + "q\n", capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert "1 of 8 scored by carol already; 7 to go" in second.stdout
    assert f"[1/7] {ids[1]}" in second.stdout
    carol = [a for a in read_annotations(path) if a.annotator == "carol"]
    assert [a.sample_id for a in carol] == ids[:7]

    # By hand: carol's means 2, 4 x 6; alice's 1, 2, 3.5, 3, 4, 2.5, 5, 2.5. Per sample, the
    # two averaged where both scored: 1.5, 3, 3.75, 3.5, 4, 3.25, 4.5, and 2.5 (alice only).
    expected = (1.5 + 3 + 3.75 + 3.5 + 4 + 3.25 + 4.5 + 2.5) / 8
    assert expected == pytest.approx(3.25)
    assert re.search(r"HPI_dataset\s+│\s+3\.25", second.stdout), second.stdout
    assert re.search(r"annotators\s+│\s+alice, carol", second.stdout)
    units = [[float(a), float(c)] for i in range(7)
             for a, c in zip(ALICE[i], (2, 2, 2, 2) if i == 0 else (4, 4, 4, 4), strict=True)]  # fmt: skip
    alpha = krippendorff_alpha(units, "ordinal")
    assert alpha is not None
    assert re.search(rf"alpha, ordinal\s+│\s+{alpha:.3f}".replace("-", r"\-"), second.stdout)
    assert re.search(r"samples\s+│\s+8 of 8", second.stdout), second.stdout

    # A sample of another set (another --seed) counts in neither the penalty nor its count.
    reseeded = representative_set(get_task("humaneval", data_dir), seed=1)
    other = next(s.id for s in reseeded.samples if s.id not in ids)
    append_annotation(path, Annotation(dataset="humaneval", sample_id=other, annotator="alice",
                                       scores=Scores(**dict.fromkeys(CRITERIA, 5))))  # fmt: skip
    summary = hpt("annotate", "humaneval", "--data-dir", str(data_dir), "--out", str(out),
                  "--summary")  # fmt: skip
    assert summary.returncode == 0, summary.stderr
    assert re.search(r"HPI_dataset\s+│\s+3\.25", summary.stdout), summary.stdout
    assert re.search(r"samples\s+│\s+8 of 8", summary.stdout), summary.stdout
    assert "1 sample scored in" in summary.stdout and "outside this set" in summary.stdout
    assert "use it: hpt run --dataset humaneval --annotations" in summary.stdout
    # Drawn with --seed 1, the set is another: alice's one sample of it, and a word that a
    # run measures on the default set.
    seeded = hpt("annotate", "humaneval", "--data-dir", str(data_dir), "--out", str(out),
                 "--summary", "--seed", "1")  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr
    assert re.search(r"samples\s+│\s+\d of 8", seeded.stdout), seeded.stdout
    assert "a run measures on the set drawn without --seed and --fraction" in seeded.stdout

    # A damaged file is one clear error, never a traceback.
    path.write_text(path.read_text().replace('"reasoning":4', '"reasoning":"four"', 1))
    damaged = hpt("annotate", "humaneval", "--data-dir", str(data_dir), "--out", str(out),
                  "--summary")  # fmt: skip
    assert damaged.returncode == 2, damaged.stderr
    assert re.fullmatch(r"hpt: error: \S+humaneval\.jsonl:\d+: scores\.reasoning: .*\n",
                        damaged.stderr)  # fmt: skip


SCORED = '{"reproduction": 2, "interpretation": 3, "reasoning": 4, "application": 5}'


def annotator_model(never: str | None) -> Any:
    """Plays a model annotator: an unreadable first reply, valid scores (mean 3.5) when asked
    again; never valid for the sample whose text holds ``never``. Anything else (a run's
    ladder) gets an answer no reader takes."""

    def respond(body: dict[str, Any]) -> str:
        messages = body["messages"]
        if "expert annotator" not in messages[0]["content"]:
            return "I am not sure."
        if never is not None and never in messages[1]["content"]:
            return "Too hard to say."
        if messages[-1]["content"].startswith("That reply could not be read"):
            return f"Here you go: {SCORED}"
        return '{"reproduction": 7}'

    return respond


def test_model_annotator_and_a_run_that_uses_it(
    fake_openai: tuple[FakeOpenAI, ServerThread], data_dir: Path, tmp_path: Path
) -> None:
    fake, server = fake_openai
    chosen = representative_set(get_task("gpqa", data_dir), seed=0)
    assert len(chosen.samples) == 9 and chosen.strata == 3
    hard = str(chosen.samples[4].fields["question"])[:80]
    fake.responder = annotator_model(never=hard)
    out = tmp_path / "annotations"
    base = ["annotate", "gpqa", "--data-dir", str(data_dir), "--out", str(out),
            "--annotator-model", "openai:test-model", "--base-url", server.base_url]  # fmt: skip
    first = hpt(*base)
    assert first.returncode == 0, first.stderr
    assert "openai:test-model: scored 8, 0 scored before, 1 without a valid reply" in first.stdout
    assert f"{chosen.samples[4].id}: no four scores from 1 to 5 in 3 replies" in first.stdout
    path = annotations_file(out, "gpqa")
    saved = read_annotations(path)
    assert len(saved) == 8 and all(
        a.kind == "model" and a.annotator == "model:openai:test-model" for a in saved
    )
    assert {a.scores.values() for a in saved} == {(2, 3, 4, 5)}
    assert re.search(r"model annotators\s+┃", first.stdout) and "3.50" in first.stdout
    assert re.search(r"samples\s+│\s+8 of 9", first.stdout), first.stdout
    assert "model annotators: a run uses theirs once every sample is scored" in first.stdout

    # Again: only the failed sample is asked (afresh: its unreadable replies are cached).
    fake.responder = annotator_model(never=None)
    asked = fake.served
    again = hpt(*base, "--no-cache")
    assert again.returncode == 0, again.stderr
    assert "scored 1, 8 scored before, 0 without a valid reply" in again.stdout
    assert fake.served - asked == 2  # one unreadable reply, one valid
    assert len(read_annotations(path)) == 9

    # A run measures gpqa's penalty from those annotations, labelled a model's, and says so.
    run_out = tmp_path / "run"
    run = hpt("run", "--dataset", "gpqa", "--model", "openai:test-model", "--base-url",
              server.base_url, "--data-dir", str(data_dir), "--out", str(run_out), "--limit", "2",
              "--annotations", str(out), "--no-progress")  # fmt: skip
    assert run.returncode == 0, run.stderr
    label = f"model annotator: openai:test-model over 9 samples ({path})"
    notes = [line for line in run.stderr.splitlines() if line.startswith("hpt: note:")]
    assert len(notes) == 1 and label in notes[0] and "a model's scores" in notes[0]
    saved_spec = json.loads((run_out / "run.json").read_text())
    assert saved_spec["penalties"]["gpqa"] == {
        "value": 3.5, "source": {"kind": "model", "label": label, "note": None}
    }  # fmt: skip
    records = [json.loads(line) for line in (run_out / "samples.jsonl").read_text().splitlines()]
    assert [(r["penalty"], r["hpi_score"]) for r in records] == [(3.5, 8.5)] * 2


def run_cmd(server: ServerThread, data_dir: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--dataset", "gpqa,boolq", "--model", "openai:test-model", "--base-url",
            server.base_url, "--data-dir", str(data_dir), "--out", str(out), "--limit", "2",
            "--no-progress", *extra]  # fmt: skip


def penalties_of(out: Path) -> dict[str, tuple[float, float | None]]:
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return {f"{r['dataset']}/{r['mode']}": (r["penalty"], r["hpi_score"]) for r in records}


def test_penalty_flag_and_the_once_only_notice(
    fake_openai: tuple[FakeOpenAI, ServerThread], data_dir: Path, tmp_path: Path
) -> None:
    fake, server = fake_openai
    fake.responder = lambda body: "I am not sure."  # nothing resolves: every sample pays
    # Two cells of gpqa (standard and adaptive): its borrowed penalty is said once; boolq's
    # is table 4's and needs no word.
    out = tmp_path / "plain"
    plain = hpt(*run_cmd(server, data_dir, out, "--mode", "standard,adaptive"))
    assert plain.returncode == 0, plain.stderr
    notes = [line for line in plain.stderr.splitlines() if line.startswith("hpt: note:")]
    assert notes == [
        "hpt: note: gpqa: an unresolved sample scores m + 3.03, borrowed from MMLU (no "
        "annotation); nobody has annotated gpqa: measure it with `hpt annotate gpqa` (then "
        "--annotations), or set one with --penalty"
    ]
    spec = json.loads((out / "run.json").read_text())
    assert spec["penalties"] == {
        "gpqa": {"value": 3.03, "source": {"kind": "unannotated", "note": None,
                                           "label": "borrowed from MMLU (no annotation)"}},
        "boolq": {"value": 1.71, "source": {"kind": "paper", "note": None,
                                            "label": "HPT paper, table 4 (human annotators)"}},
    }  # fmt: skip
    assert penalties_of(out)["gpqa/standard"] == (3.03, 8.03)
    assert penalties_of(out)["boolq/standard"] == (1.71, 6.71)

    # --penalty DATASET=VALUE sets one, without a notice; a bare VALUE sets every dataset.
    out = tmp_path / "one"
    one = hpt(*run_cmd(server, data_dir, out, "--penalty", "gpqa=2.5"))
    assert one.returncode == 0, one.stderr
    assert "hpt: note:" not in one.stderr
    assert penalties_of(out) == {"gpqa/standard": (2.5, 7.5), "boolq/standard": (1.71, 6.71)}
    assert json.loads((out / "run.json").read_text())["penalties"]["gpqa"]["source"] == {
        "kind": "set", "label": "set by --penalty", "note": None
    }  # fmt: skip
    out = tmp_path / "every"
    every = hpt(*run_cmd(server, data_dir, out, "--penalty", "0.5"))
    assert every.returncode == 0, every.stderr
    assert penalties_of(out) == {"gpqa/standard": (0.5, 5.5), "boolq/standard": (0.5, 5.5)}

    # A resumed run keeps its saved penalties and may not change them.
    refused = hpt("run", "--resume", str(out), "--penalty", "1")
    assert refused.returncode == 2 and "cannot take --penalty" in refused.stderr
    for args, needle in (
        (["--penalty", "csqa=1"], "--penalty csqa=1: the run has no dataset 'csqa'"),
        (["--penalty", "-1"], "expected [DATASET=]VALUE"),
        (["--penalty", "inf"], "'inf': expected [DATASET=]VALUE with VALUE a finite number"),
        (["--penalty", "boolq=nan"], "'boolq=nan': expected [DATASET=]VALUE"),
        (["--annotations", str(tmp_path / "none")], "no such directory"),
    ):
        bad = hpt(*run_cmd(server, data_dir, tmp_path / "bad", *args))
        last = bad.stderr.strip().splitlines()[-1]  # after argparse's usage, if any
        assert bad.returncode == 2 and needle in last and "error:" in last, bad.stderr
        assert bad.stderr.count("error:") == 1 and "Traceback" not in bad.stderr


def test_a_partly_annotated_set_is_said_once(
    fake_openai: tuple[FakeOpenAI, ServerThread], data_dir: Path, tmp_path: Path
) -> None:
    """One person scored 2 of BoolQ's set: table 4's penalty stays, and the run says why once
    (two cells of boolq), beside gpqa's borrowed one; run.json keeps the reason."""
    fake, server = fake_openai
    fake.responder = lambda body: "I am not sure."
    chosen = representative_set(get_task("boolq", data_dir), seed=0)
    annotations = tmp_path / "annotations"
    path = annotations_file(annotations, "boolq")
    for s in chosen.samples[:2]:
        append_annotation(path, Annotation(dataset="boolq", sample_id=s.id, annotator="alice",
                                           scores=Scores(**dict.fromkeys(CRITERIA, 1))))  # fmt: skip
    out = tmp_path / "run"
    run = hpt(*run_cmd(server, data_dir, out, "--mode", "standard,adaptive", "--annotations",
                       str(annotations)))  # fmt: skip
    assert run.returncode == 0, run.stderr
    notes = [line for line in run.stderr.splitlines() if line.startswith("hpt: note: boolq:")]
    why = (f"human annotations in {path} score 2 of {len(chosen.samples)} samples of the "
           "representative set: not used until every one is scored (`hpt annotate boolq`)")  # fmt: skip
    assert notes == [
        f"hpt: note: boolq: an unresolved sample scores m + 1.71, HPT paper, table 4 (human "
        f"annotators); {why}"
    ]
    assert run.stderr.count("hpt: note: gpqa:") == 1
    saved = json.loads((out / "run.json").read_text())["penalties"]["boolq"]
    assert saved == {"value": 1.71, "source": {"kind": "paper", "note": why,
                                               "label": "HPT paper, table 4 (human annotators)"}}  # fmt: skip
    assert penalties_of(out)["boolq/standard"] == (1.71, 6.71)


def test_a_run_saved_before_penalties_resumes(
    fake_openai: tuple[FakeOpenAI, ServerThread], data_dir: Path, tmp_path: Path
) -> None:
    fake, server = fake_openai
    fake.responder = lambda body: "I am not sure."
    out = tmp_path / "run"
    assert hpt(*run_cmd(server, data_dir, out)).returncode == 0
    spec = json.loads((out / "run.json").read_text())
    del spec["penalties"], spec["annotations"]  # run.json as hpt wrote it before
    (out / "run.json").write_text(json.dumps(spec))
    resumed = hpt("run", "--resume", str(out), "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stderr.count("hpt: note: gpqa:") == 1
