"""Structured prompting on the embedded SmolLM2 model: HELM's fixed prompt, zero-shot DSPy
Predict and ChainOfThought on a few samples of two benchmarks, then BFRS with a tiny budget,
and the ceiling report over what came out. A 135M model rarely writes DSPy's field format, so
this checks what must hold whatever it writes: every call recorded, no sample lost to an
error, the optimiser's calls kept apart from evaluation's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import hpt

pytestmark = [pytest.mark.embedded, pytest.mark.dspy]

METHODS = ("helm_baseline", "dspy_predict", "dspy_cot")


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def test_methods_bfrs_and_the_ceiling(data_dir: Path, tmp_path: Path) -> None:
    runs = []
    for method in METHODS:  # each method alone: one result per benchmark for the ceiling
        out = tmp_path / method
        run = hpt("run", "--dataset", "gsm8k,mmlu_pro", "--strategies", method, "--model",
                  "local", "--limit", "2", "--max-tokens", "96", "--data-dir", str(data_dir),
                  "--out", str(out), "--no-progress", timeout=900)  # fmt: skip
        assert run.returncode == 0, run.stderr
        recs = records(out)
        assert len(recs) == 4 and all(r["error"] is None for r in recs)
        for r in recs:
            (attempt,) = r["attempts"]
            assert attempt["strategy"] == method and attempt["calls"]
            if method != "helm_baseline":  # DSPy's chat format, through hpt's backend
                assert "[[ ## " in json.dumps(attempt["calls"][0]["messages"])
        runs.append(out)

    # BFRS, tiny: 6 training problems (5 to bootstrap from, 1 to validate), one random
    # candidate; optimised once for the cell, its program saved, its calls counted apart.
    out = tmp_path / "bfrs"
    run = hpt("run", "--dataset", "gsm8k", "--strategies", "dspy_bfrs", "--model", "local",
              "--limit", "2", "--max-tokens", "96", "--data-dir", str(data_dir),
              "--strategy-arg", "dspy_bfrs.pool_limit=6",
              "--strategy-arg", "dspy_bfrs.num_candidate_programs=1",
              "--out", str(out), "--no-progress", timeout=1200)  # fmt: skip
    assert run.returncode == 0, run.stderr
    programs = sorted((out / "programs").glob("*.json"))
    saved = [p for p in programs if not p.name.endswith((".meta.json", "usage.json"))]
    assert len(saved) == 1
    assert any("predict" in name for name in json.loads(saved[0].read_text()))  # DSPy's JSON
    usage = json.loads((out / "programs" / "usage.json").read_text())
    assert "optimisation" in json.dumps(usage) and "evaluation" in json.dumps(usage)
    assert all(r["error"] is None for r in records(out))

    ceiling = hpt("ceiling", *map(str, runs), "--headline-methods", "dspy_predict,dspy_cot",
                  "--out", str(tmp_path / "ceiling"), "--no-plots")  # fmt: skip
    assert ceiling.returncode == 0, ceiling.stderr
    report = json.loads((tmp_path / "ceiling" / "ceiling.json").read_text())
    (model,) = report["models"]
    assert set(report["models"][model]["methods"]) == set(METHODS)
    assert report["models"][model]["ceiling_method"] in METHODS
