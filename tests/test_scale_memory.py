"""Flat memory at any size (issue 28): a cell's tally holds nothing per sample where its
metrics need nothing per sample, and compact state (or a file on disk) where they do, with
the summaries the per-sample lists gave. Memory is counted, not timed: the containers the
tally holds, and the bytes allocated in hpt/results/tally.py that outlive the records
(tracemalloc). bench/scale.py measures the run's RSS up to a million samples."""

from __future__ import annotations

import random
import statistics
import tracemalloc
from collections.abc import Iterable, Iterator
from typing import Any

import hpt.results.tally as tally_module
from hpt.results import Attempt, Call, Reading, SampleRecord, Tally, TaskInfo
from hpt.results.depth import depth_means
from hpt.results.records import DepthRecord, Verdict
from hpt.results.scoring import mean_of_scores, pass_at_k, report_ks
from hpt.results.textmetrics import corpus_bleu
from hpt.types import Message, Usage

M, PENALTY = 3, 2.14
STRATEGIES = ["role", "zero_shot_cot", "three_shot_cot"]


def climb(i: int, level: int | None, *, draw: int = 0, text: str = "") -> SampleRecord:
    """A GSM8K-like climb up to ``level`` (or all three levels, unresolved): every attempt one
    call with usage, a second reading, a 0-1 score and an output."""
    top = level or M
    attempts = [
        Attempt(
            level=k, strategy=STRATEGIES[k - 1],
            calls=[Call(purpose="answer", model="m", messages=[Message(role="user", content="q")],
                        completion=f"The answer is {i}.", finish_reason="stop",
                        usage=Usage(prompt_tokens=120, completion_tokens=5))],
            parsed=text or str(i), resolved=k == level, score=(i % 7) / 7,
            alternatives={"strict": Reading(parsed=str(i), resolved=k == level and i % 2 == 0)},
        )
        for k in range(1, top + 1)
    ]  # fmt: skip
    return SampleRecord(
        sample_id=f"gsm8k-test-{i}", draw=draw, dataset="gsm8k", model="m",
        strategies=STRATEGIES, m=M, penalty=PENALTY, target=text or str(i), resolved_level=level,
        hpi_score=float(level) if level else M + PENALTY, options=None, attempts=attempts,
    )  # fmt: skip


def tally(info: TaskInfo | None = None, *, draws: bool = False) -> Tally:
    """A cell's tally as planning makes it: draws tracked only with --samples-per-task > 1."""
    return Tally(dataset="gsm8k", model="m", mode="standard", m=M, penalty=PENALTY,
                 track_draws=draws, info=info, strategies=STRATEGIES)  # fmt: skip


def level_of(rng: random.Random) -> int | None:
    return rng.choice([1, 1, 2, 3, None])


def records(count: int, start: int = 0, seed: int = 0) -> list[SampleRecord]:
    rng = random.Random(seed)
    return [climb(i, level_of(rng)) for i in range(start, start + count)]


def sizes(value: Any) -> Iterator[int]:
    """The length of every container reachable from ``value`` (dicts' values included)."""
    if isinstance(value, str | bytes):
        return
    if isinstance(value, dict):
        yield len(value)
        for item in value.values():
            yield from sizes(item)
    elif isinstance(value, list | tuple | set):
        yield len(value)
        for item in value:
            yield from sizes(item)
    elif hasattr(value, "__len__"):
        yield len(value)


def retained(t: Tally) -> dict[str, list[int]]:
    return {name: list(sizes(value)) for name, value in vars(t).items() if name != "info"}


def bytes_kept(t: Tally, batch: Iterable[SampleRecord]) -> int:
    """Bytes allocated in tally.py while ``batch`` is added that are still held after it."""
    batch = list(batch)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for record in batch:
            t.add(record)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    mine = [tracemalloc.Filter(True, tally_module.__file__)]
    diff = after.filter_traces(mine).compare_to(before.filter_traces(mine), "filename")
    return sum(stat.size_diff for stat in diff)


