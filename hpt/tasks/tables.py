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

DEPTH = ReportTable(
    key="depth",
    title="DepthQA · mean judge score per depth, forward and backward discrepancy",
    order=4,
    # Each mean beside the nodes it rests on; "scored" is what the HPI rests on, and climbs
    # the judge left without a score are counted apart, in no figure.
    columns=(
        Column(label="HPI", value="hpi"),
        Column(label="D1", value="depth_scores.1"),
        Column(label="D1 nodes", value="depth_nodes.1", interval=False),
        Column(label="D2", value="depth_scores.2"),
        Column(label="D2 nodes", value="depth_nodes.2", interval=False),
        Column(label="D3", value="depth_scores.3"),
        Column(label="D3 nodes", value="depth_nodes.3", interval=False),
        Column(label="forward", value="forward_discrepancy.overall.value", interval=False),
        Column(label="backward", value="backward_discrepancy.overall.value", interval=False),
        Column(label="scored", value="n", interval=False),
        Column(label="judge missing", value="judge_missing", interval=False),
    ),
    layout="cells",
)


def _discrepancy(direction: str, table: int) -> ReportTable:
    """The paper's tables 12 and 13: value, intensity and frequency per depth transition."""
    return ReportTable(
        key=f"depth_{direction}",
        title=f"DepthQA · {direction} discrepancy: value, intensity and frequency "
        f"(paper's table {table})",
        order=table,
        columns=tuple(
            Column(
                label=f"{step} {what}",
                value=f"{direction}_discrepancy.{key}.{what}",
                interval=False,
            )
            for step, key in (("D1→D2", "d1_d2"), ("D2→D3", "d2_d3"), ("all", "overall"))
            for what in ("value", "intensity", "frequency", "nodes")
        ),
        layout="cells",
    )


FORWARD = _discrepancy("forward", 12)
BACKWARD = _discrepancy("backward", 13)

MIN_K = ReportTable(
    key="depth_min_k",
    title="DepthQA · Min-K% (K = 20% of the first 128 tokens) of predictions per depth: mean "
    "negative log-likelihood, lower = more likely memorised (paper's section 4.3)",
    order=14,
    columns=tuple(
        Column(label=f"D{d} {what}", value=f"min_k_prob.{d}.{what}", interval=False)
        for d in (1, 2, 3)
        for what in ("median", "mean", "n")
    ),
    layout="cells",
)
