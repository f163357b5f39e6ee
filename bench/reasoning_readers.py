"""Issue 26's measurement: how many resolved levels the old reading of a reasoning model's
completions got wrong, and how many today's reading does.

    .venv/bin/python bench/reasoning_readers.py [--limit 40] [--datasets gsm8k,mmlu]
                                                [--data-dir DIR] [--out DIR]

A scripted reasoning model on loopback (tests/test_reasoning_readers.py's server: the OpenAI
protocol, inline ``<think>`` blocks, finish_reason "length" for a reply cut off at the token
limit) climbs a three-level ladder (role, zero-shot CoT, three-shot CoT). Each reply is one of:

- ``right`` / ``wrong``: an answer without thinking;
- ``thought wrong``: thinking that concludes a wrong answer ("So the answer is 49."), then the
  right one as a bare "**42**" (issue 26's example);
- ``thought right``: thinking that concludes the right answer, then a wrong one;
- ``cut thinking``: an unclosed ``<think>`` that names the right answer in a finished sentence
  and is cut off by the token limit before any answer.

A careful reader resolves ``right`` and ``thought wrong`` only, reads ``cut thinking`` as no
answer, and takes the number or option after the thinking. The same climbs run twice against
the same replies: read whole (``think_tags = []``, as hpt read every completion before issue
26) and with the thinking set apart (the default). Counted per reading: attempts resolved
against the truth, attempts read as another answer than the careful one, cut-off replies
labelled as cut inside an answer they never gave, climbs whose resolved level is wrong, and
the mean HPI beside the careful reading's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpt.orchestrator import RunSpec, run_evaluation  # noqa: E402
from hpt.tasks import Sample  # noqa: E402
from tests.backend_helpers import serving  # noqa: E402
from tests.servers.answer_key import strategy_of  # noqa: E402
from tests.test_reasoning_readers import (  # noqa: E402
    ANSWERS,
    Reply,
    chosen,
    reasoner,
    reasoning_app,
    records,
    sample_of,
)

LADDER = ("role", "zero_shot_cot", "three_shot_cot")
RESOLVES = {"right", "thought wrong"}
# Each level's mix of replies, repeated over the samples (level 1's is issue 26's 40 GSM8K
# replies: 6 that thought a wrong number, 10 cut off while thinking).
PLANS = (
    ["thought wrong"] * 3 + ["cut thinking"] * 5 + ["thought right"] * 4 + ["wrong"] * 4
    + ["right"] * 4,
    ["thought wrong"] * 6 + ["cut thinking"] * 4 + ["thought right"] * 4 + ["wrong"] * 3
    + ["right"] * 3,
    ["thought wrong"] * 8 + ["right"] * 6 + ["cut thinking"] * 3 + ["thought right"] * 3,
)  # fmt: skip


def kind_of(index: int, level: int) -> str:
    plan = PLANS[level - 1]
    return plan[(index + 7 * (level - 1)) % len(plan)]


@dataclass(frozen=True)
class Said:
    """How a dataset's model states an answer: in its thinking, and after it."""

    concluded: str  # "So the answer is {}."
    bare: str  # "**{}**"


SAID = {"gsm8k": Said("So the answer is {}.", "**{}**"),
        "mmlu": Said("So the answer is ({}).", "**{}**")}  # fmt: skip


def answers(dataset: str, sample: Sample) -> tuple[str, str]:
    """The right and a wrong answer to ``sample``, as its reader normalises them."""
    wrong = ANSWERS[dataset](sample).wrong_read
    assert wrong is not None
    return sample.target, wrong


def reply(dataset: str, kind: str, right: str, wrong: str) -> Reply:
    said = SAID[dataset]

    def thinking(answer: str) -> str:
        return f"<think>Let me work through it.\n{said.concluded.format(answer)}\nDone.</think>\n\n"

    if kind == "right":
        return Reply(said.bare.format(right))
    if kind == "wrong":
        return Reply(said.bare.format(wrong))
    if kind == "thought wrong":
        return Reply(thinking(wrong) + said.bare.format(right))
    if kind == "thought right":
        return Reply(thinking(right) + said.bare.format(wrong))
    assert kind == "cut thinking"
    return Reply(f"<think>Let me see: {said.concluded.format(right)} Let me double-check that, "
                 "since", cut=True)  # fmt: skip


@dataclass
class Tally:
    # By kind of reply: [attempts, read wrong, resolved wrong].
    by_kind: dict[str, list[int]] = field(default_factory=dict)
    attempts: int = 0
    resolved_wrong: int = 0  # resolved where the careful reading is not, or the reverse
    read_wrong: int = 0  # parsed another answer than the careful reading's
    cut_mislabelled: int = 0  # cut while thinking, but said to be cut inside an answer
    climbs: int = 0
    level_wrong: int = 0  # the climb's resolved level is not the careful reading's
    hpi: float = 0.0  # the mean HPI the run reports
    careful_hpi: float = 0.0  # the mean HPI of the careful reading's resolved levels


