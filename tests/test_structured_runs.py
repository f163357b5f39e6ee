"""The structured-prompting benchmarks in real runs: HELM's fixed prompt end to end through
`hpt run` against a scripted server, the training slices said in run.json and the report."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hpt.tasks import Sample, task_class
from tests.servers.openai_compat import FakeOpenAI, ServerThread
from tests.test_cli import hpt

LIMIT = 6


def chosen(dataset: str, data_dir: Path) -> list[Sample]:
    task = task_class(dataset)(data_dir)
    return task.choose(task.load_samples(), LIMIT, 0)


def test_helm_baseline_runs_and_says_where_training_data_came_from(
    fake_openai: tuple[FakeOpenAI, ServerThread], data_dir: Path, tmp_path: Path
) -> None:
    fake, server = fake_openai
    samples = {s.fields["question"]: s for d in ("mmlu_pro", "gpqa") for s in chosen(d, data_dir)}

    def answer(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        # HELM's prompt: "What is the correct answer to this question: Q\nChoices:\n..."
        question = re.match(r"What is the correct answer to this question: (.*?)\nChoices:",
                            prompt, re.DOTALL)  # fmt: skip
        assert question, prompt
        sample = samples[question[1]]
        # Wrong on MMLU-Pro's first sample, right everywhere else.
        wrong = sample.id == min(s.id for s in samples.values() if s.id.startswith("mmlu"))
        letter = "A" if wrong and sample.target != "A" else ("B" if wrong else sample.target)
        return f"The correct answer is ({letter})."

    fake.responder = answer
    out = tmp_path / "run"
    result = hpt("run", "--dataset", "mmlu_pro,gpqa", "--strategies", "helm_baseline",
                 "--model", "openai:test-model", "--base-url", server.base_url,
                 "--data-dir", str(data_dir), "--limit", str(LIMIT), "--out", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = {c["dataset"]: c for c in json.loads((out / "summary.json").read_text())["cells"]}
    assert summary["gpqa"]["accuracy"] == 1.0
    assert summary["mmlu_pro"]["accuracy"] == (LIMIT - 1) / LIMIT

    tasks = json.loads((out / "run.json").read_text())["tasks"]
    assert "70 test questions" in " ".join(tasks["mmlu_pro"]["notes"])
    assert tasks["gpqa"]["notes"] and "excluded from evaluation" in tasks["gpqa"]["notes"][0]
    report = hpt("report", str(out), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Notes on the data" in text and "MMLU-Pro: " in text
