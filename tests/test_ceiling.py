"""``hpt ceiling``: the paper's table 3 and section 3 numbers recomputed from its tables 4-5,
ranks and ties, incomplete inputs, CSV errors, run directories beside a CSV, the HPT view,
and the command end to end."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from hpt.backends.base import Message, Usage
from hpt.reports import ReportError
from hpt.reports.ceiling import average_ranks, compute
from hpt.reports.ceiling_inputs import read_runs, read_scores
from hpt.reports.ceiling_intervals import wilson_interval
from hpt.reports.ceiling_markdown import markdown
from hpt.reports.ceiling_types import MethodResult
from hpt.results import Attempt, Call
from hpt.results.records import SampleRecord
from hpt.results.rundir import RunDirError
from tests.run_fixtures import make_record, write_run
from tests.test_cli import hpt

PAPER = Path(__file__).parent / "data" / "dspy_helm_tables.csv"
CLAUDE, GEMINI, GPT4O, O3 = "claude-3.7-sonnet", "gemini-2.0-flash", "gpt-4o", "o3-mini"
MODELS = (CLAUDE, GEMINI, GPT4O, O3)
HEADLINE = ("dspy_cot", "dspy_bfrs", "dspy_mipro")

# Table 3 as printed: macro-average and sigma per method, columns in MODELS order.
TABLE3 = {
    "helm_baseline": [(64.81, 22.6), (61.41, 23.8), (61.04, 23.9), (70.93, 19.7)],
    "dspy_predict": [(65.10, 22.6), (61.69, 22.7), (59.69, 25.0), (73.24, 20.3)],
    "dspy_cot": [(69.36, 18.8), (66.21, 20.9), (65.67, 22.5), (72.73, 19.7)],
    "dspy_bfrs": [(69.34, 19.0), (66.19, 21.2), (65.87, 22.9), (73.07, 19.7)],
    "dspy_mipro": [(69.80, 19.0), (66.19, 21.1), (65.34, 23.0), (73.07, 19.6)],
}


def _r(model: str, bench: str, method: str, acc: float, **kw: object) -> MethodResult:
    return MethodResult(model=model, benchmark=bench, method=method, accuracy=acc, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the paper's numbers


def test_table3_follows_from_tables_4_and_5() -> None:
    rows = read_scores(PAPER)
    assert len(rows) == 7 * 4 * 5
    report = compute(rows, baseline="helm_baseline", headline_methods=HEADLINE)
    # Every one of table 3's 20 macro-averages (2 decimals) and sigmas (1 decimal, ddof=1).
    for method, printed in TABLE3.items():
        for model, (avg, sd) in zip(MODELS, printed, strict=True):
            stat = report.models[model].methods[method]
            assert round(stat.macro_avg, 2) == avg, (model, method)
            assert stat.sd is not None and round(stat.sd, 1) == sd, (model, method)
            assert stat.benchmarks == 7
    # The green cells (ceilings) and the last row, Ceiling - Baseline.
    ceilings = {m: report.models[m].ceiling_method for m in MODELS}
    assert ceilings == {CLAUDE: "dspy_mipro", GEMINI: "dspy_cot", GPT4O: "dspy_bfrs",
                        O3: "dspy_predict"}  # fmt: skip
    deltas = [round(report.models[m].delta, 2) for m in MODELS]
    assert deltas == [4.99, 4.80, 4.83, 2.31]
    # Section 3.1: "+4%" on average; non-reasoning models +5%, o3 Mini +2%; sigma -2%.
    assert report.headline_delta is not None and round(report.headline_delta) == 4
    assert report.headline_delta == pytest.approx(4.02, abs=0.005)
    per_model = {m: report.models[m].headline_delta for m in MODELS}
    assert round(statistics.fmean(per_model[m] for m in (CLAUDE, GEMINI, GPT4O))) == 5  # type: ignore[misc]
    assert round(per_model[O3]) == 2  # type: ignore[arg-type]
    assert report.headline_sd_delta is not None and round(report.headline_sd_delta) == -2
    # Section 3.1, gaps: o3 Mini vs Claude 70.9 vs 64.8 at baseline, 73.2 vs 69.8 at ceiling.
    assert round(report.models[O3].ceiling, 1) == 73.2
    assert round(report.models[CLAUDE].ceiling, 1) == 69.8
    # Section 3.1, ranking stability: mean rank and rank sigma, baseline -> ceiling.
    ranks = {
        O3: (1.29, 1.57, 0.76, 0.79), CLAUDE: (2.29, 2.00, 0.95, 1.15),
        GPT4O: (3.14, 3.00, 0.90, 1.00), GEMINI: (3.29, 3.43, 0.76, 0.53),
    }  # fmt: skip
    for model, expected in ranks.items():
        m = report.models[model]
        got = (m.mean_rank_baseline, m.mean_rank_ceiling, m.rank_sd_baseline, m.rank_sd_ceiling)
        assert tuple(round(x, 2) for x in got) == expected, model  # type: ignore[arg-type]
    # "alters three leaderboard rankings": MMLU-Pro, GSM8K, MedCalc-Bench.
    assert report.rank_flips == ["mmlu_pro", "gsm8k", "medcalc"]
    mmlu = report.rankings["mmlu_pro"]
    assert (mmlu.baseline[O3], mmlu.baseline[CLAUDE]) == (1, 2)
    assert (mmlu.ceiling[CLAUDE], mmlu.ceiling[O3]) == (1, 2)
    assert (mmlu.ceiling_accuracy[CLAUDE], mmlu.ceiling_accuracy[O3]) == (80.6, 78.4)
    gsm = report.rankings["gsm8k"]
    assert gsm.ceiling_methods[GPT4O] == "dspy_cot" and gsm.ceiling_accuracy[GPT4O] == 90.7
    assert gsm.ceiling[GPT4O] < gsm.ceiling[GEMINI] and gsm.baseline[GPT4O] > gsm.baseline[GEMINI]
    # Section 3.2: the mean over models per method, 64.6 -> 64.9 -> 68.5 -> 68.6.
    # (The baseline's is 64.55 from the tables' rounded values: a rounding tie, printed 64.6.)
    printed = {"helm_baseline": 64.6, "dspy_predict": 64.9, "dspy_cot": 68.5,
               "dspy_bfrs": 68.6, "dspy_mipro": 68.6}  # fmt: skip
    assert report.method_means["helm_baseline"] == pytest.approx(64.55, abs=1e-9)
    for method, value in printed.items():
        assert report.method_means[method] == pytest.approx(value, abs=0.05 + 1e-9), method
    # Section 3.1, benchmark sensitivity: reasoning tasks +5.5, HeadQA and Medec +0.4.
    gains = report.benchmark_gains
    reasoning = ["mmlu_pro", "gpqa", "gsm8k", "medcalc", "medbullets"]
    assert round(statistics.fmean(gains[b] for b in reasoning), 1) == 5.5  # type: ignore[misc]
    # From the tables' rounded values this is 0.45 (the paper, from unrounded ones, 0.4).
    assert statistics.fmean([gains["headqa"], gains["medec"]]) == pytest.approx(0.4, abs=0.051)  # type: ignore[list-item]
    # A published table has no per-sample results: no intervals, no errors, no tokens.
    assert all(r.ci_low is None and r.ci_high is None for r in report.results)
    assert report.errors_excluded == 0 and report.warnings == []
    assert all(v is None for v in report.extra_prompt_tokens.values())


def test_spread_beside_the_ceiling() -> None:
    report = compute(read_scores(PAPER), headline_methods=HEADLINE)
    spread = report.models[GEMINI].spread
    # Gemini: 61.41 (baseline) 61.69 66.19 66.19 66.21 -> median 66.19, max = the ceiling.
    assert (round(spread.min, 2), round(spread.median, 2), round(spread.max, 2)) == (
        61.41, 66.19, 66.21)  # fmt: skip
    assert spread.max == report.models[GEMINI].ceiling and spread.methods == 5


# ---------------------------------------------------------------- ranks, ties, sigma


def test_average_ranks_share_ties() -> None:
    assert average_ranks({"a": 90.0, "b": 80.0, "c": 70.0}) == {"a": 1, "b": 2, "c": 3}
    assert average_ranks({"a": 80.0, "b": 90.0, "c": 90.0}) == {"b": 1.5, "c": 1.5, "a": 3}
    assert average_ranks({"a": 5.0, "b": 5.0, "c": 5.0}) == {"a": 2, "b": 2, "c": 2}
    # Equal up to floating-point noise is a tie.
    assert average_ranks({"a": 100 * (1 / 3), "b": 100 / 3}) == {"a": 1.5, "b": 1.5}


def test_rank_flips_on_a_hand_built_example() -> None:
    rows = [
        # b1: A leads at baseline; B's cot overtakes A's best -> a flip.
        _r("A", "b1", "base", 80), _r("A", "b1", "cot", 82),
        _r("B", "b1", "base", 70), _r("B", "b1", "cot", 85),
        # b2: both gain, the order stays -> no flip.
        _r("A", "b2", "base", 60), _r("A", "b2", "cot", 70),
        _r("B", "b2", "base", 50), _r("B", "b2", "cot", 55),
        # b3: tied at baseline (1.5 each); A pulls ahead -> the ranking changes.
        _r("A", "b3", "base", 40), _r("A", "b3", "cot", 45),
        _r("B", "b3", "base", 40), _r("B", "b3", "cot", 40),
    ]  # fmt: skip
    report = compute(rows, baseline="base", headline_methods=["cot"])
    assert report.rank_flips == ["b1", "b3"]
    assert report.rankings["b3"].baseline == {"A": 1.5, "B": 1.5}
    assert report.rankings["b3"].ceiling == {"A": 1, "B": 2}
    # B's ceiling on b3: cot ties base -> the baseline keeps it.
    assert report.rankings["b3"].ceiling_methods["B"] == "base"
    a, b = report.models["A"], report.models["B"]
    assert a.mean_rank_baseline == pytest.approx((1 + 1 + 1.5) / 3)
    assert a.mean_rank_ceiling == pytest.approx((2 + 1 + 1) / 3)
    assert b.rank_sd_baseline == pytest.approx(statistics.stdev([2, 2, 1.5]))
    # Macro-averages, deltas, the headline (one headline method: its gain).
    assert a.methods["cot"].macro_avg == pytest.approx((82 + 70 + 45) / 3)
    assert a.delta == pytest.approx((82 + 70 + 45) / 3 - 60)
    assert b.delta == pytest.approx((85 + 55 + 40) / 3 - (70 + 50 + 40) / 3)
    assert report.headline_delta == pytest.approx((a.delta + b.delta) / 2)
    assert report.benchmark_gains["b1"] == pytest.approx((2 + 15) / 2)


def test_ceiling_tie_goes_to_the_baseline_and_sigma_of_one_benchmark_is_null() -> None:
    rows = [_r("A", "only", "base", 70), _r("A", "only", "cot", 70), _r("A", "only", "x", 60),
            _r("B", "only", "base", 70), _r("B", "only", "cot", 71)]  # fmt: skip
    report = compute(rows, baseline="base", headline_methods=["cot"])
    a = report.models["A"]
    assert (a.ceiling_method, a.delta) == ("base", 0)
    assert a.methods["base"].sd is None and a.rank_sd_baseline is None
    assert a.rank_sd_ceiling is None and a.baseline_sd is None
    assert a.headline_sd_delta is None and report.headline_sd_delta is None
    data = json.loads(report.model_dump_json())
    assert data["models"]["A"]["methods"]["base"]["sd"] is None
    assert data["models"]["A"]["rank_sd_baseline"] is None
    # Tied at baseline (1.5 each), B ahead at the ceiling: one flip.
    assert report.rank_flips == ["only"]


# ---------------------------------------------------------------- incomplete inputs


def test_missing_baseline_names_the_model() -> None:
    rows = [_r("A", "b", "base", 70), _r("B", "b", "cot", 71), _r("C", "b", "x", 1)]
    with pytest.raises(ReportError, match=r"no baseline \(base\) results for B \(it has cot\); C"):
        compute(rows, baseline="base")


def test_a_method_must_cover_the_models_benchmarks() -> None:
    rows = [_r("A", "b1", "base", 70), _r("A", "b2", "base", 60), _r("A", "b1", "cot", 80)]
    with pytest.raises(ReportError, match="A: method cot lacks b2, which its other methods have"):
        compute(rows, baseline="base")


def test_a_model_missing_a_benchmark_is_averaged_over_its_own_and_flagged() -> None:
    rows = [_r("A", "b1", "base", 70), _r("A", "b2", "base", 60),
            _r("B", "b1", "base", 50), _r("B", "b1", "cot", 90)]  # fmt: skip
    report = compute(rows, baseline="base", headline_methods=["cot"])
    b = report.models["B"]
    assert b.missing_benchmarks == ["b2"] and b.benchmarks == ["b1"]
    assert b.ceiling == 90 and b.mean_rank_baseline == 2 and b.mean_rank_ceiling == 1
    assert report.rankings["b2"].baseline == {"A": 1}
    # A lone model on b2 is no flip; b1 is.
    assert report.rank_flips == ["b1"]
    assert any("B has no results on b2" in w for w in report.warnings)
    assert any("A has no cot" in w for w in report.warnings)
    assert report.models["A"].headline_delta is None
    assert report.headline_delta == pytest.approx(40)


def test_duplicates_and_no_results_are_refused() -> None:
    rows = [_r("A", "b", "base", 70, source="x.csv:2"), _r("A", "b", "base", 71, source="run")]
    with pytest.raises(ReportError, match=r"A · b · base is given twice \(x.csv:2 and run\)"):
        compute(rows, baseline="base")
    with pytest.raises(ReportError, match="no method results"):
        compute([], baseline="base")


# ---------------------------------------------------------------- the CSV


def test_csv_comments_and_optional_columns(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("# published numbers\nmodel,method,benchmark,accuracy,n,prompt_tokens\n"
                    "\nA, base ,b,71.5,100,\nA,cot,b,80,,250.5\n")  # fmt: skip
    rows = read_scores(path)
    assert rows[0] == MethodResult(model="A", benchmark="b", method="base", accuracy=71.5,
                                   n=100, source=f"{path}:4")  # fmt: skip
    assert rows[1].n is None and rows[1].prompt_tokens == 250.5
    assert rows[1].source == f"{path}:5"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model,method,accuracy\nA,base,70\n", r"s.csv:1: missing column\(s\) benchmark"),
        ("model,benchmark,method,accuracy\nA,b,base,70\nA,b,cot,seventy\n",
         r"s.csv:3: accuracy 'seventy' is not a number"),
        ("# c\nmodel,benchmark,method,accuracy\n\nA,b,base,\n", r"s.csv:4: accuracy '' is not"),
        ("model,benchmark,method,accuracy\nA,b,base,170\n", r"s.csv:2: accuracy 170 is not a per"),
        ("model,benchmark,method,accuracy\nA,b,base,nan\n", r"s.csv:2: accuracy 'nan' is not a fin"),
        ("model,benchmark,method,accuracy,n\nA,b,base,70,1.5\n", r"s.csv:2: n '1.5' is not a count"),
        ("model,benchmark,method,accuracy\nA,,base,70\n", r"s.csv:2: empty benchmark"),
        ("model,benchmark,method,accuracy\nA,b,base\n", r"s.csv:2: 3 field\(s\), the header has 4"),
    ],
)  # fmt: skip
def test_csv_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.csv"
    path.write_text(text)
    with pytest.raises(ReportError, match=message):
        read_scores(path)


def test_missing_csv(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"scores file .*nope.csv does not exist"):
        read_scores(tmp_path / "nope.csv")


# ---------------------------------------------------------------- run directories


def method_record(
    sample_id: str, method: str, *, dataset: str = "boolq", model: str = "alpha",
    resolved: bool = True, prompt_tokens: int = 100, error: str | None = None,
) -> SampleRecord:  # fmt: skip
    """One sample of a one-strategy run: a single attempt at level 1 (m = 1, penalty 0, so
    an unresolved sample also scores m + penalty = 1)."""
    call = Call(purpose="answer", model=model, messages=[Message(role="user", content="Q")],
                completion="True", usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=5))  # fmt: skip
    attempt = Attempt(level=1, strategy=method, calls=[call], completion="True",
                      parsed="True", resolved=resolved and not error, error=error)  # fmt: skip
    ok = resolved and not error
    return SampleRecord(
        sample_id=sample_id, dataset=dataset, model=model, strategies=[method], m=1,
        penalty=0.0, target="True", resolved_level=1 if ok else None,
        hpi_score=None if error else 1.0, error=error, attempts=[attempt],
    )  # fmt: skip


def _runs(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    # alpha · boolq · helm_baseline: 2 resolved, 1 not, 1 error -> 2/3, 1 excluded, 100 tokens
    base = write_run(tmp_path / "base", [
        method_record("a", "helm_baseline"), method_record("b", "helm_baseline"),
        method_record("c", "helm_baseline", resolved=False),
        method_record("d", "helm_baseline", error="HTTP 500", prompt_tokens=7),
    ])  # fmt: skip
    # alpha · boolq · dspy_cot: 3 of 3, 250 prompt tokens a sample (over two calls: 100 + 150)
    cot = [method_record(s, "dspy_cot", prompt_tokens=100) for s in "abc"]
    for r in cot:
        extra = r.attempts[0].calls[0].model_copy(update={"usage": Usage(prompt_tokens=150)})
        r.attempts[0].calls.append(extra)
    cot_dir = write_run(tmp_path / "cot", cot)
    # An HPT ladder run of alpha on boolq: levels 1 and 2 -> HPI 1.5.
    ladder = write_run(tmp_path / "ladder", [make_record("a", level=1), make_record("b", level=2)])
    scores = tmp_path / "leaderboard.csv"
    scores.write_text(
        "model,benchmark,method,accuracy,n\n"
        "alpha,csqa,helm_baseline,50,100\nalpha,csqa,dspy_cot,70,100\n"
        "beta,boolq,helm_baseline,80,\nbeta,boolq,dspy_cot,60,\n"
        "beta,csqa,helm_baseline,60,\nbeta,csqa,dspy_cot,75,\n"
    )
    return base, cot_dir, ladder, scores


def test_runs_beside_a_csv(tmp_path: Path) -> None:
    base, cot, ladder, scores = _runs(tmp_path)
    methods, ladders = read_runs([base, cot, ladder])
    report = compute(methods + read_scores(scores), headline_methods=["dspy_cot"],
                     ladders=ladders)  # fmt: skip
    rows = {(r.model, r.benchmark, r.method): r for r in report.results}
    b = rows["alpha", "boolq", "helm_baseline"]
    assert b.accuracy == pytest.approx(200 / 3) and (b.n, b.errors) == (3, 1)
    # The run's interval is the Wilson score interval of 2 resolved of 3 scored, in percent.
    assert (b.ci_low, b.ci_high) == pytest.approx((20.766, 93.851), abs=1e-3)
    assert b.ci_low is not None and b.ci_low <= b.accuracy <= b.ci_high  # type: ignore[operator]
    assert b.ci_missing is None and b.prompt_tokens == 100 and b.source == str(base)
    # 3 of 3: an interval that says how little 3 samples show, not [100, 100].
    c = rows["alpha", "boolq", "dspy_cot"]
    assert (c.accuracy, c.ci_high, c.prompt_tokens) == (100, 100, 250)
    assert c.ci_low == pytest.approx(43.850, abs=1e-3)
    # CSV rows: hpt does not see their samples, so no interval, and the row says why.
    csv_row = rows["alpha", "csqa", "dspy_cot"]
    assert (csv_row.ci_low, csv_row.ci_high, csv_row.n) == (None, None, 100)
    assert csv_row.ci_missing is not None and "published" in csv_row.ci_missing
    alpha = report.models["alpha"]
    assert alpha.methods["helm_baseline"].macro_avg == pytest.approx((200 / 3 + 50) / 2)
    assert alpha.methods["dspy_cot"].macro_avg == 85
    assert alpha.ceiling_method == "dspy_cot"
    # Tokens only where both the method and the baseline recorded them (boolq): 250 - 100.
    assert alpha.extra_prompt_tokens == {"helm_baseline": 0, "dspy_cot": 150}
    assert report.models["beta"].extra_prompt_tokens == {"helm_baseline": None, "dspy_cot": None}
    assert report.extra_prompt_tokens["dspy_cot"] == 150
    # The errored sample is excluded and reported, never counted wrong.
    assert report.errors_excluded == 1
    assert any("1 sample(s) ended in an error" in w for w in report.warnings)
    # The ladder run is not a method: the HPT view holds its HPI.
    assert "role" not in report.methods and report.methods == ["helm_baseline", "dspy_cot"]
    assert report.hpi == {"alpha": {"boolq": 1.5}}
    view = report.hpt_view[0]
    assert view.strategies[0] == "role" and view.n == 2
    # Two samples are too few for a bootstrap: none, and why.
    assert view.hpi_ci_low is None and view.hpi_ci_missing == (
        "2 scored sample(s): a bootstrap needs at least 10"
    )
    # boolq: alpha 66.7 vs beta 80 at baseline, 100 vs 80 at the ceiling -> a flip; csqa:
    # 50 vs 60, then 70 vs 75 -> none. beta's best macro-average is its baseline.
    assert report.rank_flips == ["boolq"]
    assert report.models["beta"].ceiling_method == "helm_baseline"
    md = markdown(report, [str(base)])
    assert "## HPT view" in md and "| alpha | boolq | 1.50 | 100.0 | 2 |" in md
    assert "**100.0 [43.9, 100.0] n=3**" in md and "| 50.0 n=100 |" in md
    assert "66.7 [20.8, 93.9] n=3 (1 errors excluded)" in md


def test_runs_refuse_missing_dirs_and_all_errors(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match=r"run directory .*nowhere does not exist"):
        read_runs([tmp_path / "nowhere"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunDirError, match="is not a run directory"):
        read_runs([tmp_path / "empty"])
    broken = write_run(tmp_path / "broken", [method_record("a", "x", error="boom")])
    with pytest.raises(ReportError, match="all 1 sample\\(s\\) ended in an error"):
        read_runs([broken])


def test_a_threshold_cell_is_named_as_the_report_names_it(tmp_path: Path) -> None:
    """One spelling of a cell: a benchmark read from runs is ``hpt report``'s dataset label."""
    at = {"dataset": "iwslt", "threshold": 0.15}
    base = write_run(
        tmp_path / "base", [method_record(s, "helm_baseline").model_copy(update=at) for s in "ab"]
    )
    ladder = write_run(tmp_path / "ladder", [
        make_record("a", level=1).model_copy(update={**at, "variant": "v"}),
        make_record("b", level=1, mode="adaptive").model_copy(update=at)])  # fmt: skip
    methods, ladders = read_runs([base, ladder])
    assert [m.benchmark for m in methods] == ["iwslt @0.15"]
    assert [h.benchmark for h in ladders] == ["iwslt @0.15 · v", "iwslt @0.15 (adaptive)"]
    # The same cell and ladder in two directories is one result given twice.
    copy = write_run(tmp_path / "copy", [method_record("a", "helm_baseline").model_copy(
        update=at)])  # fmt: skip
    with pytest.raises(RunDirError, match=r"iwslt @0\.15 · alpha · standard \(helm_baseline\) "
                       r"is in both .*base and .*copy; keep one"):  # fmt: skip
        read_runs([base, copy])