def careful(kind: str, right: str, wrong: str) -> str | None:
    """The answer a careful human reads in a reply of ``kind``."""
    if kind == "cut thinking":
        return None
    return right if kind in RESOLVES else wrong


def tally(recs: list[dict[str, Any]], kinds: dict[tuple[str, int], str],
          truth: dict[str, tuple[str, str]], penalty: float) -> Tally:  # fmt: skip
    t = Tally()
    for r in recs:
        right, wrong = truth[r["sample_id"]]
        t.climbs += 1
        levels = [k for k in range(1, len(LADDER) + 1) if kinds[r["sample_id"], k] in RESOLVES]
        level = levels[0] if levels else None
        t.level_wrong += r["resolved_level"] != level
        t.hpi += r["hpi_score"] / len(recs)
        t.careful_hpi += (level or len(LADDER) + penalty) / len(recs)
        for a in r["attempts"]:
            kind = kinds[r["sample_id"], a["level"]]
            misread = a["parsed"] != careful(kind, right, wrong)
            misresolved = a["resolved"] != (kind in RESOLVES)
            t.attempts += 1
            t.read_wrong += misread
            t.resolved_wrong += misresolved
            counts = t.by_kind.setdefault(kind, [0, 0, 0])
            for i, n in enumerate((1, misread, misresolved)):
                counts[i] += n
            t.cut_mislabelled += kind == "cut thinking" and a.get("truncated") != "thinking"
    return t


def measure(dataset: str, data_dir: Path, limit: int, out: Path) -> list[tuple[str, Tally]]:
    task, samples = chosen(dataset, data_dir, limit)
    index = {s.id: i for i, s in enumerate(samples)}
    truth = {s.id: answers(dataset, s) for s in samples}
    kinds = {(s.id, k): kind_of(index[s.id], k) for s in samples for k in range(1, 4)}

    def script(body: dict[str, Any]) -> Reply:
        sample = sample_of(body, samples)
        level = LADDER.index(strategy_of(body)) + 1
        return reply(dataset, kinds[sample.id, level], *truth[sample.id])

    rows = []
    with serving(reasoning_app(script)) as server:
        readings: list[tuple[str, dict[str, Any]]] = [
            ("whole (before)", {"think_tags": []}),
            ("answer (now)", {}),
        ]
        for label, config in readings:
            where = out / f"{dataset}-{'whole' if config else 'answer'}"
            spec = RunSpec.model_validate({
                "dataset": dataset, "model": "reasoner", "strategies": list(LADDER),
                "models": {"reasoner": reasoner(server.base_url, **config)}, "limit": limit,
                "data_dir": data_dir, "out": where, "cache": False,
            })  # fmt: skip
            asyncio.run(run_evaluation(spec))
            rows.append((label, tally(records(where), kinds, truth, task.penalty)))
    mix = Counter(kinds[s.id, 1] for s in samples)
    print(f"{dataset}: {len(samples)} samples; level-1 replies: "
          + ", ".join(f"{n} {k}" for k, n in sorted(mix.items())))  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, default=40, help="samples per dataset (40)")
    parser.add_argument("--datasets", default="gsm8k,mmlu", help="gsm8k and/or mmlu")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args()
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    unknown = sorted(set(datasets) - set(SAID))
    if unknown:
        parser.error(f"no scripted replies for {', '.join(unknown)}; choose gsm8k, mmlu")
    with tempfile.TemporaryDirectory(prefix="hpt-reasoning-") as tmp:
        out = args.out or Path(tmp)
        table = [(d, label, t) for d in datasets
                 for label, t in measure(d, args.data_dir, args.limit, out)]  # fmt: skip
    head = ("dataset", "reading", "attempts", "resolved wrong", "read wrong",
            "cut labelled 'answer'", "climbs", "resolved level wrong", "HPI",
            "HPI (careful)")  # fmt: skip
    print_table(head, [
        (d, label, str(t.attempts), str(t.resolved_wrong), str(t.read_wrong),
         str(t.cut_mislabelled), str(t.climbs), str(t.level_wrong), f"{t.hpi:.3f}",
         f"{t.careful_hpi:.3f}")
        for d, label, t in table
    ])  # fmt: skip
    # Per kind of reply, over every level: read wrong / attempts, resolved wrong / attempts.
    kinds = sorted({k for _, _, t in table for k in t.by_kind})
    rows = []
    for d in datasets:
        tallies = [t for dataset, _, t in table if dataset == d]
        for kind in kinds:
            cells = [d, kind]
            for t in tallies:
                n, misread, misresolved = t.by_kind.get(kind, [0, 0, 0])
                cells += [f"{misread}/{n}", f"{misresolved}/{n}"]
            rows.append(tuple(cells))
    print_table(("dataset", "reply", "whole: read wrong", "whole: resolved wrong",
                 "answer: read wrong", "answer: resolved wrong"), rows)  # fmt: skip


def print_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print()
    for n, row in enumerate([head, *rows]):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    main()
