import pytest

from hpt.tasks.parsing import (
    normalize_number,
    parse_bool,
    parse_choice,
    parse_number,
    parse_number_strict,
    strip_echo,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("True", "True"),
        ("false.", "False"),
        ("**False**", "False"),
        ('"True"', "True"),
        ("Yes, the passage says so.", "True"),
        ("No, it is not.", "False"),
        ("The answer is yes", "True"),
        ("Answer: **False**", "False"),
        ("It seems true at first, but the answer is False.", "False"),
        ("The statement is false", "False"),
        ("This is true because the passage says so.", "True"),
        # unparseable or contradictory: never a default
        ("", None),
        ("I cannot tell from the passage.", None),
        ("It is true that x, but false that y.", None),
        ("No doubt about it.", None),
        ("Not enough information.", None),
    ],
)
def test_parse_bool(text: str, expected: str | None) -> None:
    assert parse_bool(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#### 42", "42"),
        ("Janet makes 9 * 2 = 18 dollars.\n#### 18", "18"),
        ("The total is $1,200.00", "1200"),
        ("the answer is 18", "18"),
        ("The answer is $1,234.", "1234"),
        ("5 + 5 = 10, then 10 * 3 = 30. The answer is 30 apples, leaving 12 for later.", "30"),
        ("First 3 + 4 = 7; so 7 * 2 = 14", "14"),
        ("The answer is 0.50", "0.5"),
        ("\\boxed{72} after checking 70 and 71", "72"),
        ("Answer: -3", "-3"),
        ("Final answer: 2.5 hours", "2.5"),
        ("1, 2, 3", "3"),
        ("no numbers here", None),
        ("", None),
    ],
)
def test_parse_number(text: str, expected: str | None) -> None:
    assert parse_number(text) == expected


def test_normalize_number() -> None:
    assert normalize_number("1,000") == "1000"
    assert normalize_number("$7.00") == "7"
    assert normalize_number("abc") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(B)", "B"),
        ("**B**", "B"),
        ("B. populated areas", "B"),
        ("B) populated areas", "B"),
        ("Answer: B", "B"),
        ("the answer is B) populated areas", "B"),
        ("The correct answer is (C).", "C"),
        ("The answer is D because an atlas has maps.", "D"),
        ("Option E is correct.", "E"),
        ("I think the answer is **A**.", "A"),
        ("Answer: A", "A"),
        ("E", "E"),
        # the article "A" is not option A
        ("A revolving door is a security measure.", None),
        ("A bank would use one, as would a mall.", None),
        ('Answer: "A revolving door is convenient"', None),
        ("The answer is a bank.", None),
        # ambiguous or missing: unresolved, never option A
        ("It could be (A) or (B).", None),
        ("", None),
        ("None of these make sense to me.", None),
    ],
)
def test_parse_choice_five(text: str, expected: str | None) -> None:
    assert parse_choice(text, "ABCDE") == expected


def test_parse_choice_respects_label_range() -> None:
    assert parse_choice("Answer: E", "ABCD") is None
    assert parse_choice("Answer: D", "ABCD") == "D"


def test_parse_number_strict_reads_stated_answers_only() -> None:
    assert parse_number_strict("So she has 18 apples left.") is None
    assert parse_number_strict("The answer is 18.") == "18"
    assert parse_number_strict(" **18** ") == "18"
    assert parse_number("So she has 18 apples left.") == "18"


def test_strip_echo_needs_six_copied_words() -> None:
    question = "John has to answer 30 questions on a test."
    # five consecutive words of the question stay; six go, whatever the case and punctuation
    assert (
        strip_echo("John has to answer 30, then 12.", [question])
        == "John has to answer 30, then 12."
    )
    assert strip_echo("JOHN has to answer, 30 questions! So 18.", [question]) == " (echo) ! So 18."
    assert strip_echo("John has to answer 30 questions.", []) == "John has to answer 30 questions."


def test_parse_choice_sees_conflicts_only_with_options() -> None:
    options = [("A", "shelter"), ("B", "floor"), ("C", "warm place"), ("D", "farmhouse"),
               ("E", "living room")]  # fmt: skip
    assert parse_choice('The answer is D. "living room."', "ABCDE") == "D"
    assert parse_choice('The answer is D. "living room."', "ABCDE", options) is None
    assert parse_choice('The answer is D. "farmhouse."', "ABCDE", options) == "D"
