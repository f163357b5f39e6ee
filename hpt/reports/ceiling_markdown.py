"""``ceiling.md``: the ceiling report (hpt.reports.ceiling) as Markdown, every figure with the
count it rests on: n scored samples beside an accuracy, k benchmarks beside a macro-average
and its sigma, the models a mean over models is over. A figure that cannot be computed shows
"-" and the text says why."""

from __future__ import annotations

import io

from hpt.reports.ceiling_intervals import NO_SAMPLES
from hpt.reports.ceiling_types import TIE_RULE, CeilingReport, ModelCeiling
from hpt.reports.markdown import pipe_table


def signed(value: float | None, digits: int = 2, sign: bool = False) -> str:
    """``value`` to ``digits`` places ("-" for none), with its sign when ``sign``."""
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def n_of(n: int | None) -> str:
    """A sample count as shown beside a figure ("n=?": the source did not say)."""
    return "n=?" if n is None else f"n={n}"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def method_n(m: ModelCeiling, method: str) -> int | None:
    stat = m.methods.get(method)
    return None if stat is None else stat.n


def delta_cell(m: ModelCeiling, baseline: str, digits: int = 2) -> str:
    """Ceiling - baseline, with the samples of both sides."""
    if m.ceiling_method == baseline:
        return f"{signed(m.delta, digits, True)} (the baseline)"
    ceiling, base = method_n(m, m.ceiling_method), method_n(m, baseline)
    return f"{signed(m.delta, digits, True)} ({n_of(ceiling)} vs {n_of(base)[2:]})"


def headline_names(report: CeilingReport) -> str:
    """The headline methods that some model has."""
    present = [h for h in report.headline_methods if h in report.methods]
    return ", ".join(present) or "(no headline method present)"


def headline(report: CeilingReport) -> str:
    """The report in one line: the headline gain and the rank flips."""
    return (
        f"headline: mean gain of {headline_names(report)} over {report.baseline}: "
        f"{signed(report.headline_delta, sign=True)} points over "
        f"{plural(report.headline_n, 'model')}; rank flips on "
        f"{len(report.rank_flips)}/{len(report.benchmarks)} benchmarks"
        + (f" ({', '.join(report.rank_flips)})" if report.rank_flips else "")
    )


def _method_cell(report: CeilingReport, model: str, method: str) -> str:
    m = report.models[model]
    stat = m.methods.get(method)
    if stat is None:
        return "-"
    text = f"{stat.macro_avg:.2f} ± {signed(stat.sd, 1)} ({n_of(stat.n)})"
    return f"**{text}**" if m.ceiling_method == method else text


