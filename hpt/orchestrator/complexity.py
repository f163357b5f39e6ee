"""``hpt judge-strategies``: strategy complexity by LLM-as-a-judge (HPT appendix C).

Each strategy is applied to a sample of each dataset; the judge model sees the prompt(s),
the generated answer and the correct answer (C.3) under the C.1 system prompt and returns
the four 1-5 scores. A verdict that is not four integers in 1..5 is asked for again, then
recorded as unparseable. The result is the data behind the paper's figures 5 and 6: mean
scores per strategy and criterion, as a table, ``judge_summary.json`` and an SVG chart.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from hpt.backends import Backend, BackendError, GenerationParams, Message
from hpt.graphs.strategies import STRATEGIES, StrategyContext
from hpt.orchestrator.models import ModelBackends, ModelSettings
from hpt.prompts import PromptSet
from hpt.tasks import Sample, Task

CRITERIA = ("score1", "score2", "score3", "score4")
JUDGE_ATTEMPTS = 3
_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)


class Verdict(BaseModel):
    score1: int = Field(ge=1, le=5)
    score2: int = Field(ge=1, le=5)
    score3: int = Field(ge=1, le=5)
    score4: int = Field(ge=1, le=5)


def parse_verdict(reply: str) -> Verdict | None:
    """The four scores from a judge's reply: the first JSON object that validates."""
    for block in _OBJECT.findall(reply):
        try:
            return Verdict.model_validate(json.loads(block))
        except (ValueError, ValidationError):
            continue
    return None


class Judgement(BaseModel):
    dataset: str
    sample_id: str
    strategy: str
    prompts: list[str]
    answer: str | None
    target: str
    verdict: Verdict | None
    replies: list[str]
    error: str | None = None


class JudgeSummary(BaseModel):
    criteria: dict[str, str]
    # strategy -> criterion -> mean score over every judged sample of every dataset
    means: dict[str, dict[str, float]]
    judged: dict[str, int]
    unparseable: dict[str, int]


async def judge_one(
    task: Task,
    sample: Sample,
    strategy: str,
    model: Backend,
    judge: Backend,
    params: GenerationParams,
    pool: Sequence[Sample],
    prompts: PromptSet,
) -> Judgement:
    ctx = StrategyContext(
        sample=sample, task=task, level=0, model=model, knowledge_model=model,
        params=params, exemplar_pool=pool, previous=[], cache_seed=f"{sample.id}#judge",
    )  # fmt: skip
    record = Judgement(dataset=task.name, sample_id=sample.id, strategy=strategy, prompts=[],
                       answer=None, target=sample.target, verdict=None, replies=[])  # fmt: skip
    try:
        record.answer = await STRATEGIES[strategy](ctx)
    except BackendError as exc:
        record.error = f"the strategy's model call failed: {exc}"
        return record
    record.prompts = [c.messages[-1].content for c in ctx.calls]
    user = prompts.render("judge", prompts.text("judge", "user"), {
        "strategy": strategy,
        "prompts": "\n\n".join(f"[{i}] {p}" for i, p in enumerate(record.prompts, 1)),
        "answer": record.answer, "target": sample.target,
    })  # fmt: skip
    messages = [Message(role="system", content=prompts.text("judge", "system")),
                Message(role="user", content=user)]  # fmt: skip
    for attempt in range(JUDGE_ATTEMPTS):
        seed = f"{sample.id}#judge-{strategy}-{attempt}"
        try:
            reply = (await judge.complete(messages, params, cache_seed=seed)).text
        except BackendError as exc:
            record.error = f"the judge's call failed: {exc}"
            return record
        record.replies.append(reply)
        record.verdict = parse_verdict(reply)
        if record.verdict is not None:
            return record
        messages = [*messages, Message(role="assistant", content=reply),
                    Message(role="user", content=prompts.text("judge", "retry"))]  # fmt: skip
    record.error = f"no valid verdict in {JUDGE_ATTEMPTS} replies"
    return record


def summarize_judgements(
    records: Sequence[Judgement], strategies: Sequence[str], prompts: PromptSet
) -> JudgeSummary:
    criteria = dict(prompts.section("judge")["criteria"])
    means: dict[str, dict[str, float]] = {}
    judged: dict[str, int] = {}
    unparseable: dict[str, int] = {}
    for strategy in strategies:
        mine = [r for r in records if r.strategy == strategy]
        verdicts = [r.verdict for r in mine if r.verdict is not None]
        judged[strategy] = len(verdicts)
        unparseable[strategy] = sum(r.verdict is None and bool(r.replies) for r in mine)
        if verdicts:
            means[strategy] = {
                c: sum(getattr(v, c) for v in verdicts) / len(verdicts) for c in CRITERIA
            }
    return JudgeSummary(criteria=criteria, means=means, judged=judged, unparseable=unparseable)


