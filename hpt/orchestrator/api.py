"""The Python API for scripts: ``await hpt.evaluate(...)`` inside any running event loop."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpt.orchestrator.observer import RunObserver
from hpt.orchestrator.resume import load_saved_plugins, load_saved_spec
from hpt.orchestrator.runner import RunResult, run_evaluation
from hpt.orchestrator.spec import ConfigError, Mode, RunSpec


async def evaluate(
    *,
    datasets: str | Sequence[str],
    models: str | Sequence[str] = "local",
    mode: Mode | Sequence[Mode] = "standard",
    out: str | Path | None = None,
    observer: RunObserver | None = None,
    estimate: int | None = None,
    **settings: Any,
) -> RunResult:
    """Evaluate every model on every dataset in every mode; one summary per cell.

    ``settings`` are the other RunSpec fields (limit, strategies, concurrency, threshold,
    reasoning_effort and thinking_budget (one value or several, one cell each), models config
    as ``model_configs``, params, datasets' own arguments as ``task_args``, e.g.
    ``{"depthqa": {"mode": "multi_turn"}}``, ...); ``depth_mode`` and ``graph`` are short
    for DepthQA's ``mode`` and ``graph``. Records go to ``out`` (default
    ``runs/...``) as samples finish; cancel the awaiting task to stop, and ``resume(out)``.
    ``budget_usd`` and ``max_calls`` bound what it spends (``RunResult.stopped_by`` says
    when one stopped it); ``estimate`` (N, at least 5) runs the N samples of each cell
    that ``limit`` N would choose and projects the whole run's cost
    (``RunResult.estimate``)."""
    named = settings.pop("model_configs", {})
    spec = RunSpec.model_validate(
        {
            # RunSpec takes one value or several for each.
            "dataset": datasets,
            "model": models,
            "mode": mode,
            "out": out,
            "models": named,
            **settings,
        }
    )
    return await run_evaluation(spec, observer, estimate=estimate)


async def resume(
    out: str | Path,
    *,
    retry_errors: bool = True,
    observer: RunObserver | None = None,
    trust_plugins: bool = False,
    base_url: str | None = None,
    budget_usd: float | None = None,
    max_calls: int | None = None,
    batch_poll_s: float | None = None,
) -> RunResult:
    """Continue an interrupted run from its directory, without repeating finished samples.

    The plugins the run names are imported if installed as entry points or already imported;
    any other is imported only with ``trust_plugins`` (it runs the module's code). An
    endpoint saved without the credentials its URL had is given again as ``base_url``.
    ``budget_usd``, ``max_calls`` and ``batch_poll_s`` replace the run's own (a higher
    budget goes on where the last one stopped it)."""
    spec = load_saved_spec(Path(out)).run_spec()
    given = {"budget_usd": budget_usd, "max_calls": max_calls, "batch_poll_s": batch_poll_s}
    update: dict[str, Any] = {"out": Path(out)}
    for name, value in given.items():
        if value is not None:
            if not value > 0:
                raise ConfigError(f"{name} must be above 0")
            update[name] = value
    spec = spec.model_copy(update=update)
    load_saved_plugins(Path(out), spec.plugins, trust=trust_plugins)
    spec = spec.restore_credentials([base_url] if base_url else [])
    return await run_evaluation(spec, observer, resume=True, retry_errors=retry_errors)
