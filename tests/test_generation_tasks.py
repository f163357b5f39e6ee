"""IWSLT en-fr and SAMSum: data, the score thresholds, and the dataset-level scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from hpt.results.textmetrics import corpus_bleu, rouge_l, sentence_bleu
from hpt.tasks import get_task
from hpt.tasks.base import Sample
from hpt.tasks.generation import GenerationTask
from hpt.tasks.iwslt import IWSLT, reads_as_english
from hpt.tasks.readers import clean_output
from hpt.tasks.samsum import COPY_RUN, SAMSum, drop_dialogue


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
    from hpt.results.reader import read_records
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
                       limit=5, data_dir=data_dir, out=tmp_path / "run",
                       threshold=[0.15])  # fmt: skip
        result = await run_evaluation(spec)
    records = list(read_records(tmp_path / "run"))
    assert all(r.resolved_level == 2 for r in records) and result.summary.hpi == 2.0
    assert result.summary.text_metric == "corpus BLEU"
    assert result.summary.text_score == pytest.approx(1.0)
    first = records[0].attempts[0]
    assert first.score is not None and first.score < 0.15 and not first.resolved
    second = records[0].attempts[1]
    assert second.completion == f'French: "{records[0].target}"'
    assert second.parsed == records[0].target


def test_threshold_is_only_for_scored_datasets(data_dir: Path) -> None:
    from tests.test_cli import assert_user_error, hpt

    result = hpt("run", "--dataset", "boolq", "--threshold", "0.3", "--data-dir", str(data_dir),
                 "--model", "openai:x", "--base-url", "http://127.0.0.1:9/v1")  # fmt: skip
    assert_user_error(result, "--threshold applies to datasets resolved by a score")
    result = hpt("run", "--dataset", "samsum", "--threshold", "2", "--data-dir", str(data_dir))
    assert_user_error(result, "threshold")


# -- reading the answer, not the reasoning -------------------------------------------------

# tst2017's first segment and SAMSum's first test dialogue.
SOURCE = "So, this is a story about how we know what we know."
FR = "C'est une histoire à propos de comment on sait ce qu'on sait."
DIALOGUE = (
    "Hannah: Hey, do you have Betty's number?\nAmanda: Lemme check\nHannah: <file_gif>\n"
    "Amanda: Sorry, can't find it.\nAmanda: Ask Larry\n"
    "Amanda: He called her last time we were at the park together\n"
    "Hannah: I don't know him well\nHannah: <file_gif>\nAmanda: Don't be shy, he's very nice\n"
    "Hannah: If you say so..\nHannah: I'd rather you texted him\nAmanda: Just text him 🙂\n"
    "Hannah: Urgh.. Alright\nHannah: Bye\nAmanda: Bye bye"
)
SUMMARY = "Hannah needs Betty's number but Amanda doesn't have it. She needs to contact Larry."
MINE = "Hannah needs Betty's number; Amanda can't find it and tells her to text Larry."
IWSLT_SAMPLE = Sample(id="iwslt-t", fields={"text": SOURCE}, target=FR)
SAMSUM_SAMPLE = Sample(id="samsum-t", fields={"dialogue": DIALOGUE}, target=SUMMARY)
COPIED = "Summary:\n" + "\n".join(DIALOGUE.split("\n")[:8])  # ROUGE-L 0.262 as it stands

# (dataset, completion, the text scored (None: nothing to score), what the detail says)
READINGS = [
    # zero-shot CoT: reasoning, then a labelled answer in guillemets
    ("iwslt", "Let's think step by step.\n\n1. \"So, this is a story\" → \"Alors, c'est une "
     "histoire\"\n2. \"about how we know what we know\" → \"sur la façon dont on sait ce qu'on "
     f"sait\"\n\nTranslation: « {FR} »", FR, "(answer after 'Translation:')"),
    # markdown bold label, a note after it
    ("iwslt", f"**French translation:** « {FR} »\n\n**Note:** \"story\" is translated as "
     "\"histoire\", keeping the informal tone.", FR, "(answer after 'French translation:')"),
    # several labels: the last wins
    ("iwslt", "Literal translation: Alors, ceci est une histoire sur comment nous savons ce que "
     f"nous savons.\nFinal translation: {FR}", FR, "(answer after 'Final translation:')"),
    # French quoted after English reasoning, no colon
    ("iwslt", "The speaker opens informally, and the word \"story\" in French is \"histoire\". "
     f"So the translation is « {FR} ».", FR, "(text quoted after 'the translation is')"),
    ("iwslt", f'To keep the register, "we" becomes "on". In French, this would be "{FR}"',
     FR, "(text quoted after 'In French, this would be')"),
    # least-to-most's last step: a lead-in, the answer, a remark
    ("iwslt", "Incorporating the translations of the key phrases, here is the full translation:"
     f"\n\n\"{FR}\"\n\nThis translation uses \"histoire\" for \"story\" and \"on\" for \"we\".",
     FR, "(answer after 'here is the full translation:')"),
    # numbered reasoning, the answer as the last line, no label
    ("iwslt", "Let's think step by step.\nFirst, \"So\" is a filler word.\nThen \"story\" "
     f"becomes \"histoire\".\n{FR}", FR, "(final paragraph)"),
    # the translation, then English commentary: French wins
    ("iwslt", f"« {FR} »\n\nIt keeps the informal register of the talk.", FR,
     "(final paragraph; passed over 1 later candidate(s) in English)"),
    # the three-shot exemplars' own format, and a French label
    ("iwslt", f'French: "{FR}".', FR, "(answer after 'French:')"),
    ("iwslt", f"Traduction : « {FR} »", FR, "(answer after 'Traduction:')"),
    ("iwslt", f"Sure! Here's the translation: {FR}", FR, "(answer after 'Here's the translation:')"),
    # a plain answer stays as it is
    ("iwslt", FR, FR, "sentence BLEU 1.000 >= 0.15"),
    # the source echoed before the translation
    ("iwslt", f'"{SOURCE}" → « {FR} »', FR, "(dropped a copy of the English source)"),
    # empty answers
    ("iwslt", "", None, "empty output"),
    ("iwslt", "**Translation:**", None, "empty output"),
    # a "translation" that repeats the source
    ("iwslt", SOURCE, None, "only repeats the English source"),
    ("iwslt", f'Translation: "{SOURCE}"', None,
     "only repeats the English source (answer after 'Translation:')"),
    # SAMSum
    ("samsum", f"Summary: {MINE}", MINE, "(answer after 'Summary:')"),
    ("samsum", "Let's think step by step.\n\n1. Hannah asks Amanda for Betty's number.\n"
     f"2. Amanda can't find it and suggests Larry.\n\n**Final summary:** {MINE}", MINE,
     "(answer after 'Final summary:')"),
    ("samsum", f"**Draft summary:** Hannah asks for a number.\n\n**Refined summary:** {MINE}",
     MINE, "(answer after 'Refined summary:')"),
    ("samsum", f"Here's a refined version of the draft summary:\n\n{MINE}\n\nThis version is "
     "more concise and keeps the key points.", MINE,
     "(answer after 'Here's a refined version of the draft summary:')"),
    ("samsum", "Step 1: Identify the participants: Hannah and Amanda.\nStep 2: Hannah asks for "
     f"Betty's number.\nStep 3: Amanda suggests Larry.\n{MINE}", MINE, "(final paragraph)"),
    ("samsum", f"## Summary\n{MINE}\n\nI hope this helps!", MINE, "(answer after 'Summary:')"),
    ("samsum", f"Sure! Summary of the conversation:\n{MINE}", MINE,
     "(answer after 'Summary of the conversation:')"),
    ("iwslt", f"Voici la traduction : « {FR} »", FR, "(answer after 'Voici la traduction:')"),
    ("samsum", f'In short, "{MINE}"', MINE, "(text quoted after 'In short')"),
    # two paragraphs and no reasoning: all of it is the summary
    ("samsum", "Hannah needs Betty's number.\n\nAmanda doesn't have it and suggests Larry.",
     "Hannah needs Betty's number.\n\nAmanda doesn't have it and suggests Larry.",
     "ROUGE-L F"),
    # copies of the dialogue: as lines, with or without a label, or as prose
    ("samsum", COPIED, None, "only repeats the dialogue (answer after 'Summary:')"),
    ("samsum", DIALOGUE, None, "only repeats the dialogue"),
    ("samsum", "Hannah: Hey, do you have Betty's number? Amanda: Lemme check. Amanda: Sorry, "
     "can't find it. Amanda: Ask Larry. Amanda: He called her last time we were at the park.",
     None, "only repeats the dialogue"),
    ("samsum", "Hey, do you have Betty's number?\nLemme check\nSorry, can't find it.\n"
     "Ask Larry\nHe called her last time we were at the park together", None,
     "only repeats the dialogue"),
    # a summary with one copied line keeps the rest
    ("samsum", f"{MINE}\n- Amanda: **Ask Larry**", MINE,
     "(dropped 3 words copied from the dialogue)"),
    ("samsum", "   ", None, "empty output"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("dataset", "completion", "expected", "detail"),
    READINGS,
    ids=[f"{row[0]}-{i}" for i, row in enumerate(READINGS)],
)
def test_reads_the_answer(dataset: str, completion: str, expected: str | None, detail: str) -> None:
    task = get_task(dataset)
    sample = IWSLT_SAMPLE if dataset == "iwslt" else SAMSUM_SAMPLE
    check = task.check(sample, completion)
    assert check.parsed == expected
    assert task.parse(completion, sample) == expected
    assert detail in (check.detail or ""), check.detail
    if expected is None:
        assert not check.resolved and check.score == 0.0
    else:
        assert check.score == pytest.approx(task.score(expected, sample.target))  # type: ignore[attr-defined]


def test_detail_names_metric_value_threshold_and_rule() -> None:
    check = get_task("iwslt").check(IWSLT_SAMPLE, f"Let's see.\n\nTranslation: « {FR} »")
    assert check.resolved and check.parsed == FR
    assert check.detail == "sentence BLEU 1.000 >= 0.15 (answer after 'Translation:')"
    check = get_task("samsum").check(SAMSUM_SAMPLE, "Summary: Larry.")
    assert not check.resolved
    assert check.detail == f"ROUGE-L F {check.score:.3f} < 0.2 (answer after 'Summary:')"


def test_reasoning_no_longer_costs_bleu(data_dir: Path) -> None:
    """A correct translation scores the same with a chain of thought before it."""
    task = get_task("iwslt", data_dir)
    sample = task.load_samples()[0]
    assert sample.fields["text"] == SOURCE and sample.target == FR
    mine = "C'est une histoire à propos de comment nous savons ce que nous savons."
    cot = (
        "Let's think step by step.\n\n"
        '1. "So, this is a story" is an informal opening: "Alors, c\'est une histoire".\n'
        '2. "about how we know what we know" becomes "sur la façon dont on sait ce qu\'on '
        'sait".\n\n'
        f"Translation: « {mine} »"
    )
    bare = sentence_bleu(mine, sample.target)
    assert bare == pytest.approx(0.460, abs=1e-3)
    # Scored whole, the reasoning sank it below the threshold.
    assert sentence_bleu(clean_output(cot), sample.target) < 0.15
    check = task.check(sample, cot)
    assert check.parsed == mine and check.score == pytest.approx(bare) and check.resolved
    assert task.check(sample, mine).score == pytest.approx(bare)


def test_a_copied_dialogue_does_not_resolve(data_dir: Path) -> None:
    task = get_task("samsum", data_dir)
    assert isinstance(task, SAMSum)
    sample = task.load_samples()[0]
    assert sample.fields["dialogue"] == DIALOGUE and sample.target == SUMMARY
    # Scored whole, copying the dialogue's first eight lines passed the 0.20 threshold.
    assert rouge_l(clean_output(COPIED), sample.target) == pytest.approx(0.262, abs=1e-3)
    task.threshold = 0.20
    check = task.check(sample, COPIED)
    assert not check.resolved and check.parsed is None and check.score == 0.0
    assert check.detail is not None and check.detail.startswith("only repeats the dialogue")


def test_copy_run_length() -> None:
    """Runs of COPY_RUN words copied from the dialogue go; shorter ones stay."""
    dialogue = "Tom: " + " ".join(f"w{i}" for i in range(40))
    for n in (COPY_RUN - 1, COPY_RUN):
        copied = " ".join(f"w{i}" for i in range(3, 3 + n))
        text, gone = drop_dialogue(f"Tom says {copied} today.", dialogue)
        if n < COPY_RUN:
            assert gone == 0 and text == f"Tom says {copied} today."
        else:
            assert gone == COPY_RUN and text == "Tom says today."


def test_references_are_read_as_themselves(data_dir: Path) -> None:
    """Every reference, given as a completion, is scored whole: no extraction rule or copy
    rule takes a word from an honest answer (SAMSum: test and validation summaries)."""
    iwslt = get_task("iwslt", data_dir)
    samsum = get_task("samsum", data_dir)
    assert isinstance(iwslt, IWSLT) and isinstance(samsum, SAMSum)
    pairs: list[tuple[GenerationTask, Sample]] = [(iwslt, s) for s in iwslt.load_samples()]
    pairs += [(samsum, s) for s in samsum.load_samples() + samsum._load("validation", "val.csv")]
    assert len(pairs) == 1455 + 819 + 818
    changed = [s.id for task, s in pairs if task.parse(s.target, s) != clean_output(s.target)]
    assert changed == []


def test_language_cue() -> None:
    assert not reads_as_english(FR)
    assert reads_as_english(SOURCE)
    assert reads_as_english("This translation keeps the informal tone of the talk.")
    assert not reads_as_english("Merci.")  # no cue either way


def test_paper_thresholds() -> None:
    assert GenerationTask.paper_thresholds == (0.15, 0.20)
    assert IWSLT.paper_thresholds == SAMSum.paper_thresholds == (0.15, 0.20)
    assert (IWSLT.default_threshold, SAMSum.default_threshold) == (0.15, 0.20)
    assert get_task("samsum").threshold == 0.20  # type: ignore[attr-defined]
