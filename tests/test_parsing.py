import pytest

from hpt.tasks.cutoff import whole_part
from hpt.tasks.readers import (
    asks_for_total,
    normalize_number,
    parse_bool,
    parse_choice,
    parse_number,
    parse_number_strict,
    read_choice,
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


@pytest.mark.parametrize(
    ("text", "whole", "kind"),
    [
        # Read up to the last whole line or sentence; a cut-off number is not read.
        ("She makes 18 dollars.\n#### 1", "She makes 18 dollars.\n", "cut off"),
        ("The answer is 18. Because", "The answer is 18.", "cut off"),
        ("The answer is 2.5", "", "cut off"),  # "2.5" may have gone on: "2.55"
        ("The answer is 18.", "", "cut off"),  # no white space after: "18.5" may follow
        ("Answer: B\n", "Answer: B\n", "cut off"),
        ('He said "yes." Then', 'He said "yes."', "cut off"),
        # A loop: one line or sentence three times in a row, or a longer block twice.
        ("So 18.\n#### 7\n#### 7\n#### 7\n####", "", "repeating loop"),
        ("She has 7 apples. She has 7 apples. She has 7 apples. She", "", "repeating loop"),
        ("#### 7\nThe answer is 7.\n#### 7\nThe answer is 7.\n#### 7", "", "repeating loop"),
        # Not a loop: a line twice, alike lines, lines without a letter or digit.
        ("So 18.\n#### 18\n#### 18\nThe", "So 18.\n#### 18\n#### 18\n", "cut off"),
        (
            "Day 1: 7 hours.\nDay 2: 7 hours.\nDay 3: 7 hours.\nDay 4: 7 hours.\nDay",
            "Day 1: 7 hours.\nDay 2: 7 hours.\nDay 3: 7 hours.\nDay 4: 7 hours.\n",
            "cut off",
        ),
        (
            "1. 7 eggs.\n2. 7 eggs.\n3. 7 eggs.\n4.",
            "1. 7 eggs.\n2. 7 eggs.\n3. 7 eggs.\n",
            "cut off",
        ),
        ("x = 18\n}\n}\n}\nprint", "x = 18\n}\n}\n}\n", "cut off"),
    ],
)
def test_whole_part_of_a_reply_cut_off(text: str, whole: str, kind: str) -> None:
    part = whole_part(text)
    assert part.text == whole
    assert part.note.startswith(kind + ": ")


def test_a_loop_note_names_the_block() -> None:
    note = whole_part("#### 7\n" * 40).note
    assert note == 'repeating loop: cut off at the length limit repeating "#### 7" 40 times'


@pytest.mark.parametrize(
    ("text", "totals", "expected"),
    [
        # List numbering, step labels, asides, ratios and "divided by" operands are not results.
        ("1. 9 * 2 = 18 dollars.\n2. That is all.\n3. Therefore, she is happy.", False, "18"),
        ("Step 1: 9 * 2 = 18\nStep 2", False, "18"),
        ("She makes 18 dollars (her sister makes 4).", False, "18"),
        ("She sells 9 eggs at $2 (which is $18 a day).", False, "18"),  # a restatement
        ("She sells 9 eggs at $2 (i.e. 18 dollars).", False, "18"),
        ("She makes (16 - 3 - 4) * 2", False, None),  # bracketed arithmetic is no aside
        ("She makes 2 * (16 - 3 - 4)", False, None),
        ("It ends at 7:30", False, None),
        ("24 divided by 4", False, None),
        ("24 divided by 4 is 6", False, "6"),
        ("Her savings grew by 4", False, "4"),
        ("Its price went up 3 times", False, "3"),
        # A total stated, when the question asks for one, over a clause that only comments.
        ("The total is 30, which means she lost 6 hours.", True, "30"),
        ("The total is 30 hours, meaning she lost 6 hours.", True, "30"),
        ("The total is 30, which means she lost 6 hours.", False, "6"),
        ("The total is 30, so she lost 6 hours.", True, "6"),  # "so": a result follows
        ("The total is 30 hours, which means she has 30 + 18 = 48 hours.", True, "48"),
        ("The total is 30 hours, which gives her 36 with Sunday.", True, "36"),
        ("The total is $16 a day, which means she makes $112 a week.", True, "112"),  # a rate
        ("The total is 5 each, which means 4 boxes hold 20.", True, "20"),
        ("The total is 30. She lost 6 hours.", True, "6"),  # another sentence
    ],
)
def test_number_fallback_reads_results(text: str, totals: bool, expected: str | None) -> None:
    assert parse_number(text, totals=totals) == expected
    assert parse_number_strict(text, totals=totals) is None


def test_asks_for_total() -> None:
    assert asks_for_total("How many hours did she sleep in total throughout the week?")
    assert asks_for_total("How many apples do they have altogether?")
    assert not asks_for_total("How much does she make every day?")
    # Only the sentence that asks counts (one ending "?", else the last).
    assert not asks_for_total("Her 3 items cost $20 in total. How much change is left from $100?")
    assert asks_for_total("Apples cost $3.50 each. Find the total cost of 4 apples.")
    assert asks_for_total("Apples cost $3.50 each. How much do 4 apples cost altogether?")


def test_read_choice_says_why_it_read_nothing() -> None:
    options = [("A", "carrot"), ("B", "potato"), ("C", "cucumber"), ("D", "onion")]
    assert read_choice('D. "cucumber"', "ABCD", options) == (
        None, "conflict: D is written with option C's text \"cucumber\""
    )  # fmt: skip
    assert read_choice("A. carrot\nB. potato", "ABCD", options).why == (
        "options listed: the reply lists the options and chooses none"
    )
    assert read_choice("I am not sure.", "ABCD", options) == (None, None)
    assert read_choice('C. "cucumber"', "ABCD", options) == ("C", None)


def test_an_option_text_reply_needs_one_owner_and_not_a_label() -> None:
    options = [("A", "C"), ("B", "C++"), ("C", "Java"), ("D", "Java")]
    assert parse_choice("C++", "ABCD", options) == "B"
    assert parse_choice("C", "ABCD", options) == "C"  # the bare label, not A's text "C"
    assert parse_choice("Java", "ABCD", options) is None  # two options have that text