# ---------------------------------------------------------------- the command


def test_cli_end_to_end(tmp_path: Path) -> None:
    base, cot, ladder, scores = _runs(tmp_path)
    out = tmp_path / "out"
    result = hpt("ceiling", str(base), str(cot), str(ladder), "--scores", str(scores),
                 "--headline-methods", "dspy_cot", "--out", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert "Performance ceiling" in said and "rank flips on 1/2 benchmarks (boolq)" in said
    assert "warning: 1 sample(s) ended in an error" in said
    data = json.loads((out / "ceiling.json").read_text())
    for key in ("models", "headline_delta", "rank_flips", "hpi"):
        assert key in data
    contract = {"methods", "ceiling_method", "ceiling", "delta", "mean_rank_baseline",
                "mean_rank_ceiling", "rank_sd_baseline", "rank_sd_ceiling"}  # fmt: skip
    assert contract <= set(data["models"]["alpha"])
    assert set(data["models"]["alpha"]["methods"]["dspy_cot"]) >= {"macro_avg", "sd"}
    assert data["rank_flips"] == ["boolq"] and data["hpi"] == {"alpha": {"boolq": 1.5}}
    assert data["headline_delta"] == pytest.approx(((85 - (200 / 3 + 50) / 2) + (67.5 - 70)) / 2)
    md = (out / "ceiling.md").read_text()
    assert "# Performance ceiling" in md and "## HPT view" in md
    for stem in ("ceiling_methods", "ceiling_deltas", "ceiling_tokens"):
        assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_defaults_and_errors(tmp_path: Path) -> None:
    # Only a CSV: written to the current directory; no tokens, so no tokens plot.
    result = hpt("ceiling", "--scores", str(PAPER), "--no-plots", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert "+4.02 points" in said and "3/7 benchmarks (mmlu_pro, gsm8k, medcalc)" in said
    data = json.loads((tmp_path / "ceiling.json").read_text())
    assert data["models"][O3]["ceiling_method"] == "dspy_predict"
    assert not list(tmp_path.glob("*.png"))
    # With runs: written into the first run directory.
    base, cot, _, scores = _runs(tmp_path / "runs")
    result = hpt("ceiling", str(base), str(cot), "--scores", str(scores), "--no-plots")
    assert result.returncode == 0, result.stderr
    assert (base / "ceiling.json").is_file() and (base / "ceiling.md").is_file()
    bad = tmp_path / "bad.csv"
    bad.write_text("model,benchmark,method,accuracy\nA,b,helm_baseline,70\nA,b,cot,x\n")
    cases = [
        (["ceiling", str(tmp_path / "missing-run")], "missing-run does not exist"),
        (["ceiling", "--scores", str(bad)], "bad.csv:3: accuracy 'x' is not a number"),
        (["ceiling", "--scores", str(PAPER), "--baseline", "nope"], "no baseline (nope) results"),
        (["ceiling"], "give run directories, --scores FILE.csv, or both"),
    ]
    for args, message in cases:
        result = hpt(*args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stdout)
        assert message in " ".join(result.stderr.split()), (args, result.stderr)


def test_the_hpt_view_shows_the_chance_hpi(tmp_path: Path) -> None:
    """A ladder cell's HPI sits beside a coin-flipping guesser's on the same ladder."""
    records = [
        make_record(f"s{i}", level=level).model_copy(update={"options": 2})
        for i, level in enumerate((1, 2, None))
    ]
    methods, ladders = read_runs([write_run(tmp_path / "ladder", records)])
    assert methods == [] and ladders[0].chance_hpi == pytest.approx((57 + 6.71) / 32)
    baseline = write_run(
        tmp_path / "base",
        [make_record(f"s{i}", level=1).model_copy(update={"strategies": ["helm_baseline"]})
         for i in range(2)],
    )  # fmt: skip
    methods, _ = read_runs([baseline])
    md = markdown(compute(methods, ladders=ladders, headline_methods=()), ["runs"])
    assert "(chance 1.99)" in md


# ---------------------------------------------------------------- n and intervals


def test_a_ceiling_of_three_samples_says_so_everywhere(tmp_path: Path) -> None:
    """The issue's case: a ceiling made of one small cell per method. Every figure carries
    its n (or k benchmarks, or the models averaged); 0/3 gets a real interval, not
    [0.0, 0.0]; sigma over one benchmark is '-' and said to be undefined."""
    base = write_run(tmp_path / "base", [method_record(s, "helm_baseline", resolved=False)
                                         for s in "abc"])  # fmt: skip
    cot = write_run(tmp_path / "cot", [method_record(s, "dspy_cot", resolved=s == "a")
                                       for s in "abc"])  # fmt: skip
    methods, _ = read_runs([base, cot])
    report = compute(methods, headline_methods=["dspy_cot"])
    rows = {r.method: r for r in report.results}
    assert rows["helm_baseline"].n == 3 and rows["helm_baseline"].accuracy == 0
    low, high = wilson_interval(0, 3)
    assert (low, high) == (0.0, pytest.approx(0.5615, abs=1e-4))
    assert (rows["helm_baseline"].ci_low, rows["helm_baseline"].ci_high) == (0.0, 100 * high)
    alpha = report.models["alpha"]
    assert alpha.methods["dspy_cot"].n == 3 and alpha.methods["dspy_cot"].benchmarks == 1
    assert alpha.methods["dspy_cot"].sd is None and alpha.delta == pytest.approx(100 / 3)
    assert (report.headline_n, report.headline_sd_n) == (1, 0)
    assert report.method_means_n == {"helm_baseline": 1, "dspy_cot": 1}
    assert report.benchmark_gains_n == {"boolq": 1}

    md = markdown(report, ["runs"])
    assert "| benchmarks (k) | 1 |" in md
    assert "| **dspy_cot** |" not in md and "**33.33 ± - (n=3)**" in md
    assert "| helm_baseline | 0.00 ± - (n=3) |" in md
    assert "+33.33 (n=3 vs 3)" in md and "averaged over 1 model:" in md
    assert "σ -: no model has two benchmarks" in md
    assert "0.0 [0.0, 56.1] n=3" in md and "[0.0, 0.0]" not in md
    assert "33.3 [6.1, 79.2] n=3" in md
    assert "rank baseline → ceiling (of 1)" in md and "over 1 model: +33.33" in md

    out = tmp_path / "out"
    result = hpt("ceiling", str(base), str(cot), "--headline-methods", "dspy_cot",
                 "--out", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert "n=3" in said and "+33.33 points over 1 model" in said
    data = json.loads((out / "ceiling.json").read_text())
    assert data["models"]["alpha"]["methods"]["helm_baseline"]["n"] == 3
    (zero,) = [r for r in data["results"] if r["method"] == "helm_baseline"]
    assert (zero["n"], zero["ci_low"], zero["ci_missing"]) == (3, 0.0, None)
    assert zero["ci_high"] == pytest.approx(56.15, abs=0.01)
    assert "Wilson" in data["intervals"]


def test_the_plots_label_each_value_with_its_n(tmp_path: Path, monkeypatch) -> None:
    from hpt.reports import ceiling_plots

    drawn = {}
    monkeypatch.setattr(ceiling_plots, "_save",
                        lambda fig, out, stem: drawn.setdefault(stem, fig) and [])  # fmt: skip
    rows = [_r("A", "b1", "base", 70, n=40, prompt_tokens=10.0),
            _r("A", "b1", "cot", 80, n=38, prompt_tokens=30.0),
            _r("A", "b2", "base", 60), _r("A", "b2", "cot", 65)]  # fmt: skip
    report = compute(rows, baseline="base", headline_methods=["cot"])
    ceiling_plots.methods_chart(report, tmp_path)
    ceiling_plots.delta_heatmap(report, tmp_path)
    ceiling_plots.tokens_chart(report, tmp_path)

    def texts(stem: str) -> list[str]:
        return [t.get_text() for ax in drawn[stem].axes for t in ax.texts] + [
            t.get_text() for ax in drawn[stem].axes for t in ax.get_xticklabels()]  # fmt: skip

    # b2 has no n: the macro-averages' n is unknown, and said so.
    assert "n=?" in texts("ceiling_methods") and "A (k=2)" in texts("ceiling_methods")
    assert "+10.0\nn=38/40" in texts("ceiling_deltas")
    assert "+5.0\nn=?/?" in texts("ceiling_deltas")
    assert "n=?" in texts("ceiling_tokens")


def test_no_interval_where_none_can_be_computed(tmp_path: Path) -> None:
    # Two draws of each sample: the climbs are not independent, so no Wilson interval.
    drawn = [method_record(s, "helm_baseline", resolved=s == "a").model_copy(update={"draw": d})
             for s in "ab" for d in (0, 1)]  # fmt: skip
    methods, _ = read_runs([write_run(tmp_path / "draws", drawn)])
    (result,) = methods
    assert result.n == 4 and result.ci is None
    assert result.ci_missing is not None and "drawn more than once" in result.ci_missing
    md = markdown(compute(methods, headline_methods=()), ["runs"])
    assert "**50.0 n=4**" in md
    assert "No interval: alpha · helm_baseline: samples drawn more than once" in md
    # A ladder of 12 samples all resolved at level 1: a bootstrap collapses to a point.
    same = [make_record(f"s{i}", level=1) for i in range(12)]
    _, (ladder,) = read_runs([write_run(tmp_path / "same", same)])
    assert ladder.hpi_ci is None and ladder.hpi_ci_missing is not None
    assert "scored the same" in ladder.hpi_ci_missing
    # 12 samples with different scores: an interval around the HPI.
    mixed = [make_record(f"s{i}", level=1 + i % 3) for i in range(12)]
    _, (ladder,) = read_runs([write_run(tmp_path / "mixed", mixed)])
    assert ladder.hpi_ci is not None and ladder.hpi_ci_missing is None
    assert ladder.hpi_ci[0] < 2.0 < ladder.hpi_ci[1]


def test_a_climb_no_judge_scored_counts_nowhere_whatever_score_it_was_saved_with(
    tmp_path: Path,
) -> None:
    """Older runs saved an hpi_score for a climb whose judge gave no score; reports leave it
    out of n, and the ceiling's mean prompt tokens per scored sample now do too (they summed
    its tokens while dividing by an n without it: 420 where 320 is right)."""
    from hpt.results.records import Verdict

    records = []
    for i in range(6):
        record = make_record(f"s{i}", level=1 if i % 2 else None, m=1, tokens=(100 * (i + 1), 10))
        record.strategies = ["helm_baseline"]
        for attempt in record.attempts:
            attempt.strategy = "helm_baseline"
        if i == 4:  # the judge gave no score, yet hpi_score was saved
            record.attempts[-1].verdict = Verdict(score=None, feedback="")
            assert record.hpi_score is not None
        records.append(record)
    methods, _ = read_runs([write_run(tmp_path / "run", records)])
    (method,) = methods
    assert method.n == 5
    assert method.prompt_tokens == pytest.approx((100 + 200 + 300 + 400 + 600) / 5)