def svg_chart(summary: JudgeSummary) -> str:
    """Grouped bars: mean score (0-5) per strategy, one bar per criterion."""
    colours = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")
    strategies = list(summary.means)
    bar, gap, top, height, left = 18, 24, 30, 200, 40
    group = bar * len(CRITERIA) + gap
    width = left + group * max(len(strategies), 1) + 220
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 90}" '
        'font-family="sans-serif" font-size="11">',
        f'<text x="{left}" y="18" font-size="13">Mean judge score per strategy (1-5)</text>',
    ]
    for tick in range(6):
        y = top + height - tick * height / 5
        parts.append(f'<line x1="{left}" x2="{width - 220}" y1="{y}" y2="{y}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 14}" y="{y + 4}">{tick}</text>')
    for i, strategy in enumerate(strategies):
        x0 = left + i * group + gap / 2
        for j, criterion in enumerate(CRITERIA):
            value = summary.means[strategy][criterion]
            h = value / 5 * height
            parts.append(
                f'<rect x="{x0 + j * bar}" y="{top + height - h:.1f}" width="{bar - 2}" '
                f'height="{h:.1f}" fill="{colours[j]}"><title>{strategy} {criterion}: '
                f"{value:.2f}</title></rect>"
            )
        parts.append(
            f'<text x="{x0}" y="{top + height + 16}" transform="rotate(20 {x0} '
            f'{top + height + 16})">{strategy}</text>'
        )
    for j, criterion in enumerate(CRITERIA):
        y = top + 10 + j * 18
        x = width - 210
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{colours[j]}"/>')
        parts.append(f'<text x="{x + 14}" y="{y}">{summary.criteria[criterion]}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


async def judge_strategies(
    tasks: Sequence[tuple[Task, list[Sample], list[Sample]]],
    strategies: Sequence[str],
    model: Backend,
    judge: Backend,
    params: GenerationParams,
    out: Path,
    concurrency: int = 8,
) -> JudgeSummary:
    slots = asyncio.Semaphore(concurrency)
    prompts = await asyncio.to_thread(PromptSet.load, "judge")

    async def one(task: Task, sample: Sample, strategy: str, pool: list[Sample]) -> Judgement:
        async with slots:
            return await judge_one(task, sample, strategy, model, judge, params, pool, prompts)

    jobs = [one(t, s, name, pool) for t, samples, pool in tasks for s in samples
            for name in strategies]  # fmt: skip
    records = await asyncio.gather(*jobs)
    summary = summarize_judgements(records, strategies, prompts)
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    lines = "".join(r.model_dump_json() + "\n" for r in records)
    await asyncio.to_thread((out / "judgements.jsonl").write_text, lines, "utf-8")
    await asyncio.to_thread(
        (out / "judge_summary.json").write_text, summary.model_dump_json(indent=2), "utf-8"
    )
    await asyncio.to_thread((out / "judge_scores.svg").write_text, svg_chart(summary), "utf-8")
    return summary


class JudgeSpec(ModelSettings):
    """``hpt judge-strategies``: the model options are every model command's."""

    model: str = "local"
    judge_model: str | None = None  # None: the model itself
    datasets: list[str]
    strategies: list[str]
    per_dataset: int = Field(3, ge=1)
    seed: int = 0
    concurrency: int = Field(8, ge=1)
    params: GenerationParams = Field(default_factory=GenerationParams)
    data_dir: Path | None = None
    out: Path
    cache: bool = True

    def base_url_models(self) -> Sequence[str]:
        return [self.model]


async def run_judge(spec: JudgeSpec) -> JudgeSummary:
    import contextlib

    from hpt.backends import ResponseCache
    from hpt.tasks import get_task, resolve_data_dir, select

    def load() -> list[tuple[Task, list[Sample], list[Sample]]]:
        loaded = []
        for name in spec.datasets:
            task = get_task(name, resolve_data_dir(spec.data_dir))
            chosen = select(task.load_samples(), spec.per_dataset, spec.seed)
            loaded.append((task, chosen, task.load_exemplar_pool()))
        return loaded

    tasks = await asyncio.to_thread(load)
    async with contextlib.AsyncExitStack() as stack:
        cache = await stack.enter_async_context(ResponseCache()) if spec.cache else None
        backends = ModelBackends(stack, cache)
        model = await backends.open(spec.resolve(spec.model))
        judge = await backends.open(spec.resolve(spec.judge_model or spec.model))
        return await judge_strategies(
            tasks, spec.strategies, model, judge, spec.params, spec.out, spec.concurrency
        )
