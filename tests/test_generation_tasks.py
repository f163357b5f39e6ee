"""IWSLT en-fr and SAMSum: data, the score thresholds, and the dataset-level scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from hpt.tasks import get_task
from hpt.tasks.generation import clean_output
from hpt.tasks.textmetrics import corpus_bleu, rouge_l, sentence_bleu


def test_data(data_dir: Path) -> None:
    iwslt, samsum = get_task("iwslt", data_dir), get_task("samsum", data_dir)
    samples = iwslt.load_samples()
    assert len(samples) == 1455 and len({s.id for s in samples}) == 1455
    first = samples[0]
    assert first.fields["text"] == "So, this is a story about how we know what we know."
    assert first.target == "C'est une histoire à propos de comment on sait ce qu'on sait."
    assert all(s.id.startswith("iwslt-tst2016-") for s in iwslt.load_exemplar_pool())
    dialogues = samsum.load_samples()
    assert len(dialogues) == 819 and "\r" not in str(dialogues[0].fields["dialogue"])
    assert len(samsum.load_exemplar_pool()) == 3


def test_scores_match_the_libraries_run_directly() -> None:
    hyp, ref = "Le chat est assis sur le tapis.", "Le chat est sur le tapis."
    assert sentence_bleu(hyp, ref) == pytest.approx(sacrebleu.sentence_bleu(hyp, [ref]).score / 100)
    # Smoothed: a short, partly right output scores above 0.
    assert 0 < sentence_bleu("Le chat", ref) < 0.15
    direct = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(ref, hyp)["rougeL"]
    assert rouge_l(hyp, ref) == pytest.approx(direct.fmeasure)
    hyps, refs = [hyp, "Bonjour."], [ref, "Bonjour à tous."]
    assert corpus_bleu(hyps, refs) == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score / 100)


@pytest.mark.parametrize("dataset", ["iwslt", "samsum"])
def test_threshold_edges(dataset: str, data_dir: Path) -> None:
    task = get_task(dataset, data_dir)
    sample = task.load_samples()[0]
    words = sample.target.split()
    output = " ".join(words[: max(2, len(words) // 2)])
    value = task.score(output, sample.target)  # type: ignore[attr-defined]
    assert 0 < value < 1
    task.threshold = value  # type: ignore[attr-defined]
    at = task.check(sample, output)
    assert at.resolved and at.score == pytest.approx(value) and ">=" in (at.detail or "")
    task.threshold = value + 1e-6  # type: ignore[attr-defined]
    assert not task.check(sample, output).resolved
    assert not task.check(sample, "   ").resolved  # nothing to score


def test_clean_output() -> None:
    assert clean_output('Summary: "Hannah needs a number."') == "Hannah needs a number."
    assert clean_output("**French:** « Bonjour »") == "Bonjour"
    assert clean_output("  Plain text.  ") == "Plain text."


async def test_ladder_reports_corpus_bleu(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpt.orchestrator import RunSpec, run_evaluation
    from hpt.orchestrator.store import read_records
    from tests.backend_helpers import serving
    from tests.servers.answer_key import strategy_of
    from tests.servers.openai_compat import FakeOpenAI

    task = get_task("iwslt", data_dir)
    refs = {str(s.fields["text"]): s.target for s in task.load_samples()}

    def responder(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        source = max((t for t in refs if f'"{t}"' in prompt), key=len)
        if strategy_of(body) == "role":
            return "Je ne sais pas."
        return f'French: "{refs[source]}"'

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with serving(FakeOpenAI(responder).app()) as srv:
        spec = RunSpec(dataset="iwslt", model="openai:test-model", base_url=srv.base_url,
                       limit=5, data_dir=data_dir, out=tmp_path / "run")  # fmt: skip
        result = await run_evaluation(spec)
    records = list(read_records(tmp_path / "run"))
    assert all(r.resolved_level == 2 for r in records) and result.summary.hpi == 2.0
    assert result.summary.text_metric == "corpus BLEU"
    assert result.summary.text_score == pytest.approx(1.0)
    first = records[0].attempts[0]
    assert first.score is not None and first.score < 0.15 and not first.resolved


def test_threshold_is_only_for_scored_datasets(data_dir: Path) -> None:
    from tests.test_cli import assert_user_error, hpt

    result = hpt("run", "--dataset", "boolq", "--threshold", "0.3", "--data-dir", str(data_dir),
                 "--model", "openai:x", "--base-url", "http://127.0.0.1:9/v1")  # fmt: skip
    assert_user_error(result, "--threshold applies to datasets resolved by a score")
    result = hpt("run", "--dataset", "samsum", "--threshold", "2", "--data-dir", str(data_dir))
    assert_user_error(result, "threshold")