def _sub(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _rank(rank: float | None) -> str:
    return "-" if rank is None else f"{rank:g}"


def _order(ranks: dict[str, float]) -> list[str]:
    return sorted(ranks, key=lambda m: ranks[m])


def _span(counts: list[int]) -> str:
    low, high = min(counts, default=0), max(counts, default=0)
    return str(low) if low == high else f"{low}–{high}"


def markdown(report: CeilingReport, sources: list[str]) -> str:
    models = list(report.models)
    out = io.StringIO()
    out.write("# Performance ceiling\n\n")
    out.write("Inputs: " + ", ".join(f"`{s}`" for s in sources) + "\n\n")
    out.write(
        f"Accuracy in percent. Baseline: `{report.baseline}`. Every figure gives what it rests "
        f"on: n = scored samples (summed over the benchmarks for a macro-average; n=? where a "
        f"CSV row gives none), k = benchmarks, and the models a mean over models is over. "
        f"Macro-averages weigh every benchmark equally; σ is the sample standard deviation "
        f"across benchmarks (ddof=1), '-' with one benchmark, where it is undefined. The "
        f"ceiling (bold) is a model's method with the best macro-average (ties go to the "
        f"baseline, then the method listed first). Ranks: 1 = best; {TIE_RULE}. Brackets: "
        f"{report.intervals}. Samples that ended in an error are not scored.\n"
    )
    if report.warnings:
        out.write("\n" + "".join(f"- ⚠ {w}\n" for w in report.warnings))

    out.write("\n## Macro-average ± σ over benchmarks\n\n")
    rows = [["benchmarks (k)"] + [str(len(report.models[m].benchmarks)) for m in models]]
    rows += [[method] + [_method_cell(report, m, method) for m in models]
             for method in report.methods]  # fmt: skip
    rows.append(
        ["Ceiling − baseline (Δ)"] + [delta_cell(report.models[m], report.baseline) for m in models]
    )
    rows.append(["σ at ceiling − σ at baseline"]
                + [signed(_sub(report.models[m].ceiling_sd, report.models[m].baseline_sd), 1, True)
                   for m in models])  # fmt: skip
    headline = headline_names(report)
    rows.append([f"mean Δ of {headline}"] + [_headline_cell(report.models[m]) for m in models])
    out.write(pipe_table(["method", *models], rows) + "\n")
    sd_note = (
        f"σ {signed(report.headline_sd_delta, sign=True)}, over "
        f"{plural(report.headline_sd_n, 'model')}"
        if report.headline_sd_n
        else "σ -: no model has two benchmarks"
    )
    out.write(
        f"\n**Headline:** the mean gain of {headline} over {report.baseline}, averaged over "
        f"{plural(report.headline_n, 'model')}: **{signed(report.headline_delta, sign=True)}** "
        f"points of accuracy ({sd_note}).\n"
    )
    if report.method_means:
        out.write(
            "\nMean over models per method: "
            + ", ".join(
                f"{k} {v:.2f} ({plural(report.method_means_n.get(k, 0), 'model')})"
                for k, v in report.method_means.items()
            )
            + "\n"
        )

    out.write("\n## How much of the ceiling is selection\n\n")
    out.write(
        "The ceiling is the maximum over methods, so it is biased upward by selection; the "
        "spread of the methods' macro-averages shows how much it stands above a typical one.\n\n"
    )
    rows = []
    for model, m in report.models.items():
        s = m.spread
        rows.append([model, m.ceiling_method, signed(m.ceiling),
                     n_of(method_n(m, m.ceiling_method)), signed(s.min), signed(s.median),
                     signed(s.max), signed(m.ceiling - s.median, sign=True), str(s.methods),
                     str(len(m.benchmarks))])  # fmt: skip
    out.write(pipe_table(["model", "ceiling method", "ceiling", "n", "min", "median", "max",
                          "ceiling − median", "methods", "k"], rows) + "\n")  # fmt: skip

    out.write("\n## Ranks\n\n")
    rows = []
    for model, m in report.models.items():
        ranked = [len(report.rankings[b].baseline) for b in m.benchmarks]
        rows.append([model, f"{m.mean_rank_baseline:.2f} ± {signed(m.rank_sd_baseline)}",
                     f"{m.mean_rank_ceiling:.2f} ± {signed(m.rank_sd_ceiling)}",
                     str(len(m.benchmarks)) + (" ⚠" if m.missing_benchmarks else ""),
                     _span(ranked)])  # fmt: skip
    out.write(pipe_table(["model", "mean rank at baseline ± σ", "mean rank at ceiling ± σ",
                          "benchmarks (k)", "models ranked"], rows) + "\n")  # fmt: skip
    out.write(
        f"\nRank flips (the model ranking at the ceiling differs from the baseline's): "
        f"{len(report.rank_flips)} of {len(report.benchmarks)} benchmarks"
        + (": " + ", ".join(report.rank_flips) if report.rank_flips else "")
        + ".\n"
    )
    for bench in report.rank_flips:
        flip = report.rankings[bench]
        before = " > ".join(f"{m} {flip.baseline_accuracy[m]:.1f}" for m in _order(flip.baseline))
        after = " > ".join(
            f"{m} {flip.ceiling_accuracy[m]:.1f} ({flip.ceiling_methods[m]})"
            for m in _order(flip.ceiling)
        )
        out.write(f"\n- **{bench}**: {before} → {after}")
    if report.rank_flips:
        out.write("\n")

    out.write("\n## Per benchmark\n\nBold: the model's best method on the benchmark.\n")
    _per_benchmark(report, out)

    tokens_known = any(t is not None for t in report.extra_prompt_tokens.values())
    out.write("\n## Extra prompt tokens over the baseline\n\n")
    if tokens_known:
        out.write(
            "Mean prompt tokens per scored sample, method minus baseline, averaged over "
            "benchmarks (every call of a sample counts; the samples are the accuracies', "
            "their n above).\n\n"
        )
        rows = [[method] + [signed(report.models[m].extra_prompt_tokens.get(method), 0)
                            for m in models] + [signed(report.extra_prompt_tokens.get(method), 0)]
                for method in report.methods]  # fmt: skip
        out.write(pipe_table(["method", *models, "mean"], rows) + "\n")
    else:
        out.write("No input recorded prompt tokens (runs record them; a CSV may give a "
                  "prompt_tokens column).\n")  # fmt: skip

    out.write("\n## HPT view\n\n")
    if report.hpt_view:
        out.write(
            "Cells run with a ladder of several strategies are not a prompting method: their "
            "Hierarchical Prompting Index (lower is better) is listed here instead.\n\n"
        )
        rows = []
        for h in report.hpt_view:
            ci = (f" [{h.hpi_ci_low:.2f}, {h.hpi_ci_high:.2f}]" if h.hpi_ci_low is not None
                  and h.hpi_ci_high is not None else "")  # fmt: skip
            if h.chance_hpi is not None:
                ci += f" (chance {h.chance_hpi:.2f})"
            rows.append([h.model, h.benchmark, signed(h.hpi) + ci, signed(h.accuracy, 1),
                         str(h.n), str(h.errors), ", ".join(h.strategies),
                         h.hpi_ci_missing or ""])  # fmt: skip
        out.write(pipe_table(["model", "benchmark", "HPI", "accuracy %", "n", "errors",
                              "ladder", "no interval because"], rows) + "\n")  # fmt: skip
    else:
        out.write("No HPT ladder runs among the inputs.\n")
    return out.getvalue()


def _headline_cell(m: ModelCeiling) -> str:
    if m.headline_delta is None:
        return "-"
    return f"{signed(m.headline_delta, sign=True)} ({plural(len(m.headline_methods), 'method')})"


def _per_benchmark(report: CeilingReport, out: io.StringIO) -> None:
    models = list(report.models)
    headline = headline_names(report)
    acc = {(r.model, r.benchmark, r.method): r for r in report.results}
    for bench in report.benchmarks:
        ranks = report.rankings[bench]
        rows = []
        why: list[str] = []
        for method in report.methods:
            row = [method]
            for model in models:
                r = acc.get((model, bench, method))
                if r is None:
                    row.append("-")
                    continue
                ci = (f" [{r.ci_low:.1f}, {r.ci_high:.1f}]" if r.ci_low is not None
                      and r.ci_high is not None else "")  # fmt: skip
                if r.ci_missing and r.ci_missing != NO_SAMPLES:
                    why.append(f"{model} · {method}: {r.ci_missing}")
                errors = f" ({r.errors} errors excluded)" if r.errors else ""
                text = f"{r.accuracy:.1f}{ci} {n_of(r.n)}{errors}"
                best = ranks.ceiling_methods.get(model) == method
                row.append(f"**{text}**" if best else text)
            rows.append(row)
        rows.append([f"rank baseline → ceiling (of {len(ranks.baseline)})"] + [
            f"{_rank(ranks.baseline.get(m))} → {_rank(ranks.ceiling.get(m))}"
            for m in models])  # fmt: skip
        gain = signed(report.benchmark_gains.get(bench), sign=True)
        over = plural(report.benchmark_gains_n.get(bench, 0), "model")
        out.write(f"\n### {bench}\n\n{pipe_table(['method', *models], rows)}\n")
        if why:
            out.write("\nNo interval: " + "; ".join(why) + ".\n")
        out.write(f"\nMean gain of {headline} over the baseline, over {over}: {gain}\n")
