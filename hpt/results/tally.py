"""A cell's summary (HPI, accuracy, levels, tokens, pass@k, readings) and the running tally
that computes it: pure functions over sample records, streamed, in flat memory."""

from __future__ import annotations

import json
import statistics
import tempfile
import weakref
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, Field

from hpt.errors import StorageError
from hpt.results.chance import ChanceLevels, chance_levels, hpi_skill
from hpt.results.depth import (
    Discrepancy,
    backward_discrepancy,
    depth_means,
    depth_scores,
    forward_discrepancy,
)
from hpt.results.info import TaskInfo
from hpt.results.records import Cell, DepthRecord, SampleRecord
from hpt.results.scoring import CORPUS_RULES, pass_at_k, report_ks, sample_score, unjudged
from hpt.types import unset


class ReadingSummary(BaseModel):
    """How another reader ("strict", "rule") compares with the one that decided the climb,
    over every attempt that both read."""

    attempts: int = 0
    # Attempts where the two readers took different answers ...
    disagreements: int = 0
    disagreement_rate: float | None = None
    # ... and where that changed whether the attempt resolved.
    resolved_flips: int = 0
    # Standard mode: level-1 accuracy had this reader decided (level 1 is always tried).
    level1_accuracy: float | None = None


class Summary(BaseModel):
    """A cell's figures, as summary.json saves them: the cell's identity is its first seven
    fields (``cell``)."""

    dataset: str
    model: str
    mode: str
    # Translation/summarisation: the score that resolved a sample.
    threshold: float | None = None
    # A dataset's own run dimension (DepthQA's inference mode).
    variant: str | None = None
    # Reasoning models: the effort and thinking budget the cell asked for (None: not set).
    reasoning_effort: str | None = Field(None, exclude_if=unset)
    thinking_budget: int | None = Field(None, exclude_if=unset)
    # The cell's ladder, level 1 first (m names); empty for summaries saved before hpt kept it.
    strategies: list[str] = []
    # Samples scored (resolved or unresolved). Not scored: samples that ended in an error and
    # climbs a judge left without a valid score (``judge_missing``); HPI, accuracy, level
    # counts and every mean rest on these n alone, and are None when n is 0.
    n: int
    samples: int
    m: int
    penalty: float
    hpi: float | None
    accuracy: float | None
    # Standard mode: the single prompt's accuracy (level 1 is always tried). None in adaptive
    # mode, where level 1 is asked only when the selector picks it.
    level1_accuracy: float | None
    # What a uniform random guesser scores on the same samples and ladder (each level an
    # independent guess among a sample's options): the floor to read the three above against.
    # None where answers are open-ended, in adaptive mode (the selector, not the task, sets
    # what a guess costs there), or for records written before hpt recorded options.
    chance_hpi: float | None = None
    chance_accuracy: float | None = None
    chance_level1_accuracy: float | None = None
    # The HPI with chance at 0 and everything resolved at level 1 at 1; negative: below chance.
    hpi_skill: float | None = None
    level_counts: dict[int, int]
    unresolved: int
    errors: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    # Of ``completion_tokens``, those spent thinking, where the provider counted them (OpenAI's
    # reasoning_tokens); None: no call of the cell reported any.
    reasoning_tokens: int | None = Field(None, exclude_if=unset)
    # Of ``prompt_tokens``, those read from and written to the provider's prompt cache, where
    # the provider counted them; None: no call of the cell reported any. The cached share of
    # input is theirs over the calls sent (not answered by hpt's response cache: a warm rerun
    # sends nothing and has no share of its own).
    cache_read_tokens: int | None = Field(None, exclude_if=unset)
    cache_write_tokens: int | None = Field(None, exclude_if=unset)
    cached_input_share: float | None = Field(None, exclude_if=unset)
    # Attempts cut off at the token limit (unresolved because of it), by level; each one's
    # record says whether inside its thinking or its answer (``Attempt.truncated``).
    truncated: dict[int, int] = Field(default_factory=dict, exclude_if=lambda cut: not cut)
    # Attempts made (levels climbed, in every record, errors included): what ``truncated`` is
    # a share of. 0 in summaries saved before hpt counted them.
    attempts: int = 0
    # Of ``calls``, those no model call was made for: answered from the response cache, or
    # shared with an identical request in flight (another threshold cell's; ``Call.shared``).
    cached_calls: int = 0
    # Of ``calls``, those answered through a provider's Batch API (billed at batch prices).
    batched_calls: int = Field(0, exclude_if=lambda n: not n)
    # Translation and summarisation: the dataset-level score over each scored sample's final
    # output (the resolving attempt, else the last) -- corpus BLEU for IWSLT, mean ROUGE-L F
    # for SAMSum, on a 0-1 scale -- as reported beside the HPI in the paper's table 3.
    text_metric: str | None = None
    text_score: float | None = None
    # With --samples-per-task n > 1: unbiased pass@k over each sample's scored climbs, for
    # the single prompt ("level1@k") and for the whole ladder ("hpf@k"), k <= n.
    pass_at_k: dict[str, float] = {}
    # Adaptive HPF: selector turns, and those that named no valid level.
    selector_turns: int = 0
    hallucinations: int = 0
    # Selector turns cut off at the token limit before naming a level (not hallucinations).
    selector_truncated: int = Field(0, exclude_if=lambda cut: not cut)
    hallucination_rate: float | None = None
    # Other readings of the same completions, by reader name (GSM8K's "strict" stated-answer
    # reader; the "rule" reader when --extractor-model decides).
    readings: dict[str, ReadingSummary] = {}
    # DepthQA: the mean judge score per depth ({"1": ..., "2": ..., "3": ...}; null for a depth
    # without scores) and the nodes each mean rests on, forward and backward discrepancy
    # ({"d1_d2", "d2_d3", "overall"}), and the climbs a judge left without a valid score (not
    # scored: outside n, the HPI, accuracy and every mean; never 0).
    depth_scores: dict[str, float | None] | None = None
    depth_nodes: dict[str, int] | None = None
    forward_discrepancy: dict[str, Discrepancy] | None = None
    backward_discrepancy: dict[str, Discrepancy] | None = None
    judge_missing: int | None = None
    # DepthQA: Min-K% of the predictions per depth ({"1": {"n", "mean", "median"}, ...}),
    # where the backend gave logprobs.
    min_k_prob: dict[str, dict[str, float | None]] | None = None

    @property
    def cell(self) -> Cell:
        return Cell(self.dataset, self.model, self.mode, self.threshold, self.variant,
                    self.reasoning_effort, self.thinking_budget)  # fmt: skip

    @property
    def cut_off(self) -> tuple[int, int]:
        """Model calls that decide the climb, cut off at the token limit, and made: attempts
        and selector turns."""
        return (sum(self.truncated.values()) + self.selector_truncated,
                self.attempts + self.selector_turns)  # fmt: skip

    @property
    def truncated_share(self) -> float | None:
        """The share of attempts and selector turns cut off at the token limit; None: none
        counted (a summary saved before hpt counted attempts)."""
        cut, made = self.cut_off
        return cut / made if self.attempts and made else None


