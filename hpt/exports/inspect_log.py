"""``hpt export --to inspect``: the run as inspect_ai eval logs, built from inspect_ai's own
log types and written by its ``write_eval_log``, so that ``inspect view`` opens them and
``inspect_ai.log.read_eval_log`` reads them back.

inspect's model is one task x one model per log, so each cell (dataset x model x mode, with
its threshold, variant and reasoning settings) is one log: a run of one cell is
``OUT/<run name>.eval``; a run of several is a folder ``OUT/<run name>/`` holding one
``<cell>.eval`` each (``inspect view --log-dir`` lists them side by side). Each climb (a
sample record: sample id, draw as the epoch) is one EvalSample whose messages are the calls
of its attempts in order, each call's prompt and answer; the first prompt message of each
call and each answer carry the attempt's level and strategy as metadata (inspect view shows
it under the message). Scores: ``hpi`` (the record's HPI score), ``resolved`` (C/I, the
parsed answer), ``level`` (the resolved level, or "unresolved") and, where the dataset
grades answers, its score. Results: the cell's figures exactly as ``hpt report`` has them
(``cell_metrics``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalError,
    EvalLog,
    EvalMetric,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    HeadlineMetric,
    write_eval_log,
)
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    Content,
    ContentReasoning,
    ContentText,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.scorer import Score

from hpt import __version__
from hpt.exports.source import Exported, RunSource, cell_metrics
from hpt.reports.cells import CellReport
from hpt.results.records import Attempt, Call, Cell, DepthRecord, SampleRecord
from hpt.results.scoring import scored
from hpt.types import Message

FORMAT = "inspect"
SUFFIX = ".eval"
# The figures each results scorer carries (cell_metrics' names); the counts go to metadata.
_HPI_METRICS = ("hpi", "hpi_ci_low", "hpi_ci_high", "chance_hpi")
_RESOLVED_METRICS = ("accuracy", "level1_accuracy")
StopReason = Literal["stop", "max_tokens", "unknown"]


def export(run: RunSource, out: Path, *, push: str | None = None) -> Exported:
    """One eval log per cell (see the module's docstring); ``push`` is refused upstream."""
    if push is not None:  # hpt.exports refuses it first; a direct caller gets the same answer
        raise ValueError("inspect logs are files: copy them where they should go")
    if len(run.cells) == 1:
        paths = {run.cells[0].cell: out / f"{run.name}{SUFFIX}"}
        where = paths[run.cells[0].cell]
    else:
        where = out / run.name
        where.mkdir(parents=True, exist_ok=True)
        paths = {c.cell: where / f"{slug(c.cell.title)}{SUFFIX}" for c in run.cells}
    total = 0
    # One pass over the records per cell: memory holds one cell's samples (inspect writes a
    # log from a whole EvalLog), never the whole run's.
    for report in run.cells:
        samples = [to_sample(r) for r in run.records() if r.cell == report.cell]
        log = eval_log(run, report, samples)
        write_eval_log(log, paths[report.cell], format="eval")
        total += len(samples)
    return Exported(format=FORMAT, path=where, samples=total)


def slug(text: str) -> str:
    """A file name from a cell's title: "boolq · gpt-4o · standard" -> "boolq_gpt-4o_standard"."""
    return re.sub(r"[^A-Za-z0-9.@-]+", "_", text).strip("_") or "cell"


def eval_log(run: RunSource, report: CellReport, samples: list[EvalSample]) -> EvalLog:
    cell = report.cell
    s = report.summary
    created = _created(run)
    spec = EvalSpec(
        # Stable ids: the same run exported twice is the same eval to inspect view.
        run_id=_id(str(run.directory.resolve())),
        task_id=_id(f"{run.directory.resolve()}\n{cell.title}"),
        created=created,
        task=cell.dataset_label,
        task_display_name=cell.label,
        task_description=report.info.title or None,
        task_version=run.info.hpt_version or __version__,
        task_args={
            "mode": cell.mode,
            "threshold": cell.threshold,
            "variant": cell.variant,
            "reasoning_effort": cell.reasoning_effort,
            "thinking_budget": cell.thinking_budget,
            "strategies": list(report.ladder or s.strategies),
            "penalty": s.penalty,
        },
        solver="hpt/" + ("adaptive" if cell.mode == "adaptive" else "ladder"),
        dataset=EvalDataset(
            name=cell.dataset,
            samples=s.samples,
            sample_ids=sorted({str(x.id) for x in samples}),
        ),
        model=cell.model,
        config=EvalConfig(epochs=max((x.epoch for x in samples), default=1)),
        packages={"hpt": run.info.hpt_version or __version__},
        metadata={"hpt_run": run.name, "hpt_cell": _cell_fields(cell), "hpt_spec": run.spec},
    )
    figures = cell_metrics(report)
    results = EvalResults(
        total_samples=s.samples,
        completed_samples=s.n,
        scores=[
            _eval_score("hpi", s.n, s.samples - s.n, figures, _HPI_METRICS),
            _eval_score("resolved", s.n, s.samples - s.n, figures, _RESOLVED_METRICS),
        ],
        headline=HeadlineMetric(scorer="hpi", metric="hpi"),
        # Every other figure of the cell, under the same names as the other formats.
        metadata={"hpt_metrics": figures, "level_counts": s.level_counts},
    )
    usage = _usage(samples)
    if report.cost_usd is not None and len(usage) == 1:
        next(iter(usage.values())).total_cost = report.cost_usd
    return EvalLog(
        status="success" if run.complete else "cancelled",
        eval=spec,
        results=results,
        stats=EvalStats(started_at=created, completed_at=created, model_usage=usage),
        samples=samples,
    )


def _eval_score(
    name: str, scored_n: int, unscored: int, figures: dict[str, float], names: Iterable[str]
) -> EvalScore:
    metrics = {k: EvalMetric(name=k, value=figures[k]) for k in names if k in figures}
    return EvalScore(
        name=name,
        scorer=name,
        scored_samples=scored_n,
        unscored_samples=unscored,
        metrics=metrics,
    )


def _id(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:22]


def _created(run: RunSource) -> str:
    """When the run started (run.json's local time, as UTC); else when samples.jsonl was
    last written."""
    started = run.spec.get("started_at")
    if isinstance(started, str) and started:
        try:
            return datetime.fromisoformat(started).astimezone(UTC).isoformat()
        except ValueError:
            pass
    mtime = (run.directory / "samples.jsonl").stat().st_mtime
    return datetime.fromtimestamp(mtime, UTC).isoformat()


def _cell_fields(cell: Cell) -> dict[str, Any]:
    return {
        "dataset": cell.dataset,
        "model": cell.model,
        "mode": cell.mode,
        "threshold": cell.threshold,
        "variant": cell.variant,
        "reasoning_effort": cell.reasoning_effort,
        "thinking_budget": cell.thinking_budget,
    }


def _usage(samples: list[EvalSample]) -> dict[str, ModelUsage]:
    total: dict[str, ModelUsage] = {}
    for sample in samples:
        for model, usage in sample.model_usage.items():
            total[model] = total[model] + usage if model in total else usage.model_copy()
    return total


def to_sample(record: SampleRecord) -> EvalSample:
    """One climb as an EvalSample: its calls as messages, its figures as scores."""
    messages: list[ChatMessage] = []
    usage: dict[str, ModelUsage] = {}
    for attempt in record.attempts:
        for number, call in enumerate(attempt.calls, 1):
            messages += _prompt(call.messages, _where(attempt, call, number))
            messages.append(_answer(attempt, call))
            _add_usage(usage, call)
    for selection in record.selections:  # adaptive: the prompt-selector's turns, after
        if selection.call is not None:
            call = selection.call
            turn = {"selector_iteration": selection.iteration, "chose_level": selection.level}
            messages += _prompt(call.messages, turn)
            answer = _content(call)
            messages.append(ChatMessageAssistant(content=answer, model=call.model, metadata=turn))
            _add_usage(usage, call)
    first = next((c for a in record.attempts for c in a.calls), None)
    final = _final(record)
    output = (
        ModelOutput.from_content(
            final.calls[-1].model if final.calls else record.model,
            final.completion or "",
            stop_reason=_stop(final.calls[-1] if final.calls else None),
        )
        if final is not None
        else ModelOutput(model=record.model)
    )
    return EvalSample(
        id=record.sample_id,
        epoch=record.draw + 1,  # inspect counts epochs from 1
        input=[_message(m) for m in first.messages] if first is not None else "",
        target=record.target,
        messages=messages,
        output=output,
        scores=_scores(record, final) if scored(record) else None,
        metadata=_metadata(record),
        model_usage=usage,
        total_time=record.wall_s or None,
        error=_error(record.error) if record.error else None,
    )


def _final(record: SampleRecord) -> Attempt | None:
    """The attempt that resolved the climb, else its last."""
    resolving = [a for a in record.attempts if a.resolved]
    return resolving[0] if resolving else (record.attempts[-1] if record.attempts else None)


def _scores(record: SampleRecord, final: Attempt | None) -> dict[str, Score]:
    level = record.resolved_level
    strategy = record.strategies[level - 1] if level and level <= len(record.strategies) else None
    parsed = final.parsed if final is not None else None
    why = (
        f"resolved at level {level} ({strategy})"
        if level is not None
        else f"unresolved after {len(record.attempts)} levels: m + penalty = "
        f"{record.m} + {record.penalty:g}"
    )
    scores = {
        "hpi": Score(value=record.hpi_score or 0.0, answer=parsed, explanation=why),
        "resolved": Score(value="C" if level is not None else "I", answer=parsed),
        "level": Score(value=level if level is not None else "unresolved", explanation=why),
    }
    if isinstance(record, DepthRecord) and record.judge_score is not None:
        scores["judge_score"] = Score(
            value=record.judge_score, answer=record.prediction, explanation=record.feedback
        )
    elif final is not None and final.score is not None:  # a graded answer (sentence BLEU...)
        scores["answer_score"] = Score(value=final.score, answer=parsed)
    return scores


def _metadata(record: SampleRecord) -> dict[str, Any]:
    meta: dict[str, Any] = {
        **_cell_fields(record.cell),
        "draw": record.draw,
        "resolved_level": record.resolved_level,
        "hpi_score": record.hpi_score,
        "error": record.error,
        "strategies": record.strategies,
        "levels_tried": [a.level for a in record.attempts],
        "calls": record.calls,
        "cached_calls": record.cached_calls,
    }
    if record.iteration is not None:
        meta["iteration"] = record.iteration
    if isinstance(record, DepthRecord):
        meta.update(
            node_id=record.node_id,
            qid=record.qid,
            depth=record.depth,
            predecessors=record.predecessors,
            successors=record.successors,
        )
    return meta


def _where(attempt: Attempt, call: Call, number: int) -> dict[str, Any]:
    """What inspect view shows under a call's first prompt message: the attempt's level and
    strategy and the call's place in it (inspect's messages carry no level of their own; a
    marker message of hpt's would misstate what the model was sent)."""
    return {"level": attempt.level, "strategy": attempt.strategy,
            "call": f"{number} of {len(attempt.calls)} ({call.purpose})"}  # fmt: skip


def _prompt(messages: list[Message], where: dict[str, Any]) -> list[ChatMessage]:
    converted = [_message(m) for m in messages]
    if converted:
        converted[0].metadata = where
    return converted


def _add_usage(usage: dict[str, ModelUsage], call: Call) -> None:
    used = _call_usage(call)
    usage[call.model] = usage[call.model] + used if call.model in usage else used


def _message(message: Message) -> ChatMessage:
    if message.role == "system":
        return ChatMessageSystem(content=message.content, source="input")
    if message.role == "assistant":
        return ChatMessageAssistant(content=message.content, source="input")
    return ChatMessageUser(content=message.content, source="input")


def _content(call: Call) -> str | list[Content]:
    if call.reasoning is None:
        return call.completion
    return [ContentReasoning(reasoning=call.reasoning), ContentText(text=call.completion)]


def _answer(attempt: Attempt, call: Call) -> ChatMessageAssistant:
    return ChatMessageAssistant(
        content=_content(call),
        model=call.model,
        source="generate",
        metadata={
            "level": attempt.level,
            "strategy": attempt.strategy,
            "purpose": call.purpose,
            # The attempt's outcome, on the call whose completion was checked (its last).
            **(
                {"resolved": attempt.resolved, "parsed": attempt.parsed}
                if call is attempt.calls[-1]
                else {}
            ),
            **({"error": attempt.error} if attempt.error and call is attempt.calls[-1] else {}),
            **({"finish_reason": call.finish_reason} if call.finish_reason else {}),
            "cached": call.cached,
            "latency_s": call.latency_s,
        },
    )


def _call_usage(call: Call) -> ModelUsage:
    u = call.usage
    return ModelUsage(
        input_tokens=u.prompt_tokens,
        output_tokens=u.completion_tokens,
        total_tokens=u.total_tokens,
        input_tokens_cache_read=u.cache_read_tokens,
        input_tokens_cache_write=u.cache_write_tokens,
        reasoning_tokens=u.reasoning_tokens,
    )


def _stop(call: Call | None) -> StopReason:
    if call is None or call.finish_reason is None:
        return "unknown"
    if call.truncation is not None:
        return "max_tokens"
    return "stop" if call.finish_reason == "stop" else "unknown"


def _error(message: str) -> EvalError:
    # The record keeps the message, not a traceback; inspect's fields want both.
    return EvalError(message=message, traceback=message, traceback_ansi=message)
