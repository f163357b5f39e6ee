"""``hpt export --to hf``: the run as a Hugging Face ``datasets`` dataset, one row per sample
record (a climb) with its attempts and their calls nested, saved with ``save_to_disk`` into
``OUT/hf/`` (``datasets.load_from_disk`` reads it) beside a dataset card (``README.md``,
huggingface_hub's ``DatasetCard``) holding the run's summary. ``--push USER/NAME`` sends the
dataset (as Parquet) and the card to the Hub.

The rows are built by ``Dataset.from_generator`` straight from samples.jsonl, so a big run is
written to Arrow as it is read, never held in memory as Python rows."""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from datasets import Dataset, Features, List, Value
from huggingface_hub import DatasetCard, DatasetCardData
from huggingface_hub.errors import HfHubHTTPError, HFValidationError, LocalTokenNotFoundError

from hpt.errors import EXIT_FAILURE
from hpt.exports import ExportError
from hpt.exports.source import Exported, RunSource, cell_metrics
from hpt.reports.markdown import interval, number, pipe_table
from hpt.reports.report_markdown import markdown
from hpt.results.reader import read_records
from hpt.results.records import Call, DepthRecord, SampleRecord

FORMAT = "hf"
FOLDER = "hf"
CARD = "README.md"
# The spec's fields a reader of the card needs to know what was run.
SPEC_FIELDS = ("dataset", "model", "mode", "strategies", "threshold", "depth_mode", "limit",
               "seed", "samples_per_task", "hpt_version", "started_at", "command")  # fmt: skip


class HubError(ExportError):
    """The Hub refused or could not be reached; the local export stands."""

    exit_status = EXIT_FAILURE


def _string() -> Value:
    return Value("string")


CALL = {
    "purpose": _string(),
    "model": _string(),
    "messages": List({"role": _string(), "content": _string()}),
    "completion": _string(),
    "reasoning": _string(),
    "finish_reason": _string(),
    "prompt_tokens": Value("int64"),
    "completion_tokens": Value("int64"),
    "reasoning_tokens": Value("int64"),
    "cache_read_tokens": Value("int64"),
    "cache_write_tokens": Value("int64"),
    "latency_s": Value("float64"),
    "cached": Value("bool"),
    "shared": Value("bool"),
    "batched": Value("bool"),
}
# One row per sample record; an explicit schema, so that a run whose first rows lack a value
# (no reasoning, no threshold) has the same columns and types as one that has it.
FEATURES = Features(
    {
        "run": _string(),
        "dataset": _string(),
        "model": _string(),
        "mode": _string(),
        "threshold": Value("float64"),
        "variant": _string(),
        "reasoning_effort": _string(),
        "thinking_budget": Value("int64"),
        "sample_id": _string(),
        "draw": Value("int64"),
        "target": _string(),
        "strategies": List(_string()),
        "m": Value("int64"),
        "penalty": Value("float64"),
        "options": Value("int64"),
        "resolved_level": Value("int64"),
        "hpi_score": Value("float64"),
        "error": _string(),
        "iteration": Value("int64"),
        "calls": Value("int64"),
        "prompt_tokens": Value("int64"),
        "completion_tokens": Value("int64"),
        "wall_s": Value("float64"),
        "attempts": List(
            {
                "level": Value("int64"),
                "iteration": Value("int64"),
                "strategy": _string(),
                "completion": _string(),
                "parsed": _string(),
                "resolved": Value("bool"),
                "detail": _string(),
                "score": Value("float64"),
                "error": _string(),
                "truncated": _string(),
                "judge_score": Value("int64"),
                "calls": List(CALL),
            }
        ),
        "selections": List(
            {
                "iteration": Value("int64"),
                "answer": _string(),
                "level": Value("int64"),
                "error": _string(),
                "calls": List(CALL),  # the selector's call, when one was made (0 or 1)
            }
        ),
        # DepthQA's node records; null for other datasets.
        "node_id": _string(),
        "qid": _string(),
        "depth": Value("int64"),
        "predecessors": List(_string()),
        "successors": List(_string()),
        "prediction": _string(),
        "judge_score": Value("int64"),
        "feedback": _string(),
    }
)


