"""GSM8K: grade-school maths word problems with a numeric answer.

Reading a completion (hpt.tasks.readers.number; the table in tests/test_readers.py specifies
it). Text that copies six or more consecutive words of the question is dropped first: an
echoed question is not an answer. Then:

- the primary reading, which decides the climb, is the last stated answer in any form:
  "#### N", "\\boxed{N}", "the answer is N", "Answer: N", "final answer = N", "the correct
  total is N" ("the answer is 40 - 2 = 38" is 38; "answer" as a verb, "has to answer 30
  questions", states nothing). If the model withdraws its last stated answer ("Wait, ...",
  "I made a mistake"), the fallback below over what follows the withdrawal;
- the fallback, with no stated answer: the completion's last number that is a result of its
  working ("So she has 18 apples left." is 18). Not results, and passed over: list numbering
  and step labels ("7. Therefore, in real life..."; "Step 3"), ratios and clock times
  ("ultimately 10:5"), the operands of "divided by"/"multiplied by" ("we divide by 4"), and
  numbers in bracketed asides ("(which was still 4)"; bracketed arithmetic, a restatement
  such as "(which is $18)" and LaTeX's "\\( 18 \\)" are not asides). The result found is
  None when it is an operand of an unevaluated expression ("200,000 - 130,000", "24 divided
  by 4") or sits in an equation with an unsolved unknown ("8 - 10 + 5x = 4."). When the
  question's asking sentence asks for a total ("in total", "altogether"), a total stated in
  that result's sentence and followed by a clause that only comments on it (", which means
  ...") is read instead ("The total hours slept by Sadie is 30.8, which means ... she lost
  6.5 hours" is 30.8); never a rate ("The total cost is $3 per apple, so 4 apples cost $12"
  is 12) nor a total followed by a result ("so", "gives", "makes", "="; "The total is 5 hours
  on Monday plus 3 hours on Tuesday, which gives 8 hours" is 8);
- the alternative reading "strict" takes stated answers only (or a completion that is just a
  number) and is None otherwise, like lm-evaluation-harness's strict-match. Summaries report
  it beside the primary reading, so a user sees how much rests on the fallback.

A completion cut off at the length limit is read only up to its last whole line or sentence,
and not at all when it was cut off repeating itself (hpt.tasks.cutoff).
"""

from __future__ import annotations

import re
from typing import Any

from hpt.results.penalties import TABLE_4
from hpt.tasks.base import DatasetError, Sample, Task
from hpt.tasks.readers import asks_for_total, normalize_number, parse_number, parse_number_strict
from hpt.tasks.sources import field, load_hub, read_jsonl, require_file

_CALCULATOR = re.compile(r"<<[^>]*>>")


class GSM8K(Task):
    name = "gsm8k"
    title = "GSM8K"
    hub_id = "openai/gsm8k"
    hub_config = "main"
    hub_split = "test"
    penalty = 2.14
    penalty_source = TABLE_4
    report_rank = 2

    def _rows(self, split: str) -> list[tuple[str, dict[str, Any]]]:
        if self.data_dir is None:
            rows = load_hub(self.hub_id, self.hub_config, split)
            return [(f"{self.hub_id} {split} row {i}", r) for i, r in enumerate(rows)]
        path = require_file(self.data_dir, f"gsm8k/{split}.jsonl", self.name)
        return [(f"{path}:{n}", row) for n, row in read_jsonl(path)]

    def _samples(self, split: str) -> list[Sample]:
        samples = []
        for index, (where, row) in enumerate(self._rows(split)):
            solution = field(row, "answer", where)
            _, sep, final = solution.rpartition("####")
            target = normalize_number(final.strip()) if sep else None
            if target is None:
                raise DatasetError(f"{where}: answer has no '#### NUMBER' final line")
            # Drop the calculator annotations ("<<48/2=24>>"): they are tooling, not reasoning.
            shown = _CALCULATOR.sub("", solution)
            samples.append(
                Sample(
                    id=f"gsm8k-{split}-{index}",
                    fields={"question": field(row, "question", where)},
                    target=target,
                    shown_answer=shown,
                )
            )
        return samples

    def load_samples(self) -> list[Sample]:
        return self._samples("test")

    def load_exemplar_pool(self) -> list[Sample]:
        return self._samples("train")[:50]

    def load_train_pool(self) -> list[Sample]:
        # Prompt optimisers train on the whole train split (7,473 problems).
        return self._samples("train")

    def parse(self, completion: str, sample: Sample) -> str | None:
        question = _question(sample)
        return parse_number(completion, echo=[question], totals=asks_for_total(question))

    def alternative_readings(self, completion: str, sample: Sample) -> dict[str, str | None]:
        question = _question(sample)
        strict = parse_number_strict(completion, echo=[question], totals=asks_for_total(question))
        return {"strict": strict}


def _question(sample: Sample) -> str:
    question = sample.fields.get("question")
    return question if isinstance(question, str) else ""
