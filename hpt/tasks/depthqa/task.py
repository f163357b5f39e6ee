"""DepthQA (kaist-ai/DepthQA): question graphs of depth 1-3, answers judged 1-5 by an LLM
against a reference answer; a node is resolved when its judge score is at least 4.

Samples are graph nodes (several nodes may share one question). The graph comes from its
``graph`` argument (``--graph DIR``), else the hub; offline, ``DATA_DIR/depthqa/questions.jsonl``
holds the questions without edges, enough for zero-shot runs and depth means."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from hpt.backends import Backend, GenerationParams
from hpt.results.penalties import convention
from hpt.results.records import Attempt, Verdict
from hpt.tasks import tables
from hpt.tasks.base import Check, DatasetError, Sample, Task
from hpt.tasks.depthqa.answering import DEPTH_MODES, AnswerMemo, DepthJudge, DepthPrompts
from hpt.tasks.depthqa.graph import (
    QuestionGraph,
    load_graph_dir,
    load_graph_hub,
    load_questions_only,
)
from hpt.tasks.sources import require_file

# A judge score that resolves a node (the paper counts 4 and 5 as a correct answer).
RESOLVED_AT = 4
# An empty answer's score: the rubric's lowest ("largely incorrect"), given without a judge.
EMPTY_SCORE = 1
# The modes that show a node its predecessors.
GRAPH_MODES = ("prompt-gold", "prompt-pred", "multi-turn")
DepthMode = Literal["zero-shot", "prompt-gold", "prompt-pred", "multi-turn"]


def _modes(value: Any) -> Any:
    """One mode or several (a list, or names joined by commas), each also spelt with
    underscores (``depthqa.mode=multi_turn``), once each."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return value
    spelt = [v.strip().replace("_", "-") if isinstance(v, str) else v for v in value]
    return list(dict.fromkeys(spelt))


class DepthQAArgs(BaseModel):
    """DepthQA's arguments (--task-arg depthqa.FIELD=VALUE; --depth-mode and --graph are
    short for its two)."""

    model_config = ConfigDict(extra="forbid")

    # The inference modes, one cell each; none: zero-shot, unless --strategies names a ladder.
    mode: Annotated[list[DepthMode], BeforeValidator(_modes)] = Field(default_factory=list)
    # The question graph: a directory of questions.jsonl, nodes.jsonl and node_to_q.jsonl;
    # None: the hub's (offline, --data-dir's questions without the graph).
    graph: Path | None = None


