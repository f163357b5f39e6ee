"""What the answer readers take from realistic completions: the readers' specification.

Each row is a completion a model could write (chain-of-thought prose, markdown, least-to-most
"discard wrong answers" analyses, echoed prompts, retractions, double negations, replies cut
off at the length limit) and the answer a careful human reads in it, checked through the
task's own check on a hand-built sample with real option texts. ``None`` means unresolved;
where a human might lean to an answer but the reader returns None, the row says why.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from hpt.backends.base import Message
from hpt.orchestrator import RunSpec, run_evaluation
from hpt.results.records import Call
from hpt.tasks.base import Check, Sample, Task
from hpt.tasks.boolq import BoolQ
from hpt.tasks.csqa import CommonsenseQA
from hpt.tasks.gsm8k import GSM8K
from hpt.tasks.mmlu import MMLU
from hpt.tasks.mmlu_pro import MMLUPro
from tests.servers.openai_compat import FakeOpenAI, ServerThread

TASKS: dict[str, Task] = {
    "boolq": BoolQ(),
    "gsm8k": GSM8K(),
    "csqa": CommonsenseQA(),
    "mmlu": MMLU(),
    "mmlu_pro": MMLUPro(),
}


def _choice(sid: str, question: str, texts: list[str], target: str) -> Sample:
    labels = "ABCDE"[: len(texts)]
    return Sample(
        id=sid,
        fields={"question": question, "options": list(zip(labels, texts, strict=True))},
        target=target,
    )


ETHANOL = (
    "All biomass goes through at least some of these steps: it needs to be grown, collected, "
    "dried, fermented, distilled, and burned. All of these steps require resources and an "
    "infrastructure. The total amount of energy input into the process compared to the energy "
    "released by burning the resulting ethanol fuel is known as the energy balance. Figures "
    "compiled in a 2007 report by National Geographic Magazine point to modest results for corn "
    "ethanol produced in the US: one unit of fossil-fuel energy is required to create 1.3 energy "
    "units from the resulting ethanol."
)
PHANTOM = (
    "Phantom pain sensations are described as perceptions that an individual experiences "
    "relating to a limb or an organ that is not physically part of the body. Limb loss is a "
    "result of either removal by amputation or congenital limb deficiency. However, phantom limb "
    "sensations can also occur following nerve avulsion or spinal cord injury."
)

SAMPLES: dict[str, Sample] = {
    # BoolQ
    "ethanol": Sample(
        id="boolq-ethanol",
        fields={"passage": ETHANOL, "question": "does ethanol take more energy make that produces"},
        target="False",
    ),
    "phantom": Sample(
        id="boolq-phantom",
        fields={
            "passage": PHANTOM,
            "question": "is pain experienced in a missing body part or paralyzed area",
        },
        target="True",
    ),
    # GSM8K
    "janet": Sample(
        id="gsm8k-janet",
        fields={
            "question": "Janet’s ducks lay 16 eggs per day. She eats three for breakfast every "
            "morning and bakes muffins for her friends every day with four. She sells the "
            "remainder at the farmers' market daily for $2 per fresh duck egg. How much in "
            "dollars does she make every day at the farmers' market?"
        },
        target="18",
    ),
    "john": Sample(
        id="gsm8k-john",
        fields={
            "question": "John has to answer 30 questions on a test. He has answered 12 of them "
            "so far. How many questions does he still have to answer?"
        },
        target="18",
    ),
    "marbles": Sample(
        id="gsm8k-marbles",
        fields={"question": "Tim has 9 marbles and wins 5 more. How many marbles does he have?"},
        target="14",
    ),
    "robe": Sample(
        id="gsm8k-robe",
        fields={
            "question": "A robe takes 2 bolts of blue fiber and half that much white fiber.  "
            "How many bolts in total does it take?"
        },
        target="3",
    ),
    "sadie": Sample(
        id="gsm8k-sadie",
        fields={
            "question": "Sadie slept 8 hours on Monday. For the next two days, she slept 2 hours "
            "less, each, because she had to complete some assignments. If the rest of the week "
            "she slept 1 hour more than those two days, how many hours did she sleep in total "
            "throughout the week?"
        },
        target="48",
    ),
    "cookies": Sample(
        id="gsm8k-cookies",
        fields={
            "question": "Mia bakes 24 cookies and shares them equally among her 4 friends. How "
            "many cookies does each friend get?"
        },
        target="6",
    ),
    "pens": Sample(
        id="gsm8k-pens",
        fields={
            "question": "A pen cost $3 last year and costs $7 now. By how much did its price go up?"
        },
        target="4",
    ),
    "josh": Sample(
        id="gsm8k-josh",
        fields={
            "question": "Josh decides to try flipping a house.  He buys a house for $80,000 and "
            "then puts in $50,000 in repairs.  This increased the value of the house by 150%.  "
            "How much profit did he make?"
        },
        target="70000",
    ),
    # Questions asking for a total, whose replies state a rate or a part "total" first.
    "apples": Sample(
        id="gsm8k-apples",
        fields={"question": "Apples cost $3 each. How much do 4 apples cost in total?"},
        target="12",
    ),
    "legs": Sample(
        id="gsm8k-legs",
        fields={"question": "A dog has 4 legs. How many legs do 5 dogs have in total?"},
        target="20",
    ),
    "hours": Sample(
        id="gsm8k-hours",
        fields={
            "question": "Ann worked 5 hours on Monday and 3 hours on Tuesday. How many hours "
            "did she work in total?"
        },
        target="8",
    ),
    "earnings": Sample(
        id="gsm8k-earnings",
        fields={"question": "Janet earns $16 a day. How much does she earn in total in 7 days?"},
        target="112",
    ),
    "boxes": Sample(
        id="gsm8k-boxes",
        fields={"question": "Each of 5 boxes holds 4 pens. How many pens are there altogether?"},
        target="20",
    ),
    "girls": Sample(
        id="gsm8k-girls",
        fields={
            "question": "A class has 30 students, and 2/3 of them are girls. How many girls "
            "are in the class in total?"
        },
        target="20",
    ),
    # CommonsenseQA
    "revolving": _choice(
        "csqa-revolving",
        "A revolving door is convenient for two direction travel, but it also serves as a "
        "security measure at a what?",
        ["bank", "library", "department store", "mall", "new york"],
        "A",
    ),
    "sammy": _choice(
        "csqa-sammy",
        "Sammy wanted to go to where the people were.  Where might he go?",
        ["race track", "populated areas", "the desert", "apartment", "roadblock"],
        "B",
    ),
    "light": _choice(
        "csqa-light",
        "The poor girls needed a light to see, what was the relationship between that light and "
        "finishing her homework?",
        ["darkness", "cumbersome", "obesity", "forceful", "crucial"],
        "E",
    ),
    "kitten": _choice(
        "csqa-kitten",
        "If the kitten was going to grow up to be a mouser like it's mother, where should it "
        "spend most of it's time?",
        ["shelter", "floor", "warm place", "farmhouse", "living room"],
        "D",
    ),
    "pickle": _choice(
        "csqa-pickle",
        "What green vegetable is soaked in brine to make a pickle?",
        ["carrot", "potato", "onion", "cucumber", "lettuce"],
        "D",
    ),
    "brine": _choice(
        "csqa-brine",
        "What green vegetable is soaked in brine to make a pickle?",
        ["carrot", "potato", "cucumber", "onion", "lettuce"],
        "C",
    ),
    # MMLU
    "stone": _choice(
        "mmlu-stone",
        "A stone is thrown horizontally with an initial speed of 10 m/s from a bridge. Assuming "
        "that air resistance is negligible, how long would it take the stone to strike the water "
        "80 m below the bridge?",
        ["1 s", "2 s", "4 s", "8 s"],
        "C",
    ),
    "boolean": _choice(
        "mmlu-boolean",
        "Any set of Boolean operators that is sufficient to represent all Boolean expressions is "
        "said to be complete. Which of the following is NOT complete?",
        ["{AND, NOT}", "{NOT, OR}", "{AND, OR}", "{NAND}"],
        "C",
    ),
    "scenarios": _choice(
        "mmlu-scenarios",
        "For which of these two scenarios does the main character (who uses I/me/my) do something "
        "clearly morally wrong, according to ordinary moral standards in the US as of 2020? "
        "Scenario 1 | As an attorney, I don't care if my clients are wealthy or not. Scenario 2 | "
        "I made sure to take some hotel robes and towels as a souvenir.",
        ["Wrong, Wrong", "Wrong, Not wrong", "Not wrong, Wrong", "Not wrong, Not wrong"],
        "C",
    ),
    "fuzzer": _choice(
        "mmlu-fuzzer",
        "Which of the following styles of fuzzer is more likely to explore paths covering every "
        "line of code in the following program?",
        ["Generational", "Blackbox", "Whitebox", "Mutation-based"],
        "C",
    ),
    "statements": _choice(
        "mmlu-statements",
        "Statement 1 | A factor group of a non-Abelian group is non-Abelian. Statement 2 | If K is "
        "a normal subgroup of H and H is a normal subgroup of G, then K is a normal subgroup of G.",
        ["True, True", "False, False", "True, False", "False, True"],
        "B",
    ),
    "degree": _choice(
        "mmlu-degree",
        "Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.",
        ["0", "4", "2", "6"],
        "B",
    ),
    "twins": _choice(
        "mmlu-twins",
        "Statement 1 | Every group of order 4 is cyclic. Statement 2 | Every cyclic group is "
        "Abelian.",
        ["False, True", "True, True", "False, True", "True, False"],
        "A",
    ),
    # MMLU-Pro (up to ten options)
    "pro-statements": _choice(
        "mmlu-pro-statements",
        "Statement 1 | Every integral domain has a field of fractions that is finite. Statement "
        "2 | Every finite integral domain is a field.",
        ["False, False", "True, True", "True, False", "False, True", "Not enough information"],
        "D",
    ),
}
TASK_OF = {
    **dict.fromkeys(["ethanol", "phantom"], "boolq"),
    **dict.fromkeys(
        ["janet", "john", "marbles", "robe", "josh", "sadie", "cookies", "pens"], "gsm8k"
    ),
    **dict.fromkeys(["apples", "legs", "hours", "earnings", "boxes", "girls"], "gsm8k"),
    **dict.fromkeys(["revolving", "sammy", "light", "kitten", "pickle", "brine"], "csqa"),
    **dict.fromkeys(
        ["stone", "boolean", "scenarios", "fuzzer", "statements", "degree", "twins"], "mmlu"
    ),
    "pro-statements": "mmlu_pro",
}

_UNSET = object()


@dataclass(frozen=True)
class Case:
    sample: str
    completion: str
    expected: str | None
    # GSM8K only: the "strict" reading (stated answers only).
    strict: object = _UNSET
    # Why, where the reading is not obvious (every None a human might read otherwise).
    why: str = ""
    # How the call ended ("length": cut off at the token limit); None: it finished.
    finish: str | None = None
    # What the check's detail begins with, where the reader says why it read nothing.
    detail: str | None = None


C = Case
CASES: list[Case] = [
    # From an embedded-model MMLU run: a label whose text is an echo of the question is not
    # left standing alone as if chosen.
    Case(
        "scenarios",
        "To analyze the scenarios, let's examine each scenario with a critical thinking "
        'approach.\n\nScenario 1: "For which of these two scenarios does the main character (who '
        'uses I/me/my) do something clearly morally wrong in the US as of 2020?"\n\nA. Scenario '
        "2-I made sure to take some hotel robes and towels as a souvenir\nThe first scenario is "
        "not possible because it would be against the moral standards of a person who is using "
        "I/me/my.\nB. The other two scenarios are also wrong because they do not align with the "
        'morality of any human being.\nC. As for D., "Not correct" is a misnomer; it refers to a '
        "different scenario that goes beyond what is",
        None,
        why="options discussed in turn, none chosen",
    ),
    # -- BoolQ ----------------------------------------------------------------------------
    C("ethanol", "False", "False"),
    C("ethanol", "**Answer:** False", "False"),
    C("phantom", "**True**", "True"),
    C("phantom", "Yes.", "True"),
    C(
        "ethanol",
        "Based on the passage, it is not true that ethanol takes more energy to make than it "
        "produces.",
        "False",
        why="'not true' is False",
    ),
    C("phantom", "The statement is not false.", "True", why="double negation"),
    C("ethanol", "The statement is not true.", "False"),
    C(
        "phantom",
        "It is not false that pain can be felt where a limb is missing.",
        "True",
        why="double negation",
    ),
    C(
        "ethanol",
        "The answer would be true if the passage measured sugarcane only, but here false.",
        "False",
        why="'would be true if' is a condition, not an assertion; 'here false' is",
    ),
    C("ethanol", "The answer is not clear.", None),
    C("ethanol", "The answer is not true. It is false.", "False"),
    C(
        "ethanol",
        "It isn't correct that ethanol takes more energy to make than it produces.",
        "False",
    ),
    C("ethanol", "That is not correct: corn ethanol returns 1.3 units per unit spent.", "False"),
    C("ethanol", "It is incorrect that making ethanol uses more energy than it yields.", "False"),
    C(
        "ethanol",
        "It is false that producing ethanol consumes more energy than it releases.",
        "False",
    ),
    C(
        "ethanol",
        "No, ethanol does not take more energy to make than it produces; each unit of "
        "fossil-fuel energy gives 1.3 units.",
        "False",
    ),
    C(
        "ethanol",
        "Is it true that ethanol takes more energy to make than it produces? According to the "
        "passage, one unit of fossil-fuel energy creates 1.3 units, so the answer is False.",
        "False",
        why="a truth word inside a question is not an assertion",
    ),
    C("ethanol", "It is not clear whether the statement is true.", None),
    C(
        "ethanol",
        "The statement is not entirely true.",
        None,
        why="a hedge: 'not entirely true' neither affirms nor denies",
    ),
    C(
        "ethanol",
        "The statement isn't entirely true.",
        None,
        why="the same hedge contracted: 'isn't entirely true' is not 'true'",
    ),
    C(
        "ethanol",
        "That claim isn\u2019t necessarily false.",
        None,
        why="a contracted hedge with a typographic apostrophe is no verdict either",
    ),
    C(
        "ethanol",
        "Answer True/False to the question: does ethanol take more energy make that produces? "
        "False.",
        "False",
        why="the echoed question and 'True/False' (naming the choices) are not read",
    ),
    C(
        "phantom",
        "Let's think step by step. The passage says phantom pain relates to a limb or an organ "
        "that is not physically part of the body, and it can also follow spinal cord injury, "
        "which paralyzes. So the statement is true.",
        "True",
    ),
    C(
        "phantom",
        "True. Phantom sensations can also occur following nerve avulsion or spinal cord injury.",
        "True",
    ),
    C("phantom", "That is correct: the passage describes exactly that.", "True"),
    C(
        "ethanol",
        "The passage reports a positive energy balance for corn ethanol. Therefore, no.",
        "False",
    ),
    C(
        "ethanol",
        "The answer is True. Wait, no: the passage says corn ethanol returns 1.3 units per unit "
        "spent, so it is false.",
        "False",
        why="a withdrawn answer gives way to what follows",
    ),
    C(
        "ethanol",
        "It is true that ethanol needs energy to produce, but false that it needs more than it "
        "gives.",
        None,
        why="two opposite truths about different clauses: the reader cannot tell which clause "
        "is the question's, so it does not guess",
    ),
    C(
        "ethanol",
        "The statement is true. Wait, let me reconsider. Actually the passage says it is false.",
        "False",
        why="only what follows a withdrawal counts",
    ),
    C(
        "ethanol",
        "The statement is false because the passage says the opposite is true.",
        "False",
        why="'the opposite is true' asserts False",
    ),
    C("ethanol", "The claim is partially true.", None, why="a hedge, not a verdict"),
    C("ethanol", "It is neither true nor false.", None),
    C("ethanol", "No doubt the passage is detailed, but it does not say.", None),
    # Real small-model completions: "Yes" opening a courtesy is not a verdict.
    C(
        "phantom",
        "Yes, I'd be happy to answer your question. The passage suggests that phantom "
        "sensations follow amputation.\n\nThe answer is indeed Yes, I'd be happy to answer your "
        "question with any additional details you might need.",
        None,
        why="'Yes, I'd be happy to answer' is a courtesy, twice; nothing states a verdict",
    ),
    C(
        "phantom",
        "Yes, I will answer that question. Phantom pain is a perception relating to a missing "
        "limb.",
        None,
        why="a courtesy, not a verdict",
    ),
    C("phantom", 'Yes, the answer is "True"', "True"),
    C(
        "ethanol",
        'Anecdote: "The following sentences contain the answer to the question. The answer is '
        "'No.'\"",
        "False",
    ),
    C("ethanol", "I cannot tell from the passage.", None),
    # -- GSM8K ----------------------------------------------------------------------------
    C(
        "janet",
        "Janet has 16 - 3 - 4 = 9 eggs left. She makes 9 * 2 = 18 dollars.\n#### 18",
        "18",
        strict="18",
    ),
    C(
        "john",
        "Based on the question: John has to answer 30 questions on a test. He has answered 12. "
        "30 - 12 = 18 questions left.",
        "18",
        strict=None,
        why="the echoed question's 'answer 30' is a verb in copied text",
    ),
    C(
        "john",
        "He still has to answer 30 - 12 = 18 questions.",
        "18",
        strict=None,
        why="'answer' as a verb states nothing; the last number is read flexibly",
    ),
    C(
        "john",
        "How many questions does he still have to answer? He has 30 - 12 = 18 left.",
        "18",
        strict=None,
    ),
    C("john", "He answered 12 of the 30, and the answer is 18.", "18", strict="18"),
    C(
        "marbles",
        "I would answer 12 at first, but the correct total is 14.",
        "14",
        strict="14",
        why="a self-correction keeps the corrected value",
    ),
    C(
        "janet",
        "Eggs left: 16 - 3 - 4 = 9\n#### 9\nDollars: 9 + 2 = 11\n#### 11\nPer egg it is "
        "9 * 8 = 72. The answer is 72",
        "72",
        strict="72",
        why="the last stated answer wins whatever its form",
    ),
    C(
        "josh",
        "The answer is 40 - 2 = 28",
        "28",
        strict="28",
        why="'answer is EXPR = N' is N; the reader does not check arithmetic",
    ),
    C("janet", "The answer is 16 - 3 - 4.", None, strict=None, why="an unevaluated expression"),
    C(
        "robe",
        "8 - 10 + 5x = 4.",
        None,
        strict=None,
        why="no stated answer and an unsolved equation: its numbers are not answers",
    ),
    C("robe", "Let x be the white fiber. 2x = 2, so x = 1.", "1", strict=None),
    C("robe", "Let t be the total. t = 2 + 1, so t = 3.", "3", strict=None),
    C(
        "josh",
        "The profit is 200,000 - 130,000",
        None,
        strict=None,
        why="the last number is an operand of an unevaluated expression",
    ),
    C(
        "janet",
        "She sells 16 - 3 - 4 = 9 eggs for $2 each, so she makes $18 every day.",
        "18",
        strict=None,
    ),
    C("janet", "She makes 9 x 2 = 18 dollars.", "18", strict=None),
    C("janet", "The answer is $18.", "18", strict="18"),
    C("janet", "Answer: 18", "18", strict="18"),
    C("janet", "**Final answer:** $18", "18", strict="18"),
    C("janet", "The final answer is $\\boxed{18}$.", "18", strict="18"),
    C("janet", "18", "18", strict="18"),
    C("janet", "$18.", "18", strict="18"),
    C("janet", "The answer is approximately 18.", "18", strict="18"),
    C(
        "janet",
        "Let's think step by step. Janet's ducks lay 16 eggs per day. She eats three for "
        "breakfast every morning and bakes muffins for her friends every day with four. So "
        "16 - 3 - 4 = 9 eggs remain, and 9 * $2 = $18.",
        "18",
        strict=None,
    ),
    C(
        "janet",
        "The answer is 26. Wait, she eats 3 and bakes 4, so 16 - 7 = 9 eggs and 9 * 2 = 18 "
        "dollars.",
        "18",
        strict=None,
        why="a withdrawn stated answer gives way to the last number after the withdrawal",
    ),
    C(
        "josh",
        "He spent 80,000 + 50,000 = $130,000. The house is worth 80,000 * 2.5 = $200,000. "
        "Profit: 200,000 - 130,000 = $70,000.",
        "70000",
        strict=None,
    ),
    C("josh", "The answer is 70,000 dollars.", "70000", strict="70000"),
    C(
        "robe",
        "It takes 2 / 2 = 1 bolt of white fiber, so 2 + 1 = 3 bolts in total. The answer is 3.",
        "3",
        strict="3",
    ),
    C("marbles", "9 + 5 = 14. So Tim has 14 marbles now.", "14", strict=None),
    C("marbles", "I don't know how to solve this.", None, strict=None),
    C(
        "marbles",
        "The answer would be 9 if he won nothing, but he wins 5, so he has 14.",
        "14",
        strict=None,
        why="'would be 9 if' supposes an answer; it does not state one",
    ),
    C(
        "janet",
        "Subproblem 1: 16 - 3 - 4 = 9 eggs. Answer: 9\nSubproblem 2: 9 * 2 = 18. So Janet makes "
        "$18 a day.",
        "18",
        strict=None,
        why="a sub-problem's 'Answer: 9' is a step, not the answer",
    ),
    C(
        "janet",
        "Step 1: 16 - 3 - 4 = 9 eggs.\nStep 2: 9 * 2 = 18.\nStep 3: Final answer: 18",
        "18",
        strict="18",
    ),
    # The last-number fallback reads results, not list numbering, asides or stray numbers
    # (from embedded SmolLM2 runs).
    C(
        "janet",
        "1. Janet's ducks lay 16 eggs a day.\n2. She eats 3 and bakes 4, so 16 - 3 - 4 = 9 eggs "
        "are left.\n3. She sells them at $2 each: 9 * 2 = $18.\n4. This assumes she sells every "
        "egg.\n5. And that the price stays the same.\n6. Eggs can break.\n7. Therefore, in real "
        "life, the amount may vary.",
        "18",
        strict=None,
        why="'7.' numbers a list item; the last result is $18",
    ),
    C(
        "janet",
        "She uses 3 + 4 = 7 eggs, leaving 16 - 7 = 9 to sell, so she makes 9 * 2 = 18 dollars "
        "(the muffins she bakes, which was still 4).",
        "18",
        strict=None,
        why="a bracketed aside's number is not the result",
    ),
    C(
        "janet",
        "She makes 9 * 2 = 18 dollars (9 eggs at $2).",
        "18",
        strict=None,
        why="the aside restates the working; the result stands before it",
    ),
    C(
        "janet",
        "She sells 16 - 3 - 4 = 9 eggs, so she makes \\( 9 \\times 2 = 18 \\) dollars.",
        "18",
        strict=None,
        why="LaTeX's \\( ... \\) is not an aside",
    ),
    C(
        "cookies",
        "Each friend gets 24 / 4 = 6 cookies, because we divide the cookies by 4.",
        "6",
        strict=None,
        why="the divisor of 'divide ... by 4' is an operand, not a result",
    ),
    C(
        "cookies",
        "Mia divides 24 by 4.",
        None,
        strict=None,
        why="an unevaluated division: neither operand is a result",
    ),
    C(
        "pens",
        "It cost $3 and now costs $7, so its price went up by $4.",
        "4",
        strict=None,
        why="'by' alone is no operand: 'went up by $4' is the result",
    ),
    C(
        "marbles",
        "Tim has 9 + 5 = 14 marbles. Against his sister's marbles the ratio is ultimately 10:5",
        "14",
        strict=None,
        why="a ratio is not a number answer",
    ),
    C(
        "sadie",
        "Monday: 8 hours. Tuesday and Wednesday: 8 - 2 = 6 hours each. The rest of the week is 4 "
        "days. The total hours slept by Sadie is 30.8, which means that compared to a normal "
        "week of 37.3 hours she lost 6.5 hours.",
        "30.8",
        strict=None,
        why="the question asks for a total and the reply states one; 6.5 is a remark after it",
    ),
    C(
        "sadie",
        "Tuesday and Wednesday: 6 * 2 = 12 hours. The total for the rest of the week is 4 * 7 "
        "= 28 hours, so she slept 8 + 12 + 28 = 48 hours.",
        "48",
        strict=None,
        why="a total stated before a computed result does not replace it",
    ),
    # A total read only where the clause after it comments on it (", which means ..." above):
    # not a rate ("per", "each", "a day"), nor one a result ("so", "gives", "makes") follows.
    C(
        "apples",
        "The total cost is $3 per apple, so 4 apples cost $12.",
        "12",
        strict=None,
        why="'$3 per apple' is a rate, and 'so' brings the result",
    ),
    C(
        "legs",
        "The total number of legs is 4 per dog, so 5 dogs have 20 legs.",
        "20",
        strict=None,
        why="'4 per dog' is a rate",
    ),
    C(
        "hours",
        "The total is 5 hours on Monday plus 3 hours on Tuesday, which gives 8 hours.",
        "8",
        strict=None,
        why="'plus' makes 5 an operand, and 'which gives' states the result",
    ),
    C(
        "earnings",
        "Janet's total earnings are $16 a day, so over 7 days she makes $112.",
        "112",
        strict=None,
        why="'$16 a day' is a rate",
    ),
    C(
        "boxes",
        "In total there are 5 boxes, each with 4 pens, so 20 pens",
        "20",
        strict=None,
        why="'so' brings the result",
    ),
    C(
        "girls",
        "The total number of students was 30, and 2/3 of them are girls, so 20 girls.",
        "20",
        strict=None,
        why="the class's total is not the total asked for; 'so' brings the result",
    ),
    # Cut off at the length limit: read up to where the reply is whole; a loop is unresolved.
    C(
        "janet",
        "Janet has 16 - 3 - 4 = 9 eggs left. She eats 3 eggs, so 16 - 3 = 13.\n#### 7\nThe "
        "answer is 7.\n#### 7\nThe answer is 7.\n#### 7\nThe answer is 7.\n#### 7\nThe answer "
        "is",
        None,
        strict=None,
        finish="length",
        detail="repeating loop",
        why="cut off while repeating itself: the loop's '#### 7' is no answer",
    ),
    C(
        "janet",
        "She makes 9 * 2 = 18 dollars.\n#### 7\n#### 7\n#### 7\n#### 7\n#### 7\n####",
        None,
        strict=None,
        finish="length",
        detail="repeating loop",
    ),
    C(
        "janet",
        "She sells 16 - 3 - 4 = 9 eggs and makes 9 * 2 = 18 dollars a day.\n#### 1",
        "18",
        strict=None,
        finish="length",
        detail="cut off",
        why="'#### 1' was cut off mid-number (of 18?): only the whole lines are read",
    ),
    C(
        "sadie",
        "Monday: 8 hours.\nTuesday: 6 hours.\nWednesday: 6 hours.\nThursday: 7 hours.\nFriday: "
        "7 hours.\nSaturday: 7 hours.\nSunday: 7 hours.\nTotal: 8 + 6 + 6 + 7 + 7 + 7 + 7 = 48 "
        "hours.\n#### 48\n\nTo double-check, each",
        "48",
        strict="48",
        finish="length",
        detail="cut off",
        why="a list of alike lines is not a loop",
    ),
    C(
        "janet",
        "She makes 9 * 2 = 18 dollars.\n#### 18\n#### 18\n",
        "18",
        strict="18",
        finish="length",
        detail="cut off",
        why="a line twice is not a loop",
    ),
    # -- CommonsenseQA --------------------------------------------------------------------
    C(
        "sammy",
        "Based on the analysis, we can discard option A and option D since they are wrong. The "
        "remaining options are B and C, and B is the most plausible.",
        "B",
        why="discarded options are not answers; the most plausible one is",
    ),
    C(
        "sammy",
        "Discard wrong answers: A. race track is wrong, C. the desert is wrong, D. apartment is "
        "wrong, E. roadblock is wrong. B. populated areas is correct.",
        "B",
    ),
    C("sammy", "The answer is not A; the answer is B.", "B", why="a retraction"),
    C("sammy", "A would be tempting, but the answer is B.", "B"),
    C("sammy", "The answer is B, and C is wrong.", "B"),
    C("sammy", "discard A, eliminate D, rule out E. Not C. So B remains.", "B"),
    C(
        "sammy",
        "Let's analyze each option:\nA. race track: busy only during races.\nB. populated areas: "
        "by definition full of people.\nC. the desert: empty.\nD. apartment: few people.\n"
        "E. roadblock: not a destination.\nTherefore, the answer is B.",
        "B",
    ),
    C(
        "sammy",
        "A. race track\nB. populated areas\nC. the desert\nD. apartment\nE. roadblock",
        None,
        detail="options listed",
        why="a list of the options chooses none of them",
    ),
    C(
        "sammy",
        'Based on the analysis, let\'s discard the wrong answers:\n\nA. "race track" - Race '
        "tracks are crowded only during events. This option is less likely.\n"
        'B. "populated areas" - This is the most logical choice.\n'
        'C. "the desert" - Deserts are sparsely populated. Discard.\n'
        'D. "apartment" - Few people. Discard.\nE. "roadblock" - Not a place people gather. '
        'Discard.\n\nThe remaining answer is B. "populated areas".',
        "B",
    ),
    C(
        "sammy",
        "1. **Race track (A)**: crowded only during events.\n2. **Populated areas (B)**: always "
        "have people.\n3. **The desert (C)**: empty.\n4. **Apartment (D)**: few people.\n"
        "5. **Roadblock (E)**: not a destination.\n\n**Conclusion**: The best answer is "
        "**B. populated areas**.",
        "B",
    ),
    C(
        "sammy",
        "Let's elaborate on each option:\nA. race track: a place for racing.\nB. populated "
        "areas: areas with many people.\nC. the desert: few people live there.\nD. apartment: "
        "a residence.\nE. roadblock: an obstruction on a road.",
        None,
        why="an elaboration of every option chooses none",
    ),
    C("sammy", "The answer is E. roadblock... no, B.", "B", why="a correction"),
    C("sammy", "A, C, D, E can be eliminated, leaving B.", "B"),
    C("sammy", "B - populated areas", "B"),
    C("sammy", "I think B. populated areas is right.", "B"),
    C("sammy", "After eliminating A, C, D and E, the only option left is B.", "B"),
    C("sammy", "Discard A. Discard C. Discard D. Discard E. Keep B.", "B"),
    C("sammy", "A (wrong), B (correct), C (wrong), D (wrong), E (wrong)", "B"),
    C("sammy", "It could be (B) or (D).", None),
    C("sammy", "I think (B) might be it, or E.", None, why="two options offered"),
    C("sammy", "B is correct, and so is D.", None, why="two options called correct"),
    C("sammy", "Options (A) and (C) are wrong; (B).", "B"),
    C("sammy", "The answer is B or D.", None),
    C("sammy", "Both B and D have people, but B is the best answer.", "B"),
    C("sammy", "**Answer: B. populated areas**", "B"),
    C("sammy", "The best option is B (populated areas), since that is where people are.", "B"),
    C(
        "sammy",
        "The answer is B. Wait, B is wrong: apartments have people too.",
        None,
        why="the answer is withdrawn and nothing replaces it",
    ),
    C("sammy", "Is B correct? Yes: populated areas are where people are, so B.", "B"),
    C(
        "sammy",
        "If C were right, Sammy would be alone; C is wrong and B is right.",
        "B",
        why="a condition is not a verdict",
    ),
    C(
        "sammy",
        "Sammy wanted to go to where the people were.  Where might he go? B. populated areas",
        "B",
        why="the echoed question is dropped; the label then opens the answer",
    ),
    C(
        "light",
        'E. "crucial" is not a clear choice, as the light is only needed to see.',
        None,
        why="a label followed by its own negation is not an answer",
    ),
    C("light", 'E. "crucial" is the correct answer: the light is needed to finish.', "E"),
    C("light", "The answer is crucial.", "E", why="named by its option text alone"),
    C("light", "The light is crucial for finishing her homework. Therefore, E.", "E"),
    C(
        "kitten",
        'The answer is D. "living room."',
        None,
        detail='conflict: D is written with option E\'s text "living room"',
        why="D written with E's text: a conflict, not an answer",
    ),
    C(
        "kitten",
        "The answer is D) living room",
        None,
        detail="conflict: D is written with option E's text",
        why="D written with E's text",
    ),
    C("kitten", "The answer is (E) living room.", "E"),
    C("kitten", "The answer is living room.", "E", why="named by its option text alone"),
    C("kitten", "I choose (D) because option (A) is wrong", "D"),
    C(
        "kitten",
        "A mouser hunts mice. A farmhouse has mice, so D. farmhouse is the most plausible.",
        "D",
        why="the article 'A' is not option A",
    ),
    C("kitten", "D", "D"),
    C("pickle", 'The correct answer is indeed D. "cucumber".', "D"),
    C(
        "pickle",
        'The answer is D. "carrot"',
        None,
        detail="conflict: D is written with option A's text",
        why="D written with A's text",
    ),
    C("revolving", "The answer is A) bank.", "A"),
    C("revolving", "The answer is a bank.", "A", why="named by its option text alone"),
    C("revolving", "**A**", "A"),
    C("revolving", "(A)", "A"),
    C(
        "revolving",
        "A revolving door is a security measure at a bank, where money must be protected.",
        None,
        why="no answer statement; 'at a bank' is prose, and the article 'A' is not option A",
    ),
    C("revolving", "A bank would use one, as would a mall.", None),
    C(
        "revolving",
        "Vitamin C is not relevant here; a bank needs security, so the answer is A.",
        "A",
    ),
    C("revolving", 'Answer: "A revolving door is convenient"', None),
    C(
        "brine",
        'D. "cucumber"',
        None,
        detail='conflict: D is written with option C\'s text "cucumber"',
        why="D written with C's text",
    ),
    C(
        "brine",
        'The answer is D. "cucumber"',
        None,
        detail="conflict: D is written with option C's text",
    ),
    C("brine", "cucumber", "C", why="the reply is one option's whole text"),
    C(
        "brine",
        "The answer is (C) cucumber.\n\nCucumbers are soaked in brine, which",
        "C",
        finish="length",
        detail="cut off",
    ),
    # -- MMLU -----------------------------------------------------------------------------
    C(
        "stone",
        'C. "4 s" is the correct answer. The answer D. "8 s" can be…',
        "C",
        why="'The answer D.' introduces an option under discussion, not an answer",
    ),
    C(
        "boolean",
        "Discard wrong answers: A. [AND, NOT] is wrong, B. [NOT, OR] is wrong, C. [AND, OR] is "
        "correct, D. [NAND] is wrong.",
        "C",
    ),
    C("stone", "The stone falls 80 m: t = sqrt(2 * 80 / 10) = 4 s. The answer is C.", "C"),
    C("stone", "The answer is 4 s.", "C", why="named by its option text alone"),
    C(
        "stone",
        "The answer is C. 8 s",
        None,
        detail="conflict: C is written with option D's text",
        why="C written with D's text",
    ),
    C("stone", "The correct answer is: C. 4 s", "C"),
    C("stone", "Options A and B are too short and D is too long; C fits.", "C"),
    C("stone", "**C**", "C"),
    C(
        "boolean",
        "Option C is not complete.",
        None,
        why="'not complete' may answer this NOT question, or reject C in another; the reader "
        "does not know the question's polarity, so only judgements of an option as an answer "
        "(wrong, not correct, not the answer) discard it, and nothing here chooses one",
    ),
    C(
        "boolean",
        "(C) is not complete, (D) is complete.",
        None,
        why="two marked options and no statement or verdict on either as an answer",
    ),
    C(
        "statements",
        "A factor group of a non-Abelian group can be Abelian (S3/A3), so Statement 1 is false. "
        "Normality is not transitive, so Statement 2 is false. The answer is False, False.",
        "B",
        why="named by its option text alone; the article 'A' is not option A",
    ),
    C("statements", "Both statements are false: B.", "B"),
    C(
        "statements",
        "Statement 1 is false. Statement 2 is false.",
        None,
        why="no answer statement: true/false verdicts on the statements are not read as the "
        "option that combines them",
    ),
    C("degree", "The answer is 4.", "B", why="named by its option text alone"),
    C(
        "degree",
        "The degree is 4 since sqrt(18) = 3 sqrt(2).",
        None,
        why="no answer statement: a number in prose is not taken as an option",
    ),
    C(
        "degree",
        "Q(sqrt(2), sqrt(3)) has degree 4 over Q, and sqrt(18) adds nothing. Final answer: B",
        "B",
    ),
    C("degree", "Answer: E", None, why="E is not an MMLU label"),
    C("statements", "False, False", "B", why="the reply is one option's whole text"),
    C("statements", "True, False", "C", why="the reply is one option's whole text"),
    C("statements", "**True, False**.", "C"),
    C("twins", "False, True", None, why="two options have that text"),
    C("pro-statements", "False, False", "A", why="the reply is one option's whole text"),
    C(
        "scenarios",
        'A. "Wrong, Wrong" B. "Wrong, Not wrong" C. "Not wrong, Wrong" D. "Not wrong, Not wrong"',
        None,
        detail="options listed",
        why="an echo of the options list states no answer",
    ),
    C(
        "scenarios",
        "Options:\n(A) Wrong, Wrong\n(B) Wrong, Not wrong\n(C) Not wrong, Wrong\n(D) Not wrong, "
        "Not wrong",
        None,
        detail="options listed",
        why="an echo of the options list states no answer",
    ),
    C(
        "scenarios",
        'A. "Wrong, Wrong" B. "Wrong, Not wrong" C. "Not wrong, Wrong" D. "Not wrong, Not '
        'wrong"\nC',
        "C",
        why="C stands alone on the last line after the echoed list: the answer, not an item",
    ),
    # An echoed list, then the answer alone on its own last line, however marked.
    C(
        "scenarios",
        "A. Wrong, Wrong\nB. Wrong, Not wrong\nC. Not wrong, Wrong\nD. Not wrong, Not wrong\n\nD",
        "D",
        why="D alone after the list is the answer (a wrong one here)",
    ),
    C(
        "scenarios",
        "A. Wrong, Wrong\nB. Wrong, Not wrong\nC. Not wrong, Wrong\nD. Not wrong, Not wrong\n\n(D)",
        "D",
    ),
    C(
        "scenarios",
        "A. Wrong, Wrong\nB. Wrong, Not wrong\nC. Not wrong, Wrong\nD. Not wrong, Not wrong\n\n"
        "**D**",
        "D",
    ),
    C(
        "scenarios",
        "A. Wrong, Wrong\nB. Wrong, Not wrong\nC. Not wrong, Wrong\nD. Not wrong, Not wrong\n\n"
        "D. Not wrong, Not wrong",
        None,
        detail="options listed",
        why="an option repeated with its text after the list reads as one more item; a human "
        "might take it for the answer, the reader does not guess",
    ),
    C(
        "scenarios",
        "(A) Wrong, Wrong (D) Not wrong, Not wrong",
        None,
        detail="options listed",
        why="a listing on one line: each label with its own text, none chosen (A is not "
        "called 'Wrong')",
    ),
    C("fuzzer", "The answer is Whitebox.", "C", why="named by its option text alone"),
    C("fuzzer", "Whitebox fuzzing sees every branch, so the answer is (C) Whitebox.", "C"),
    C(
        "fuzzer",
        "The answer is (B) Whitebox.",
        None,
        detail="conflict: B is written with option C's text",
        why="B written with C's text",
    ),
    C("fuzzer", "I would go with C.", "C"),
    C("fuzzer", "A: wrong\nB: wrong\nC: correct\nD: wrong", "C"),
    C(
        "fuzzer",
        "A: wrong\nB: correct\nC: correct\nD: wrong",
        None,
        why="two options called correct",
    ),
    C(
        "fuzzer",
        "Option A: Generational - wrong, it follows a grammar.\nOption B: Blackbox - wrong.\n"
        "Option C: Whitebox - correct.\nOption D: Mutation-based - wrong.",
        "C",
    ),
    C(
        "fuzzer",
        "Generational and blackbox fuzzers do not see the code; mutation-based ones follow "
        "inputs. (C)",
        "C",
    ),
    C("fuzzer", "A whitebox fuzzer reads the code and can steer into every branch.\nC", "C"),
    C(
        "boolean",
        "{AND, OR} cannot express negation, so it is not complete. Answer: C",
        "C",
    ),
    C(
        "boolean",
        "The answer is not A, B, or D, since each of those is complete; the answer is C.",
        "C",
    ),
]


def _id(case: Case) -> str:
    return f"{case.sample}:{case.completion[:50]}"


def test_table_is_large_enough() -> None:
    assert len(CASES) >= 60
    assert {TASK_OF[c.sample] for c in CASES} == set(TASKS)


def _check(task: Task, sample: Sample, completion: str, finish: str | None) -> Check:
    """The task's check of ``completion`` as the ladder makes it, its call ending ``finish``."""
    call = Call(purpose="answer", model="m", messages=[Message(role="user", content="q")],
                completion=completion, finish_reason=finish)  # fmt: skip
    return asyncio.run(task.acheck_reply(sample, completion, [call]))


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_reader(case: Case) -> None:
    task_name = TASK_OF[case.sample]
    task, sample = TASKS[task_name], SAMPLES[case.sample]
    check = task.check(sample, case.completion)
    if case.finish is not None:
        check = _check(task, sample, case.completion, case.finish)
    elif task_name != "gsm8k":  # as the ladder reads it, a finished reply reads the same
        assert _check(task, sample, case.completion, "stop") == check
    if case.detail is not None:
        assert (check.detail or "").startswith(case.detail)
    else:
        assert check.detail is None
    assert check.parsed == case.expected
    assert check.resolved == (case.expected is not None and case.expected == sample.target)
    if task_name == "gsm8k":
        assert case.strict is not _UNSET, "GSM8K rows state their strict reading"
        strict = check.alternatives["strict"]
        assert strict.parsed == case.strict
        assert strict.resolved == (case.strict is not None and case.strict == sample.target)
    else:
        assert case.strict is _UNSET
        assert check.alternatives == {}