def test_a_single_draw_cell_keeps_nothing_per_sample() -> None:
    t = tally(TaskInfo(name="gsm8k"))
    for record in records(300):
        t.add(record)
    t.summary()
    shape = retained(t)
    kept = bytes_kept(t, records(3000, start=300, seed=1))
    # Everything the tally holds is as large after 3,300 records as after 300 ...
    assert retained(t) == shape
    assert not t.draws and not t.finals.count and not t.node_scores and not t.min_k
    # ... and what tally.py allocated for 3,000 more records is a few counters, not ~100
    # bytes a record (one dict slot or list each would be 300,000).
    assert kept < 4_000, kept
    assert t.summary().samples == 3300


def old_pass_at(draws: dict[str, list[int]], adaptive: bool = False) -> dict[str, float]:
    """pass@k as the tally computed it from a list of counts per sample (before issue 28)."""
    most = max((c[0] for c in draws.values()), default=0)
    if most < 2:
        return {}
    out: dict[str, float] = {}
    columns = (("hpf", 2),) if adaptive else (("level1", 1), ("hpf", 2))
    for k in report_ks(most):
        eligible = [c for c in draws.values() if c[0] >= k]
        for name, col in columns:
            values = [pass_at_k(c[0], c[col], k) for c in eligible]
            out[f"{name}@{k}"] = sum(values) / len(values)
    return out


def test_repeated_draws_cost_one_slot_per_sample_and_give_the_same_pass_at_k() -> None:
    rng = random.Random(7)
    t, old = tally(draws=True), {}
    # Draws land out of order (a resume, concurrency), some samples with fewer of them.
    climbs = [(i, d) for d in range(4) for i in range(2000) if d < 3 or i % 3]
    rng.shuffle(climbs)
    for i, draw in climbs:
        record = climb(i, level_of(rng), draw=draw)
        t.add(record)
        counts = old.setdefault(record.sample_id, [0, 0, 0])
        counts[0] += 1
        counts[1] += record.resolved_level == 1
        counts[2] += record.resolved_level is not None
    assert t.summary().pass_at_k == old_pass_at(old)
    assert set(t.summary().pass_at_k) == {
        f"{c}@{k}" for c in ("level1", "hpf") for k in (1, 2, 3, 4)
    }
    assert len(t.draws) == 2000
    # Each sample's counts are one of a few shared triples, not an object of its own.
    assert len({id(counts) for counts in t.draws.values()}) <= 5**3


def test_corpus_outputs_wait_on_disk_and_score_as_before() -> None:
    rng = random.Random(3)
    words = "the cat sat on a mat while dogs ran far away\nand home".split(" ")
    bleu = tally(TaskInfo(name="iwslt", kind="text", corpus_metric="corpus BLEU",
                          corpus_rule="corpus_bleu"))  # fmt: skip
    mean = tally(TaskInfo(name="samsum", kind="text", corpus_metric="ROUGE-L",
                          corpus_rule="mean"))  # fmt: skip
    finals: list[tuple[str, str, float | None]] = []

    def add(count: int) -> None:
        for i in range(len(finals), len(finals) + count):
            text = " ".join(rng.choices(words, k=8)) + ' "é"'
            record = climb(i, level_of(rng), text=text)
            bleu.add(record)
            mean.add(record)
            last = record.attempts[-1]
            finals.append((last.parsed or "", record.target, last.score))

    add(200)
    outputs, references, scores = (list(column) for column in zip(*finals, strict=True))
    assert bleu.summary().text_score == corpus_bleu(outputs, references)
    assert mean.summary().text_score == mean_of_scores(outputs, references, scores)
    # Appends after a summary go on at the end of the file; memory stays flat meanwhile.
    before = len(finals)
    batch = [climb(i, level_of(rng), text=f"line {i}\nnext") for i in range(before, before + 2000)]
    kept = bytes_kept(mean, batch)
    for record in batch:
        bleu.add(record)
        finals.append((record.attempts[-1].parsed or "", record.target, record.attempts[-1].score))
    assert kept < 8_000, kept
    outputs, references, scores = (list(column) for column in zip(*finals, strict=True))
    assert mean.finals.read() == (outputs, references, scores)
    assert bleu.summary().text_score == corpus_bleu(outputs, references)
    assert mean.summary().text_score == mean_of_scores(outputs, references, scores)


