"""Report figures as PNG and SVG files, drawn without a display (matplotlib's Agg canvas)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from hpt.reports.cells import CellReport
from hpt.reports.comparisons import Comparison
from hpt.reports.tables import model_names

FORMATS = ("png", "svg")


def _save(fig: Figure, out: Path, stem: str) -> list[Path]:
    paths = []
    for ext in FORMATS:
        path = out / f"{stem}.{ext}"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        paths.append(path)
    return paths


def _column(r: CellReport) -> str:
    # A dataset's reasoning efforts and budgets are bars of their own.
    reasoning = f" · {r.cell.reasoning_label}" if r.cell.reasoning_label else ""
    adaptive = " (adaptive)" if r.summary.mode == "adaptive" else ""
    return r.cell.dataset_label + reasoning + adaptive


def hpi_chart(reports: list[CellReport], out: Path) -> list[Path]:
    """HPI per dataset, one bar per model, with 95% bootstrap intervals."""
    columns = list(dict.fromkeys(_column(r) for r in reports))
    models = model_names(reports)
    width = 0.8 / len(models)
    # Figure, not pyplot: no global state, no display backend chosen behind our back.
    fig = Figure(figsize=(max(6.0, 1.3 * len(columns) * max(1, len(models)) ** 0.5), 4.2))
    ax = fig.add_subplot()
    for i, model in enumerate(models):
        xs: list[float] = []
        ys: list[float] = []
        errs: list[list[float]] = [[], []]
        for j, column in enumerate(columns):
            r = next(
                (r for r in reports if r.summary.model == model and _column(r) == column), None
            )
            if r is None or r.summary.hpi is None:
                continue
            xs.append(j + (i - (len(models) - 1) / 2) * width)
            ys.append(r.summary.hpi)
            low, high = r.hpi_ci or (r.summary.hpi, r.summary.hpi)
            errs[0].append(max(0.0, r.summary.hpi - low))
            errs[1].append(max(0.0, high - r.summary.hpi))
        ax.bar(xs, ys, width, yerr=errs, capsize=3, label=model)
    ax.set_xticks(range(len(columns)), columns, rotation=20, ha="right")
    ax.set_ylabel("HPI (lower is better)")
    ax.set_title("Hierarchical Prompting Index per dataset")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out, "hpi")


def level_histograms(reports: list[CellReport], out: Path) -> list[Path]:
    """One small histogram per cell: samples resolved at each level, and unresolved."""
    n = len(reports)
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig = Figure(figsize=(4.2 * cols, 2.9 * rows))
    for k, r in enumerate(reports, 1):
        s = r.summary
        ax = fig.add_subplot(rows, cols, k)
        labels = [f"L{level}" for level in range(1, s.m + 1)] + ["none"]
        counts = [s.level_counts.get(level, 0) for level in range(1, s.m + 1)] + [s.unresolved]
        colors = ["#4c78a8"] * s.m + ["#e45756"]
        ax.bar(labels, counts, color=colors)
        ax.set_title(f"{_column(r)} · {s.model}", fontsize="small")
        ax.tick_params(labelsize="small")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle("Samples resolved per HPF level")
    fig.tight_layout()
    return _save(fig, out, "levels")


def forest(comparisons: list[Comparison], out: Path) -> list[Path]:
    """Paired HPI differences (A − B) with their 95% bootstrap intervals, one row per
    comparison; filled where the Holm-adjusted p is below 0.05."""
    shown = [c for c in comparisons if c.hpi_diff is not None]
    if not shown:
        return []
    fig = Figure(figsize=(7.5, 1.2 + 0.42 * len(shown)))
    ax = fig.add_subplot()
    for y, c in enumerate(reversed(shown)):
        assert c.hpi_diff is not None
        low = c.hpi_diff_low if c.hpi_diff_low is not None else c.hpi_diff
        high = c.hpi_diff_high if c.hpi_diff_high is not None else c.hpi_diff
        significant = c.p_holm is not None and c.p_holm < 0.05
        ax.errorbar(
            [c.hpi_diff],
            [y],
            xerr=[[c.hpi_diff - low], [high - c.hpi_diff]],
            fmt="o",
            color="#4c78a8",
            markerfacecolor="#4c78a8" if significant else "white",
            capsize=3,
        )
    labels = [
        f"{c.cell.label} · {c.mode}: {c.model_a} − {c.model_b} (n={c.n})" for c in reversed(shown)
    ]
    ax.set_yticks(range(len(shown)), labels, fontsize="small")
    ax.axvline(0.0, color="#888888", linewidth=1)
    ax.set_xlabel("HPI difference A − B (below 0: A resolves at lower levels)")
    ax.set_title("Paired HPI differences, 95% bootstrap intervals (filled: Holm p < 0.05)")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, out, "paired_differences")
