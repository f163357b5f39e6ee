"""DepthQA metrics: depthwise accuracy, forward/backward discrepancy, Min-K%, agreement.

Pure functions over plain mappings (node id -> judge score, depth, neighbours), so they
need no graph class and no model. Paper: Ko et al., "Hierarchical Deconstruction of LLM
Reasoning: A Graph-Based Framework for Analyzing Knowledge Utilization" (DepthQA), sections
4.1 and 4.3, appendix F and G. Departures from the reference code (kaistAI/
knowledge-reasoning, src/evaluation/metric_calculator.py), each a defect there:

* a missing judge score is left out, not counted as 0;
* backward discrepancy compares a node with the mean of *all* its successors, as the paper's
  equation (2) says, not with its first successor only;
* a depth or transition with nothing to average is None, not 0 and not ZeroDivisionError.

Threshold. The paper's text (section 4.1, "Discrepancy evaluation") reports discrepancies
"only for examples where the mean score for DP(q_k) and DS(q_k) *exceeds*" 4, i.e. > 4; the
reference code keeps a node when ``np.average(...) >= 4``. ``inclusive=True`` (the default)
is the reference code's >= 4, which is what produced the paper's tables; ``inclusive=False``
is the text's > 4.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

DEPTHS = (1, 2, 3)
MIN_SCORE = 1.0
MAX_SCORE = 5.0
# The largest possible gap between two 1-5 scores; divides every gap into [0, 1].
MAX_GAP = MAX_SCORE - MIN_SCORE
# "a strict accuracy threshold of 4" (section 4.1): only neighbourhoods the model answers
# well count, which leaves out nodes where the model fails at both depths.
THRESHOLD = 4.0
# Transition name -> depth of the node whose gap is measured. Forward: the deeper node b
# against its predecessors; backward: the shallower node a against its successors.
FORWARD_TRANSITIONS = {"d1_d2": 2, "d2_d3": 3}
BACKWARD_TRANSITIONS = {"d1_d2": 1, "d2_d3": 2}
OVERALL = "overall"


class Discrepancy(BaseModel):
    """One discrepancy figure over the nodes that meet the threshold.

    ``value`` = sum of gaps / ``nodes``; ``intensity`` = mean of the positive gaps;
    ``frequency`` = share of ``nodes`` with a positive gap. Since zero gaps add nothing to
    the sum, value = intensity x frequency (the paper's appendix G), with intensity None and
    value 0 when no gap is positive. All three are None when no node qualifies.
    """

    value: float | None = Field(ge=0, le=1)
    intensity: float | None = Field(ge=0, le=1)
    frequency: float | None = Field(ge=0, le=1)
    nodes: int = Field(ge=0)


def depth_scores(
    scores: Mapping[str, float | None], depth: Mapping[str, int]
) -> dict[int, list[float]]:
    """The available scores of the nodes at each depth 1-3 (what bootstrap CIs resample)."""
    out: dict[int, list[float]] = {d: [] for d in DEPTHS}
    for node, d in depth.items():
        score = _score(scores, node)
        if score is not None and d in out:
            out[d].append(score)
    return out


def depth_means(
    scores: Mapping[str, float | None], depth: Mapping[str, int]
) -> dict[int, float | None]:
    """Average accuracy at each depth 1-3; None (not 0) for a depth with no scores."""
    return {d: _mean(values) for d, values in depth_scores(scores, depth).items()}


def forward_gaps(
    scores: Mapping[str, float | None],
    depth: Mapping[str, int],
    predecessors: Mapping[str, Sequence[str]],
    *,
    inclusive: bool = True,
) -> dict[str, list[float]]:
    """Per transition, the forward gap of every qualifying node (paper equation 1).

    A node b at depth 2 or 3 with a score qualifies when the mean m of its scored direct
    predecessors at depth(b) - 1 meets the threshold; its gap is max(0, (m - s_b) / 4).
    """
    return _gaps(scores, depth, predecessors, FORWARD_TRANSITIONS, inclusive, step=-1)


def backward_gaps(
    scores: Mapping[str, float | None],
    depth: Mapping[str, int],
    successors: Mapping[str, Sequence[str]],
    *,
    inclusive: bool = True,
) -> dict[str, list[float]]:
    """Per transition, the backward gap of every qualifying node (paper equation 2).

    A node a at depth 1 or 2 with a score qualifies when the mean m of *all* its scored
    direct successors at depth(a) + 1 meets the threshold; its gap is max(0, (m - s_a) / 4).
    """
    return _gaps(scores, depth, successors, BACKWARD_TRANSITIONS, inclusive, step=1)


def forward_discrepancy(
    scores: Mapping[str, float | None],
    depth: Mapping[str, int],
    predecessors: Mapping[str, Sequence[str]],
    *,
    inclusive: bool = True,
) -> dict[str, Discrepancy]:
    """Forward discrepancy for "d1_d2", "d2_d3" and "overall" (all qualifying nodes pooled)."""
    return _summarise(forward_gaps(scores, depth, predecessors, inclusive=inclusive))


def backward_discrepancy(
    scores: Mapping[str, float | None],
    depth: Mapping[str, int],
    successors: Mapping[str, Sequence[str]],
    *,
    inclusive: bool = True,
) -> dict[str, Discrepancy]:
    """Backward discrepancy for "d1_d2" (depth-1 nodes against their depth-2 successors),
    "d2_d3" (depth-2 nodes against depth 3) and "overall" (all qualifying nodes pooled)."""
    return _summarise(backward_gaps(scores, depth, successors, inclusive=inclusive))


def discrepancy_from_gaps(gaps: Sequence[float]) -> Discrepancy:
    """Value, intensity and frequency of a list of gaps (one per qualifying node)."""
    if not gaps:
        return Discrepancy(value=None, intensity=None, frequency=None, nodes=0)
    positive = [g for g in gaps if g > 0]
    return Discrepancy(
        value=math.fsum(gaps) / len(gaps),
        intensity=_mean(positive),
        frequency=len(positive) / len(gaps),
        nodes=len(gaps),
    )


def min_k_prob(logprobs: Sequence[float], k: float = 0.2) -> float | None:
    """Min-K% probability of a prediction as DepthQA reports it (section 4.3).

    The *negative* mean log-probability of the ``k`` fraction of tokens with the lowest
    log-probability (at least one token), so it is >= 0 and lower means more likely
    memorised: the paper calls it "the average negative log-likelihood of such tokens" and
    figure 5 reads "lower values indicate more memorization". Shi et al.'s own code
    (``-np.mean(topk_prob)``) has the same sign; their paper's formula has the opposite.
    DepthQA uses k = 20% over the first 128 tokens; cutting to 128 is the caller's part.
    None when there are no log-probabilities.
    """
    if not 0 < k <= 1:
        raise ValueError(f"k must be in (0, 1], got {k}")
    if not logprobs:
        return None
    # floor as in Shi et al. (int(len * ratio)); the epsilon keeps 0.29 * 100 from
    # flooring to 28, and max(1, ...) keeps short predictions from averaging nothing.
    count = max(1, math.floor(len(logprobs) * k + 1e-9))
    lowest = sorted(logprobs)[:count]
    return -math.fsum(lowest) / count


def krippendorff_alpha_ordinal(ratings: Sequence[Sequence[float | None]]) -> float | None:
    """Krippendorff's alpha with the ordinal metric (Krippendorff 2011, "Computing
    Krippendorff's Alpha-Reliability"), as appendix F uses it for judge-human agreement.

    ``ratings`` is units x coders; None (or NaN) is a missing rating and units with fewer
    than two ratings are dropped, as they cannot be paired. The ordinal distance between
    values c <= k is (sum of n_g for c <= g <= k - (n_c + n_k) / 2)^2 over the observed
    values' pairable counts n_g (a value nobody used has n_g = 0, so the 1-5 scale and the
    observed values give the same alpha). None when there is nothing to pair or every
    rating is the same value (expected disagreement 0: alpha undefined).
    """
    units: list[list[float]] = []
    for unit in ratings:
        values = [float(v) for v in unit if v is not None and not math.isnan(v)]
        if len(values) >= 2:
            units.append(values)
    values_seen = sorted({v for unit in units for v in unit})
    if len(values_seen) < 2:
        return None
    index = {v: i for i, v in enumerate(values_seen)}
    size = len(values_seen)

    # Coincidence matrix: each unit contributes its ordered pairs of ratings from different
    # coders, weighted 1 / (m_u - 1) so every pairable rating counts once in total.
    coincidence = [[0.0] * size for _ in range(size)]
    for unit in units:
        counts = [0] * size
        for v in unit:
            counts[index[v]] += 1
        weight = 1.0 / (len(unit) - 1)
        for c in range(size):
            if counts[c] == 0:
                continue
            for k in range(size):
                pairs = counts[c] * (counts[k] - (1 if c == k else 0))
                coincidence[c][k] += pairs * weight
    marginal = [math.fsum(row) for row in coincidence]
    total = math.fsum(marginal)

    def distance(c: int, k: int) -> float:
        lo, hi = min(c, k), max(c, k)
        return (math.fsum(marginal[lo : hi + 1]) - (marginal[lo] + marginal[hi]) / 2) ** 2

    observed = math.fsum(
        coincidence[c][k] * distance(c, k) for c in range(size) for k in range(size)
    )
    expected = math.fsum(
        marginal[c] * marginal[k] * distance(c, k) for c in range(size) for k in range(size)
    )
    if expected == 0:
        return None
    return 1.0 - (total - 1) * observed / expected


def _gaps(
    scores: Mapping[str, float | None],
    depth: Mapping[str, int],
    neighbours: Mapping[str, Sequence[str]],
    transitions: Mapping[str, int],
    inclusive: bool,
    step: int,
) -> dict[str, list[float]]:
    by_depth = {d: name for name, d in transitions.items()}
    out: dict[str, list[float]] = {name: [] for name in transitions}
    for node, d in depth.items():
        name = by_depth.get(d)
        own = _score(scores, node)
        if name is None or own is None:
            continue
        # DP(q_k) / DS(q_k) in the paper are the direct neighbours one depth away; a
        # neighbour at another depth would not belong to this transition.
        around = [
            s
            for other in neighbours.get(node, ())
            if depth.get(other) == d + step and (s := _score(scores, other)) is not None
        ]
        mean = _mean(around)
        if mean is None or not _meets(mean, inclusive):
            continue
        out[name].append(max(0.0, (mean - own) / MAX_GAP))
    return out


def _summarise(gaps: Mapping[str, list[float]]) -> dict[str, Discrepancy]:
    out = {name: discrepancy_from_gaps(values) for name, values in gaps.items()}
    # Pooled over nodes (not the mean of the two transitions), as the reference code does:
    # sum of all gaps over all qualifying nodes. A node is in one transition only.
    out[OVERALL] = discrepancy_from_gaps([g for values in gaps.values() for g in values])
    return out


def _meets(mean: float, inclusive: bool) -> bool:
    return mean >= THRESHOLD if inclusive else mean > THRESHOLD


def _score(scores: Mapping[str, float | None], node: str) -> float | None:
    score = scores.get(node)
    if score is None:
        return None
    # A 0 here would be the reference code's "unparseable = 0": refuse it rather than
    # average it in.
    if not MIN_SCORE <= score <= MAX_SCORE:
        raise ValueError(f"score of {node!r} is {score}, outside {MIN_SCORE:g}-{MAX_SCORE:g}")
    return float(score)


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None
