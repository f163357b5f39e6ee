"""The results room: what a run saves (records), how it is scored (scoring, tally), what a
report knows of each dataset (info), what calls cost (costs), and the run directory (store).
It imports nothing from the rooms that run models, so any run directory can be read with only
this room."""

from hpt.results.costs import ModelPrice, PriceBook, PriceError, call_cost, worst_cost
from hpt.results.info import Column, ReportTable, TaskInfo
from hpt.results.reader import RunInfo, read_records, read_run_info
from hpt.results.records import Attempt, Call, Cell, Reading, SampleRecord, Selection
from hpt.results.rundir import RunDirError
from hpt.results.scoring import hpi_score, pass_at_k, register_corpus_rule, sample_score
from hpt.results.tally import ReadingSummary, Summary, Tally, summarize, summarize_cells

__all__ = [
    "Attempt",
    "Call",
    "Cell",
    "Column",
    "ModelPrice",
    "PriceBook",
    "PriceError",
    "Reading",
    "ReadingSummary",
    "ReportTable",
    "RunDirError",
    "RunInfo",
    "SampleRecord",
    "Selection",
    "Summary",
    "Tally",
    "TaskInfo",
    "call_cost",
    "hpi_score",
    "pass_at_k",
    "read_records",
    "read_run_info",
    "register_corpus_rule",
    "sample_score",
    "summarize",
    "summarize_cells",
    "worst_cost",
]