class Tally:
    """Running totals; ``summary()`` at any point equals summarize() over the records so far."""

    def __init__(
        self,
        *,
        dataset: str,
        model: str,
        mode: str,
        m: int,
        penalty: float,
        threshold: float | None = None,
        track_draws: bool = True,
        info: TaskInfo | None = None,
        variant: str | None = None,
        strategies: Sequence[str] = (),
        reasoning_effort: str | None = None,
        thinking_budget: int | None = None,
    ) -> None:
        self.cell = Cell(dataset, model, mode, threshold, variant, reasoning_effort,
                         thinking_budget)  # fmt: skip
        self.m, self.penalty = m, penalty
        self.strategies = list(strategies)
        self.info = info
        # What grows with the run is kept only where a metric needs it, and then compactly or
        # on disk: memory stays flat (bench/scale.py, tests/test_scale_memory.py).
        self._keep_finals = info is not None and info.corpus_rule is not None
        self._track_draws = track_draws
        self.level_counts = dict.fromkeys(range(1, m + 1), 0)
        self.samples = self.unresolved = self.errors = self.judge_missing = 0
        self.selector_turns = self.hallucinations = self.selector_truncated = 0
        self.score_sum = 0.0
        self.calls = self.cached_calls = self.prompt_tokens = self.completion_tokens = 0
        self.reasoning_tokens: int | None = None
        self.cache_read_tokens: int | None = None
        self.cache_write_tokens: int | None = None
        # Prompt tokens and provider cache reads of the calls sent (an identical call in
        # flight shared counts: it was sent for this cell too), for the cached share.
        self.sent_prompt_tokens = 0
        self.sent_cache_read_tokens: int | None = None
        self.batched_calls = 0
        self.truncated: dict[int, int] = {}
        self.attempts = 0
        # (final output, reference, its score) per scored sample, for text metrics: on disk
        self.finals = Finals()
        # sample id -> (scored climbs, resolved at level 1, resolved at any level); each
        # distinct triple is one shared tuple (``_triples``), so a sample costs a dict slot
        self.draws: dict[str, tuple[int, int, int]] = {}
        self._triples: dict[tuple[int, int, int], tuple[int, int, int]] = {}
        # reader -> [attempts read, disagreements, resolved flips, level-1 resolutions it would
        # add (+) or take away (-)]
        self.readings: dict[str, list[int]] = {}
        # DepthQA: node -> (sum, count) of its scored draws' judge scores (a draw without a
        # score adds nothing), and its edges; Min-K% values by depth
        self.node_scores: dict[str, tuple[int, int]] = {}
        self.node_depth: dict[str, int] = {}
        self.node_preds: dict[str, list[str]] = {}
        self.node_succs: dict[str, list[str]] = {}
        self.min_k: dict[int, array[float]] = {}
        # Summed chance levels of the scored samples; None once one has no option count.
        self.chance_sums: list[float] | None = [0.0, 0.0, 0.0] if mode == "standard" else None
        self._chance_by_k: dict[int, ChanceLevels] = {}

    # The cell's parts, as observers (RunObserver.recorded) have read them from the tally.
    @property
    def dataset(self) -> str:
        return self.cell.dataset

    @property
    def model(self) -> str:
        return self.cell.model

    @property
    def mode(self) -> str:
        return self.cell.mode

    @property
    def threshold(self) -> float | None:
        return self.cell.threshold

    @property
    def variant(self) -> str | None:
        return self.cell.variant

    @classmethod
    def of(cls, record: SampleRecord, info: TaskInfo | None = None) -> Tally:
        """An empty tally for the cell ``record`` belongs to."""
        return cls(
            dataset=record.dataset,
            model=record.model,
            mode=record.mode,
            m=record.m,
            penalty=record.penalty,
            threshold=record.threshold,
            info=info,
            variant=record.variant,
            strategies=record.strategies,
            reasoning_effort=record.reasoning_effort,
            thinking_budget=record.thinking_budget,
        )

    def add(self, record: SampleRecord) -> None:
        self.samples += 1
        self.selector_turns += len(record.selections)
        self.hallucinations += sum(s.hallucinated for s in record.selections)
        self.selector_truncated += sum(s.truncated for s in record.selections)
        self.calls += record.calls
        self.cached_calls += record.cached_calls
        self.prompt_tokens += record.prompt_tokens
        self.completion_tokens += record.completion_tokens
        reasoning = record.reasoning_tokens
        if reasoning is not None:
            self.reasoning_tokens = (self.reasoning_tokens or 0) + reasoning
        for call in record.all_calls():
            usage = call.usage
            self.batched_calls += call.batched
            if usage.cache_read_tokens is not None:
                self.cache_read_tokens = (self.cache_read_tokens or 0) + usage.cache_read_tokens
            if usage.cache_write_tokens is not None:
                self.cache_write_tokens = (self.cache_write_tokens or 0) + usage.cache_write_tokens
            if call.cached and not call.shared:
                continue
            self.sent_prompt_tokens += usage.prompt_tokens
            if usage.cache_read_tokens is not None:
                read = (self.sent_cache_read_tokens or 0) + usage.cache_read_tokens
                self.sent_cache_read_tokens = read
        self.attempts += len(record.attempts)
        for attempt in record.attempts:
            if attempt.truncated is not None:
                self.truncated[attempt.level] = self.truncated.get(attempt.level, 0) + 1
        if not self.strategies:
            self.strategies = list(record.strategies)
        if record.error is not None:
            self.errors += 1
            return
        if isinstance(record, DepthRecord):
            # The edges come with every node, scored or not; Min-K% measures the prediction,
            # which exists whatever the judge said.
            self.node_depth[record.node_id] = record.depth
            self.node_preds[record.node_id] = record.predecessors
            self.node_succs[record.node_id] = record.successors
            if record.min_k_prob is not None:
                self.min_k.setdefault(record.depth, array("d")).append(record.min_k_prob)
        if unjudged(record.attempts):
            self.judge_missing += 1
            return
        if isinstance(record, DepthRecord):
            total, count = self.node_scores.get(record.node_id, (0, 0))
            if record.judge_score is not None:
                total, count = total + record.judge_score, count + 1
            self.node_scores[record.node_id] = total, count
        for attempt in record.attempts:
            for name, other in attempt.alternatives.items():
                counts = self.readings.setdefault(name, [0, 0, 0, 0])
                counts[0] += 1
                counts[1] += other.parsed != attempt.parsed
                counts[2] += other.resolved != attempt.resolved
                # How this reader would change level 1's resolutions: a reader that reads only
                # some attempts (DSPy's first reply, where the adapter fell back) leaves the
                # rest as the deciding reader had them.
                if attempt.level == 1 and attempt.iteration is None:
                    counts[3] += other.resolved - attempt.resolved
        self._add_chance(record.options)
        if record.resolved_level is None:
            self.unresolved += 1
        else:
            self.level_counts[record.resolved_level] += 1
        self.score_sum += sample_score(
            record.mode, record.resolved_level, record.iteration, self.m, self.penalty
        )
        if self._track_draws:
            climbs, level1, anywhere = self.draws.get(record.sample_id, (0, 0, 0))
            drawn = (climbs + 1, level1 + (record.resolved_level == 1),
                     anywhere + (record.resolved_level is not None))  # fmt: skip
            self.draws[record.sample_id] = self._triples.setdefault(drawn, drawn)
        final = record.attempts[-1] if record.attempts else None
        if final is not None and self._keep_finals:
            self.finals.append(final.parsed or "", record.target, final.score)

    def _add_chance(self, options: int | None) -> None:
        if self.chance_sums is None:
            return
        if options is None:
            self.chance_sums = None
            return
        chance = self._chance_by_k.get(options)
        if chance is None:
            chance = self._chance_by_k[options] = chance_levels(options, self.m, self.penalty)
        self.chance_sums[0] += chance.hpi
        self.chance_sums[1] += chance.accuracy
        self.chance_sums[2] += chance.level1_accuracy

    def chance(self) -> dict[str, float | None]:
        """The summary's chance fields: means over the scored samples."""
        if self.chance_sums is None or not self.n:
            return {}
        hpi, accuracy, level1 = (total / self.n for total in self.chance_sums)
        return {
            "chance_hpi": hpi,
            "chance_accuracy": accuracy,
            "chance_level1_accuracy": level1,
            "hpi_skill": hpi_skill(self.hpi, hpi),
        }

    @property
    def n(self) -> int:
        return self.samples - self.errors - self.judge_missing

    @property
    def hpi(self) -> float | None:
        return self.score_sum / self.n if self.n else None

    @property
    def cached_input_share(self) -> float | None:
        """The share of the input tokens sent that the provider read from its prompt cache;
        None: no call sent reported cache reads."""
        read, sent = self.sent_cache_read_tokens, self.sent_prompt_tokens
        return None if read is None or not sent else read / sent

    def text_score(self) -> tuple[str | None, float | None]:
        info = self.info
        if info is None or info.corpus_rule is None or not self.finals.count:
            return None, None
        rule = CORPUS_RULES.get(info.corpus_rule)
        if rule is None:  # a plugin's rule, and the plugin is not loaded: no score, no crash
            return info.corpus_metric, None
        outputs, references, scores = self.finals.read()
        return info.corpus_metric, rule(outputs, references, scores)

    def pass_at(self) -> dict[str, float]:
        most = max((c[0] for c in self.draws.values()), default=0)
        if most < 2:
            return {}
        out: dict[str, float] = {}
        # Adaptive: no single prompt is asked of every sample, so no level1@k.
        columns = (("hpf", 2),) if self.cell.mode == "adaptive" else (("level1", 1), ("hpf", 2))
        for k in report_ks(most):
            eligible = [c for c in self.draws.values() if c[0] >= k]
            for name, col in columns:
                values = [pass_at_k(c[0], c[col], k) for c in eligible]
                out[f"{name}@{k}"] = sum(values) / len(values)
        return out

    def reading_summaries(self) -> dict[str, ReadingSummary]:
        standard = self.cell.mode == "standard"
        return {
            name: ReadingSummary(
                attempts=read,
                disagreements=differ,
                disagreement_rate=differ / read if read else None,
                resolved_flips=flips,
                level1_accuracy=(
                    (self.level_counts.get(1, 0) + level1) / self.n if standard and self.n else None
                ),
            )
            for name, (read, differ, flips, level1) in sorted(self.readings.items())
        }

    def summary(self) -> Summary:
        n = self.n
        resolved = sum(self.level_counts.values())
        metric, score = self.text_score()
        standard = self.cell.mode == "standard"
        return Summary(
            **asdict(self.cell),
            strategies=self.strategies,
            n=n,
            samples=self.samples,
            m=self.m,
            penalty=self.penalty,
            hpi=self.hpi,
            accuracy=resolved / n if n else None,
            level1_accuracy=self.level_counts.get(1, 0) / n if n and standard else None,
            level_counts=dict(self.level_counts),
            unresolved=self.unresolved,
            errors=self.errors,
            calls=self.calls,
            cached_calls=self.cached_calls,
            batched_calls=self.batched_calls,
            text_metric=metric,
            text_score=score,
            pass_at_k=self.pass_at(),
            selector_turns=self.selector_turns,
            hallucinations=self.hallucinations,
            selector_truncated=self.selector_truncated,
            hallucination_rate=(
                self.hallucinations / self.selector_turns if self.selector_turns else None
            ),
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            reasoning_tokens=self.reasoning_tokens,
            cache_read_tokens=self.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens,
            cached_input_share=self.cached_input_share,
            truncated=dict(sorted(self.truncated.items())),
            attempts=self.attempts,
            readings=self.reading_summaries(),
            **self.chance(),
            **self.depth_summary(),
        )

    def depth_summary(self) -> dict[str, Any]:
        if not self.node_depth:
            return {"judge_missing": self.judge_missing} if self.judge_missing else {}
        # A node's score: the mean over its scored draws; a node no draw of which was scored
        # has none, and is in no mean and no discrepancy.
        scores = {node: total / count if count else None
                  for node, (total, count) in self.node_scores.items()}  # fmt: skip
        means = depth_means(scores, self.node_depth)
        nodes = depth_scores(scores, self.node_depth)
        return {
            "depth_scores": {str(d): v for d, v in sorted(means.items())},
            "depth_nodes": {str(d): len(v) for d, v in sorted(nodes.items())},
            "forward_discrepancy": forward_discrepancy(scores, self.node_depth, self.node_preds),
            "backward_discrepancy": backward_discrepancy(scores, self.node_depth, self.node_succs),
            "judge_missing": self.judge_missing,
            "min_k_prob": {str(d): _spread(self.min_k.get(d, array("d"))) for d in (1, 2, 3)},
        }