def depth_node(node: str, depth: int, score: int | None, draw: int, kp: float) -> DepthRecord:
    attempt = Attempt(level=1, strategy="role", parsed="p", resolved=score == 5,
                      verdict=Verdict(score=score))  # fmt: skip
    return DepthRecord(
        sample_id=node, draw=draw, dataset="depthqa", model="m", strategies=["role"], m=1,
        penalty=PENALTY, target="ref", resolved_level=1 if score == 5 else None,
        hpi_score=None, attempts=[attempt], node_id=node, qid=f"q_{node}", depth=depth,
        predecessors=[], successors=[], judge_score=score, min_k_prob=kp,
    )  # fmt: skip


def test_a_depthqa_node_keeps_two_numbers_however_many_draws() -> None:
    rng = random.Random(5)
    t = Tally(dataset="depthqa", model="m", mode="standard", m=1, penalty=PENALTY)
    given: dict[str, list[int | None]] = {}
    depth_of: dict[str, int] = {}
    min_k: dict[int, list[float]] = {}
    for draw in range(6):
        for n in range(60):
            node, depth = f"n{n}", n % 3 + 1
            score = rng.choice([1, 2, 3, 4, 5, None])
            kp = rng.random()
            t.add(depth_node(node, depth, score, draw, kp))
            depth_of[node] = depth
            min_k.setdefault(depth, []).append(kp)
            if score is not None:  # a missing verdict is not scored at all
                given.setdefault(node, []).append(score)
    assert all(len(v) == 2 for v in t.node_scores.values())
    s = t.summary()
    means = depth_means({n: sum(v) / len(v) for n, v in given.items()}, depth_of)
    assert s.depth_scores == {str(d): means[d] for d in sorted(means)}
    assert s.min_k_prob == {
        str(d): {"n": len(v), "mean": statistics.fmean(v), "median": statistics.median(v)}
        for d, v in sorted(min_k.items())
    }


def test_a_resumed_runs_finished_keys_are_marks_not_tuples() -> None:
    from types import SimpleNamespace

    from hpt.orchestrator.resume import FinishedRecords
    from hpt.results import Cell

    samples = [SimpleNamespace(id=f"gsm8k-test-{i}") for i in range(4000)]
    cells = [Cell("gsm8k", "a", "standard"), Cell("gsm8k", "b", "standard", 0.5)]
    plans: Any = {cell: SimpleNamespace(samples=samples) for cell in cells}
    finished = FinishedRecords(plans)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(0, 4000, 2):  # as read back: each key built anew from a record
            finished.add(cells[0].key(f"gsm8k-test-{i}", 0))
            finished.add(cells[1].key(f"gsm8k-test-{i}", 1))
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # A key tuple and its own id string took ~220 bytes a record; the marks take one byte a
    # planned sample, the index of ids ~70 bytes a sample once for both cells.
    assert kept / 4000 < 100, kept / 4000
    finished.add(cells[0].key("gsm8k-test-0", 0))  # a duplicate counts once
    finished.add(Cell("gsm8k", "a", "standard").key("gone-7", 0))  # not in the plan
    assert len(finished) == 4001
    assert cells[0].key("gsm8k-test-2", 0) in finished
    assert cells[0].key("gsm8k-test-2", 1) not in finished  # another draw
    assert cells[0].key("gsm8k-test-3", 0) not in finished  # another sample
    assert cells[1].key("gsm8k-test-2", 0) not in finished
    assert cells[1].key("gsm8k-test-2", 1) in finished
    assert Cell("gsm8k", "c", "standard").key("gsm8k-test-2", 0) not in finished
    assert cells[0].key("gone-7", 0) in finished and cells[1].key("gone-7", 0) not in finished
