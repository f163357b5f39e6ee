"""The ceiling report's figures (PNG and SVG, as ``hpt report``'s): macro-averages per method
(the paper's table 3), the gain over the baseline per benchmark (figure 3) and accuracy
against extra prompt tokens (figure 4). Each value is labelled with the samples it rests on
(n; "n=?" where a CSV row gave none) and each model with its benchmarks (k)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from hpt.reports.ceiling_markdown import n_of
from hpt.reports.ceiling_types import CeilingReport
from hpt.reports.plots import _save


def methods_chart(report: CeilingReport, out: Path) -> list[Path]:
    """Macro-average accuracy per model, one bar per method; the ceiling outlined."""
    models = list(report.models)
    methods = report.methods
    width = 0.8 / len(methods)
    fig = Figure(figsize=(max(6.0, 1.6 * len(models) * max(1, len(methods)) ** 0.5), 4.2))
    ax = fig.add_subplot()
    for i, method in enumerate(methods):
        xs: list[float] = []
        ys: list[float] = []
        edges: list[str] = []
        counts: list[str] = []
        for j, model in enumerate(models):
            stat = report.models[model].methods.get(method)
            if stat is None:
                continue
            xs.append(j + (i - (len(methods) - 1) / 2) * width)
            ys.append(stat.macro_avg)
            edges.append("black" if report.models[model].ceiling_method == method else "none")
            counts.append(n_of(stat.n))
        bars = ax.bar(xs, ys, width, label=method, edgecolor=edges, linewidth=1.5)
        ax.bar_label(bars, counts, fontsize=6, rotation=90, padding=2)
    ticks = [f"{m} (k={len(report.models[m].benchmarks)})" for m in models]
    ax.set_xticks(range(len(models)), ticks, rotation=20, ha="right")
    ax.set_ylabel("macro-average accuracy %")
    ax.set_title("Accuracy per prompting method (outlined: the ceiling; n = scored samples)")
    ax.margins(y=0.15)  # room for the n labels
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out, "ceiling_methods")


def delta_heatmap(report: CeilingReport, out: Path) -> list[Path]:
    """Per model, the gain of each method over the baseline on each benchmark (figure 3)."""
    others = [m for m in report.methods if m != report.baseline]
    models = list(report.models)
    if not others:
        return []
    acc = {(r.model, r.benchmark, r.method): r.accuracy for r in report.results}
    n = {(r.model, r.benchmark, r.method): n_of(r.n)[2:] for r in report.results}
    cols = min(4, len(models))
    rows = (len(models) + cols - 1) // cols
    fig = Figure(
        figsize=(
            max(3.5, 1.0 + 0.9 * len(others)) * cols,
            (1.4 + 0.45 * len(report.benchmarks)) * rows,
        )
    )
    for k, model in enumerate(models, 1):
        ax = fig.add_subplot(rows, cols, k)
        benches = report.models[model].benchmarks
        grid = np.full((len(benches), len(others)), np.nan)
        for i, b in enumerate(benches):
            base = acc[model, b, report.baseline]
            for j, method in enumerate(others):
                if (model, b, method) in acc:
                    grid[i, j] = acc[model, b, method] - base
        limit = float(np.nanmax(np.abs(grid))) if not np.isnan(grid).all() else 0.0
        limit = limit or 1.0
        image = ax.imshow(grid, cmap="RdBu", vmin=-limit, vmax=limit)
        for i in range(len(benches)):
            for j in range(len(others)):
                if not np.isnan(grid[i, j]):
                    b = benches[i]
                    counts = f"n={n[model, b, others[j]]}/{n[model, b, report.baseline]}"
                    ax.text(j, i, f"{grid[i, j]:+.1f}\n{counts}", ha="center", va="center",
                            fontsize=6)  # fmt: skip
        ax.set_xticks(range(len(others)), others, rotation=30, ha="right", fontsize="small")
        ax.set_yticks(range(len(benches)), benches, fontsize="small")
        ax.set_title(model, fontsize="small")
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.suptitle(f"Accuracy gain over {report.baseline} (percentage points; n = method's/"
                 f"baseline's scored samples)")  # fmt: skip
    fig.tight_layout()
    return _save(fig, out, "ceiling_deltas")


def tokens_chart(report: CeilingReport, out: Path) -> list[Path]:
    """Macro-average accuracy against extra prompt tokens per sample over the baseline, one
    point per model and method (figure 4); nothing when no result recorded its tokens."""
    points = [
        (model, method, tokens, m.methods[method].macro_avg, n_of(m.methods[method].n))
        for model, m in report.models.items()
        for method, tokens in m.extra_prompt_tokens.items()
        if tokens is not None
    ]
    if not points:
        return []
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    markers = "os^Dv<>pPX*"
    for i, method in enumerate(report.methods):
        mine = [p for p in points if p[1] == method]
        if mine:
            ax.scatter([p[2] for p in mine], [p[3] for p in mine], marker=markers[i % 11],
                       label=method, s=40)  # fmt: skip
            for p in mine:
                ax.annotate(p[4], (p[2], p[3]), fontsize=6, xytext=(0, -9),
                            textcoords="offset points", ha="center")  # fmt: skip
    for model in report.models:
        mine = sorted((p for p in points if p[0] == model), key=lambda p: p[2])
        ax.plot([p[2] for p in mine], [p[3] for p in mine], color="grey", alpha=0.3, lw=1)
        if mine:
            ax.annotate(model, (mine[-1][2], mine[-1][3]), fontsize=7,
                        xytext=(4, 0), textcoords="offset points")  # fmt: skip
    ax.set_xlabel(f"extra prompt tokens per sample over {report.baseline}")
    ax.set_ylabel("macro-average accuracy %")
    ax.set_title("Accuracy against prompt cost")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return _save(fig, out, "ceiling_tokens")