def export(run: RunSource, out: Path, *, push: str | None = None) -> Exported:
    folder = out / FOLDER
    card = dataset_card(run)
    # from_generator writes Arrow into a cache named after the generator and its arguments;
    # a private one, so that a run exported again after it grew is read afresh.
    with tempfile.TemporaryDirectory(dir=out, prefix=".hf-build-") as cache:
        dataset = Dataset.from_generator(
            rows,
            features=FEATURES,
            gen_kwargs={"directory": str(run.directory), "run": run.name},
            cache_dir=cache,
        )
        assert isinstance(dataset, Dataset)  # from_generator without streaming
        dataset.save_to_disk(str(folder))
        card.save(str(folder / CARD))
        count = len(dataset)
        target = _push(dataset, card, push) if push is not None else None
        del dataset  # its cache files go with the temporary folder
    return Exported(format=FORMAT, path=folder, samples=count, target=target)


def rows(directory: str, run: str) -> Iterator[dict[str, Any]]:
    """The rows of ``directory``'s records (a module-level function: datasets fingerprints
    the generator and its arguments)."""
    for record in read_records(Path(directory)):
        yield row(record, run)


def row(record: SampleRecord, run: str) -> dict[str, Any]:
    depth = record if isinstance(record, DepthRecord) else None
    return {
        "run": run,
        "dataset": record.dataset,
        "model": record.model,
        "mode": record.mode,
        "threshold": record.threshold,
        "variant": record.variant,
        "reasoning_effort": record.reasoning_effort,
        "thinking_budget": record.thinking_budget,
        "sample_id": record.sample_id,
        "draw": record.draw,
        "target": record.target,
        "strategies": record.strategies,
        "m": record.m,
        "penalty": record.penalty,
        "options": record.options,
        "resolved_level": record.resolved_level,
        "hpi_score": record.hpi_score,
        "error": record.error,
        "iteration": record.iteration,
        "calls": record.calls,
        "prompt_tokens": record.prompt_tokens,
        "completion_tokens": record.completion_tokens,
        "wall_s": record.wall_s,
        "attempts": [
            {
                "level": a.level,
                "iteration": a.iteration,
                "strategy": a.strategy,
                "completion": a.completion,
                "parsed": a.parsed,
                "resolved": a.resolved,
                "detail": a.detail,
                "score": a.score,
                "error": a.error,
                "truncated": a.truncated,
                "judge_score": a.verdict.score if a.verdict is not None else None,
                "calls": [_call(c) for c in a.calls],
            }
            for a in record.attempts
        ],
        "selections": [
            {
                "iteration": s.iteration,
                "answer": s.answer,
                "level": s.level,
                "error": s.error,
                "calls": [_call(s.call)] if s.call is not None else [],
            }
            for s in record.selections
        ],
        "node_id": depth.node_id if depth else None,
        "qid": depth.qid if depth else None,
        "depth": depth.depth if depth else None,
        "predecessors": depth.predecessors if depth else [],
        "successors": depth.successors if depth else [],
        "prediction": depth.prediction if depth else None,
        "judge_score": depth.judge_score if depth else None,
        "feedback": depth.feedback if depth else None,
    }


def _call(call: Call) -> dict[str, Any]:
    u = call.usage
    return {
        "purpose": call.purpose,
        "model": call.model,
        "messages": [{"role": m.role, "content": m.content} for m in call.messages],
        "completion": call.completion,
        "reasoning": call.reasoning,
        "finish_reason": call.finish_reason,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "reasoning_tokens": u.reasoning_tokens,
        "cache_read_tokens": u.cache_read_tokens,
        "cache_write_tokens": u.cache_write_tokens,
        "latency_s": call.latency_s,
        "cached": call.cached,
        "shared": call.shared,
        "batched": call.batched,
    }


def _cell_row(values: dict[str, float], key: str, digits: int = 2) -> str:
    return number(values.get(key), digits)


def _text(value: object) -> str:
    """A value in a pipe table: a "|" in a model's label must not split the cell."""
    return str(value).replace("|", "\\|")


