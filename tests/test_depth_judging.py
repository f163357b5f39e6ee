"""DepthQA judge replies (paper table 30): "Feedback: ... [RESULT] n", read defensively."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hpt.tasks.depthqa.judging import JudgeVerdict, parse_judgement

RUBRIC = """Score 1: The response is largely incorrect, inaccurate, and not factual.
Score 2: The response is partially correct but contains significant inaccuracies.
Score 3: The response is generally correct and factual but may include minor inaccuracies.
Score 4: The response is mostly correct, accurate, and factual.
Score 5: The response is consistently correct, accurate, and entirely factual."""


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("Feedback: Accurate. [RESULT] 4", 4),
        ("Feedback: Accurate. [RESULT]: 4", 4),
        ("Feedback: Accurate. [RESULT] (4)", 4),
        ("Feedback: Accurate. [RESULT] **4**", 4),
        ("Feedback: Accurate. **[RESULT]** 4", 4),
        ("Feedback: Accurate. **[RESULT] 4**", 4),
        ("Feedback: Accurate. [result] 4", 4),
        ("Feedback: Accurate. [Result]:(4)", 4),
        ("Feedback: Accurate. [RESULT ] 4", 4),  # the paper's own spelling in table 30
        ("Feedback: Accurate. [RESULT] Score: 4", 4),
        ("Feedback: Accurate. [RESULT] 4/5", 4),
        ("Feedback: Accurate.\n\n[RESULT]\n4", 4),
        ("Feedback: Accurate. [RESULT] 5.0", 5),
    ],
)  # fmt: skip
def test_label_variants(reply: str, score: int) -> None:
    verdict = parse_judgement(reply)
    assert verdict.score == score
    assert verdict.feedback.startswith("Accurate.")


def test_echoed_rubric_is_ignored() -> None:
    # The reference parser takes the first label it sees, here "Score 1", then "Score 5".
    reply = (
        f"Feedback: Judged against the rubric\n{RUBRIC}\nThe response is partly wrong. [RESULT] 2"
    )
    assert parse_judgement(reply).score == 2
    reply = f"{RUBRIC}\n[RESULT] 3"
    assert parse_judgement(reply).score == 3


def test_numbered_feedback_is_not_a_score() -> None:
    reply = "Feedback: 1. The definition is right. 2. The example is wrong. [RESULT] 3"
    verdict = parse_judgement(reply)
    assert verdict.score == 3
    assert verdict.feedback == "1. The definition is right. 2. The example is wrong."


def test_numbered_feedback_without_result_has_no_score() -> None:
    assert parse_judgement("Feedback: 1. The definition is right.").score is None


def test_last_result_wins() -> None:
    reply = "Feedback: At first sight [RESULT] 5, but the formula is wrong. [RESULT] 2"
    verdict = parse_judgement(reply)
    assert verdict.score == 2
    assert verdict.feedback == "At first sight [RESULT] 5, but the formula is wrong."


def test_echoed_format_after_the_score_does_not_count() -> None:
    # "[RESULT] (an integer ...)" has no number, so the real "[RESULT] 4" is the last one.
    reply = "Feedback: Good. [RESULT] 4\n(format: [RESULT] (an integer number between 1 and 5))"
    assert parse_judgement(reply).score == 4


@pytest.mark.parametrize(
    "reply",
    [
        "Feedback: Bad. [RESULT] 0",
        "Feedback: Great. [RESULT] 6",
        "Feedback: Great. [RESULT] 10",
        "Feedback: Bad. [RESULT] -1",
        "Feedback: Fine. [RESULT] 4.5",
        "Feedback: Fine. [RESULT] 3 earlier, then [RESULT] 7",  # last one is invalid: no fallback
    ],
)
def test_out_of_range_is_missing(reply: str) -> None:
    assert parse_judgement(reply).score is None


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "Feedback: The response is mostly correct. Score: 4",
        "Feedback: Good. [RESULT] (an integer number between 1 and 5)",
        "I would give it a 4.",
    ],
)
def test_no_result_is_missing(reply: str) -> None:
    assert parse_judgement(reply).score is None


def test_feedback_without_result_is_whole_reply() -> None:
    verdict = parse_judgement("  Feedback:  The response is mostly correct.  ")
    assert verdict == JudgeVerdict(score=None, feedback="The response is mostly correct.")


@pytest.mark.parametrize(
    "reply",
    [
        "Feedback: Correct. [RESULT] 5",
        "**Feedback:** Correct. [RESULT] 5",
        "**Feedback**: Correct. [RESULT] 5",
        "### Feedback: Correct. [RESULT] 5",
        "feedback:Correct.[RESULT] 5",
        "Correct. [RESULT] 5",
    ],
)
def test_feedback_label_removed(reply: str) -> None:
    assert parse_judgement(reply) == JudgeVerdict(score=5, feedback="Correct.")


def test_feedback_word_inside_text_kept() -> None:
    verdict = parse_judgement("The feedback: fine. [RESULT] 5")
    assert verdict.feedback == "The feedback: fine."


def test_verdict_range_is_validated() -> None:
    with pytest.raises(ValidationError):
        JudgeVerdict(score=0, feedback="")
    assert JudgeVerdict.model_validate_json('{"score": null, "feedback": "x"}').score is None
