import pytest

from hpt.tasks.parsing import normalize_number, parse_bool, parse_choice, parse_number


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