def _spec_value(key: str, value: object) -> str:
    if key == "command" and isinstance(value, list):
        return shlex.join(str(v) for v in value)
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def dataset_card(run: RunSource) -> DatasetCard:
    """The card: what was run (the spec's essentials), every cell's figures as ``hpt report``
    has them, the columns, and the whole ``hpt report`` page."""
    datasets = sorted({c.cell.dataset for c in run.cells})
    data = DatasetCardData(
        pretty_name=f"hpt run {run.name}",
        tags=["hpt", "evaluation", "hierarchical-prompting-taxonomy", *datasets],
    )
    spec = [f"- **{k}**: `{_spec_value(k, run.spec[k])}`" for k in SPEC_FIELDS
            if run.spec.get(k) not in (None, [], {}, "")]  # fmt: skip
    header = ["dataset", "model", "mode", "samples", "scored", "HPI [95% CI]", "chance HPI",
              "accuracy", "level-1 accuracy", "errors", "unresolved", "calls", "tokens",
              "cost USD"]  # fmt: skip
    table = []
    for report in run.cells:
        values = cell_metrics(report)
        table.append(
            [
                _text(report.cell.label),
                _text(report.cell.model),
                _text(report.cell.mode),
                str(report.summary.samples),
                str(report.summary.n),
                number(report.summary.hpi) + interval(report.hpi_ci),
                _cell_row(values, "chance_hpi"),
                _cell_row(values, "accuracy", 3),
                _cell_row(values, "level1_accuracy", 3),
                str(report.summary.errors),
                str(report.summary.unresolved),
                str(report.summary.calls),
                str(int(values["tokens"])),
                _cell_row(values, "cost_usd", 4),
            ]
        )
    page = markdown(run.cells, [run.directory], [], None, [])
    # The report's own headings one level down, under this card's.
    page = "\n".join("#" + line if line.startswith("#") else line for line in page.splitlines())
    state = "complete" if run.complete else "incomplete (not every sample is recorded)"
    body = f"""
# hpt run `{run.name}`

Per-sample records of an hpt evaluation run: each row is one climb of
one sample up the Hierarchical Prompting Taxonomy's ladder of prompting strategies, with every
attempt (level, strategy, answer, parsed answer, whether it resolved the sample) and every model
call (messages, completion, tokens). The run is {state}.

## Run

{chr(10).join(spec) or "(the run directory has no run.json)"}

## Cells

HPI: the level that first resolved a sample, averaged (unresolved: m + penalty; lower is
better); brackets are 95% bootstrap intervals. Figures as `hpt report` computes them.

{pipe_table(header, table)}

## Columns

One row per sample record: the cell (`dataset`, `model`, `mode`, `threshold`, `variant`,
`reasoning_effort`, `thinking_budget`), `sample_id`, `draw`, `target`, `resolved_level` (null:
unresolved or errored), `hpi_score` (null: not scored), `error`, and `attempts`: a list of
`{{level, strategy, completion, parsed, resolved, score, error, calls: [{{messages, completion,
prompt_tokens, completion_tokens, ...}}]}}`. DepthQA rows add `node_id`, `qid`, `depth`,
`predecessors`, `successors`, `prediction`, `judge_score`, `feedback`.

```python
from datasets import load_from_disk
rows = load_from_disk("path/to/hf")
```

{page}
"""
    return DatasetCard(f"---\n{data.to_yaml()}\n---\n{body}")


def _push(dataset: Dataset, card: DatasetCard, repo: str) -> str:
    """The dataset (Parquet) and its card to the Hub repo ``repo``; one HubError for any
    refusal (no token, no such namespace, no network)."""
    try:
        dataset.push_to_hub(repo, private=True)
        card.push_to_hub(repo, repo_type="dataset")
    except LocalTokenNotFoundError:
        raise HubError(
            f"cannot push to {repo}: no Hugging Face token; run `hf auth login` or set HF_TOKEN "
            "(the local export is written)"
        ) from None
    except Exception as exc:
        # The Hub client raises from more than one HTTP stack (httpx, its fork httpx2,
        # requests) and its own HfHubHTTPError/HFValidationError; whichever it is, the user
        # needs one line naming the repo and the reason, not a traceback.
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, HfHubHTTPError | HFValidationError):
            reason = f"the Hub refused: {reason}"
        raise HubError(f"cannot push to {repo}: {reason} (the local export is written)") from None
    return f"https://huggingface.co/datasets/{repo}"