def _cut_off_server(reply: str) -> ServerThread:
    """The fake OpenAI server answering ``reply`` to everything, as cut off at the token
    limit (finish_reason "length", as vLLM and llama.cpp send it)."""

    @web.middleware
    async def cut_off(request: web.Request, handler: Any) -> web.StreamResponse:
        response = await handler(request)
        assert isinstance(response, web.Response) and response.body is not None
        body = json.loads(bytes(response.body))  # type: ignore[arg-type]
        for choice in body.get("choices", []):
            choice["finish_reason"] = "length"
        return web.json_response(body, status=response.status)

    app = FakeOpenAI(responder=lambda body: reply).app()
    app.middlewares.append(cut_off)
    return ServerThread(app).start()


@pytest.mark.parametrize(
    ("reply", "parsed", "strict", "detail"),
    [
        (
            "She makes 9 * 2 = 18 dollars.\n" + "#### 7\n" * 30 + "####",
            None,
            None,
            "repeating loop",
        ),
        ("She sells 9 eggs and makes 9 * 2 = 18 dollars a day.\n#### 1", "18", None, "cut off"),
    ],
)
def test_a_run_reads_replies_cut_off_at_the_length_limit(
    data_dir: Path, tmp_path: Path, reply: str, parsed: str | None, strict: str | None,
    detail: str,
) -> None:  # fmt: skip
    """Through the ladder: the record keeps the whole reply and its finish reason; the reading
    is of the whole part, and a loop is unresolved."""
    server = _cut_off_server(reply)
    try:
        os.environ.setdefault("OPENAI_API_KEY", "test-key")
        spec = RunSpec(dataset="gsm8k", model="openai:test-model", base_url=server.base_url,
                       strategies=["role"], limit=1, data_dir=data_dir, out=tmp_path / "run",
                       cache=False)  # fmt: skip
        asyncio.run(run_evaluation(spec))
    finally:
        server.stop()
    [record] = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").open()]
    [attempt] = record["attempts"]
    assert attempt["completion"] == reply
    assert attempt["calls"][0]["finish_reason"] == "length"
    assert attempt["parsed"] == parsed
    assert attempt["alternatives"]["strict"]["parsed"] == strict
    assert attempt["detail"].startswith(detail + ": ")
    if parsed is None:
        assert record["resolved_level"] is None