class DepthQA(Task):
    name = "depthqa"
    title = "DepthQA"
    hub_id = "kaist-ai/DepthQA"
    hub_split = "test"
    # HPT's table 4 has no human-annotated penalty for DepthQA: an unresolved node costs
    # one level beyond the ladder until `hpt annotate depthqa` measures one.
    penalty = 1.0
    penalty_source = convention("hpt's convention: one level beyond the ladder")
    kind = "depth"
    metric = "mean judge score"
    report_table = tables.DEPTH
    extra_report_tables = (tables.FORWARD, tables.BACKWARD, tables.MIN_K)
    record_kind = "depth"
    needs_judge = True
    Args = DepthQAArgs
    args: DepthQAArgs
    # The paper's inference settings (section 3).
    default_params: ClassVar[dict[str, Any]] = {
        "temperature": 1.0, "top_p": 0.9, "max_tokens": 1024, "repetition_penalty": 1.03,
    }  # fmt: skip

    def __init__(self, data_dir: Path | None = None, *, args: DepthQAArgs | None = None) -> None:
        super().__init__(data_dir, args=args)
        self.depth_prompts = DepthPrompts(self.prompts)
        # Shared by the copies a run makes per cell: an answer is asked once per run.
        self.answers = AnswerMemo()
        self.judge: DepthJudge | None = None
        self._graph: QuestionGraph | None = None
        self._components: dict[str, str] | None = None

    @property
    def graph(self) -> QuestionGraph:
        if self._graph is None:
            self._graph = self.load_graph()
        return self._graph

    @property
    def questions_only(self) -> bool:
        """The offline questions file: no graph at all (a graph directory may simply have no
        edges: its modes then ask the bare questions)."""
        return self.args.graph is None and self.data_dir is not None

    def load_graph(self) -> QuestionGraph:
        if self.args.graph is not None:
            return load_graph_dir(self.args.graph)
        if self.data_dir is not None:
            return load_questions_only(
                require_file(self.data_dir, "depthqa/questions.jsonl", self.name)
            )
        return load_graph_hub(self.hub_id)

    def load_samples(self) -> list[Sample]:
        graph = self.graph
        samples = []
        for node in graph.order():
            question = graph.question_of(node)
            samples.append(Sample(
                id=node, fields={"question": question.question}, target=question.answer,
                meta={"qid": question.qid, "depth": str(graph.depth_of(node)),
                      "domain": question.domain or ""},
            ))  # fmt: skip
        return samples

    def load_exemplar_pool(self) -> list[Sample]:
        return []

    def choose(self, samples: Sequence[Sample], limit: int | None, seed: int) -> list[Sample]:
        """``limit`` of the deepest nodes (seeded), with all their ancestors, so that every
        chosen node's predecessors are answered and scored too."""
        if limit is None or limit >= len(samples):
            return list(samples)
        deepest = max(self.graph.depth_of(s.id) for s in samples)
        top = sorted(s.id for s in samples if self.graph.depth_of(s.id) == deepest)
        chosen = random.Random(seed).sample(top, min(limit, len(top)))
        keep = set(self.graph.subgraph(chosen).nodes)
        return [s for s in samples if s.id in keep]

    def shard_key(self, sample: Sample) -> str:
        """The node's component of the graph: a node reuses its predecessors' answers and
        shares one with every node asking its question (``answers``), and one process must
        ask each of them once, as a run without shards does."""
        if self._components is None:
            self._components = self.graph.components()
        return self._components.get(sample.id, sample.id)

    def variants(self, strategies: Sequence[str],
                 ladder_given: bool) -> list[tuple[str | None, list[str]]]:  # fmt: skip
        """The depth modes asked for (``mode``), one single-level ladder each; the ladder
        given with --strategies as one more cell; zero-shot when neither was."""
        modes = list(self.args.mode) or ([] if ladder_given else ["zero-shot"])
        if self.questions_only:
            needs = [m for m in modes if m in GRAPH_MODES]
            if needs or (ladder_given and any(s.startswith("depth_") and s != "depth_zero_shot"
                                              for s in strategies)):  # fmt: skip
                raise DatasetError(
                    f"depthqa: {', '.join(needs) or 'these depth strategies'} need the question "
                    f"graph, which the offline questions file lacks; pass --graph DIR (a graph "
                    f"directory: questions.jsonl, nodes.jsonl, node_to_q.jsonl), make one with "
                    f"hpt decompose, or use --depth-mode zero-shot"
                )
        cells: list[tuple[str | None, list[str]]] = [(m, [DEPTH_MODES[m]]) for m in modes]
        if ladder_given:
            cells.append((None, list(strategies)))
        return cells

    def bind_judge(self, judge: Backend, params: GenerationParams) -> None:
        self.judge = DepthJudge(judge, params, self.prompts, self.answers)

    def parse(self, completion: str, sample: Sample) -> str | None:
        return completion.strip() or None

    def cut_check(self) -> Check:
        """An answer cut off at the token limit, like an empty one, scores by rule."""
        return _by_rule("cut off at the token limit")

    async def acheck(self, sample: Sample, completion: str, cache_seed: str = "") -> Check:
        if self.judge is None:
            raise RuntimeError("depthqa: bind_judge() before checking")
        prediction = completion.strip()
        if not prediction:
            return _by_rule("empty answer")
        question = self.graph.question_of(sample.id)
        verdict, calls = await self.judge.judge(
            question.question, prediction, question.answer, f"depthqa-judge#{cache_seed}"
        )
        if verdict.score is None:
            # The record is not scored (scoring.unjudged) and a ladder stops here.
            detail = f"no valid judge score in {len(verdict.replies)} replies: missing, not scored"
        else:
            detail = f"judge score {verdict.score}/5"
        return Check(
            parsed=prediction,
            resolved=verdict.score is not None and verdict.score >= RESOLVED_AT,
            detail=detail,
            verdict=verdict,
            calls=calls,
        )

    def record_extras(self, sample: Sample, attempts: Sequence[Attempt]) -> dict[str, Any]:
        """The node's fields of its record: from the resolving attempt, else the last."""
        graph = self.graph
        final = next((a for a in attempts if a.resolved), attempts[-1] if attempts else None)
        answer = None
        if final is not None:
            answer = next((c for c in reversed(final.calls) if c.purpose == "answer"), None)
        verdict = final.verdict if final is not None else None
        min_k = final.notes.get("min_k_prob") if final is not None else None
        return {
            "node_id": sample.id,
            "qid": graph.question_of(sample.id).qid,
            "depth": graph.depth_of(sample.id),
            "predecessors": sorted(graph.predecessors(sample.id)),
            "successors": sorted(graph.successors(sample.id)),
            "prompt": answer.messages if answer else [],
            "prediction": final.completion if final is not None else None,
            "judge_score": verdict.score if verdict else None,
            "feedback": verdict.feedback if verdict else None,
            "judge_replies": verdict.replies if verdict else [],
            "min_k_prob": float(min_k) if min_k else None,
        }


def _by_rule(what: str) -> Check:
    """Nothing (whole) to judge, but a measured failure: the rubric's lowest score, by rule,
    so it counts in the depth means rather than vanishing from them."""
    note = f"{what}: score {EMPTY_SCORE}/5 by rule (the judge was not asked)"
    return Check(parsed=None, resolved=False, detail=note,
                 verdict=Verdict(score=EMPTY_SCORE, feedback=note))  # fmt: skip