class Finals:
    """Each scored sample's final output, its reference and its score, for a corpus metric,
    appended to an anonymous temporary file (gone with the tally, or the process) and read
    back whole when the metric is computed: a run's memory does not hold its outputs."""

    def __init__(self) -> None:
        self.count = 0
        self._file: IO[bytes] | None = None

    def append(self, output: str, reference: str, score: float | None) -> None:
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile()
                weakref.finalize(self, self._file.close)
            # JSON keeps a str and a float's repr exactly; one line each (newlines escaped).
            self._file.write(json.dumps([output, reference, score]).encode() + b"\n")
        except OSError as exc:
            raise StorageError(
                "a corpus metric's outputs", Path(tempfile.gettempdir()), exc
            ) from None
        self.count += 1

    def read(self) -> tuple[list[str], list[str], list[float | None]]:
        outputs: list[str] = []
        references: list[str] = []
        scores: list[float | None] = []
        if self._file is None:
            return outputs, references, scores
        self._file.seek(0)
        for line in self._file:
            output, reference, score = json.loads(line)
            outputs.append(output)
            references.append(reference)
            scores.append(score)
        self._file.seek(0, 2)  # appends go on at the end
        return outputs, references, scores


def _spread(values: Sequence[float]) -> dict[str, float | None]:
    return {
        "n": len(values),
        "mean": statistics.fmean(values) if values else None,
        "median": statistics.median(values) if values else None,
    }


def summarize(
    records: Iterable[SampleRecord],
    *,
    dataset: str,
    model: str,
    mode: str,
    m: int,
    penalty: float,
    threshold: float | None = None,
    info: TaskInfo | None = None,
) -> Summary:
    tally = Tally(
        dataset=dataset,
        model=model,
        mode=mode,
        m=m,
        penalty=penalty,
        threshold=threshold,
        info=info,
    )
    for record in records:
        tally.add(record)
    return tally.summary()


def summarize_cells(
    records: Iterable[SampleRecord], infos: Mapping[str, TaskInfo] | None = None
) -> list[Summary]:
    """One summary per cell (dataset, model, mode, threshold), in ``Cell.order``; reads the
    records once, as a stream. ``infos``: the datasets' descriptions (run.json's)."""
    tallies: dict[Cell, Tally] = {}
    for record in records:
        tally = tallies.get(record.cell)
        if tally is None:
            info = (infos or {}).get(record.dataset)
            tally = tallies[record.cell] = Tally.of(record, info)
        tally.add(record)
    return [tallies[cell].summary() for cell in sorted(tallies, key=Cell.order)]
