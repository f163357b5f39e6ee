"""The report tables HPT's datasets contribute to (the paper's tables 1-3). A new dataset
declares one of these, or its own ``ReportTable``, on its task class; report code lists no
dataset names."""

from hpt.results.info import DEFAULT_TABLE, Column, ReportTable

ANSWERS = DEFAULT_TABLE

CODE = ReportTable(
    key="code",
    title="Table 2 · HumanEval: HPI and pass@1",
    order=2,
    columns=(Column(label="HPI", value="hpi"), Column(label="pass@1", value="pass_at_1")),
    layout="cells",
)

TEXT = ReportTable(
    key="text",
    title="Table 3 · HPI and BLEU / ROUGE-L per threshold",
    order=3,
    columns=(
        Column(label="HPI", value="hpi"),
        Column(label="{metric}", value="text_score", interval=False),
    ),
    per_threshold=True,
)
