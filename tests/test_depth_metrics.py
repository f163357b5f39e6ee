"""DepthQA metrics against hand computation on small hand-built graphs."""

from __future__ import annotations

import math

import pytest

from hpt.results.depth import (
    Discrepancy,
    backward_discrepancy,
    backward_gaps,
    depth_means,
    depth_scores,
    discrepancy_from_gaps,
    forward_discrepancy,
    forward_gaps,
    krippendorff_alpha_ordinal,
    min_k_prob,
)

# Forward graph (node: score, [predecessors]):
#   depth 1: a1 5, a2 4, a3 4, a4 missing, a5 3
#   depth 2: b1 3 [a1 a2]  mean 4.5 -> gap (4.5 - 3) / 4 = 0.375
#            b2 4 [a3 a4]  mean 4 (a4 skipped) -> gap 0; qualifies only with >= 4
#            b3 1 [a5]     mean 3 -> below the threshold, left out
#            b4 5 []       no predecessors -> left out
#   depth 3: c1 2 [b1 b2]  mean 3.5 -> left out
#            c2 2 [b2 b4]  mean 4.5 -> gap (4.5 - 2) / 4 = 0.625
#            c3 missing [b4] -> no own score, left out
F_SCORES: dict[str, float | None] = {
    "a1": 5, "a2": 4, "a3": 4, "a4": None, "a5": 3,
    "b1": 3, "b2": 4, "b3": 1, "b4": 5,
    "c1": 2, "c2": 2, "c3": None,
}  # fmt: skip
F_DEPTH = {n: {"a": 1, "b": 2, "c": 3}[n[0]] for n in F_SCORES}
F_PRED: dict[str, list[str]] = {
    "b1": ["a1", "a2"], "b2": ["a3", "a4"], "b3": ["a5"], "b4": [],
    "c1": ["b1", "b2"], "c2": ["b2", "b4"], "c3": ["b4"],
}  # fmt: skip

# Backward graph (node: score, [successors]):
#   depth 1: x1 2 [y1 y2]  mean (5 + 3) / 2 = 4 -> gap (4 - 2) / 4 = 0.5 (first successor
#                          alone, y1 = 5, would give 0.75: the reference code's defect)
#            x2 5 [y1]     mean 5 -> gap 0
#            x3 4 [y2]     mean 3 -> left out
#            x4 missing [y1] -> left out
#            x5 1 [y3]     y3 missing, no successor score -> left out
#   depth 2: y1 5 [z1]     mean 5 -> gap 0
#            y2 3 [z1 z2]  mean 4.5 -> gap (4.5 - 3) / 4 = 0.375
#            y3 missing [z2]
#   depth 3: z1 5, z2 4
B_SCORES: dict[str, float | None] = {
    "x1": 2, "x2": 5, "x3": 4, "x4": None, "x5": 1,
    "y1": 5, "y2": 3, "y3": None,
    "z1": 5, "z2": 4,
}  # fmt: skip
B_DEPTH = {n: {"x": 1, "y": 2, "z": 3}[n[0]] for n in B_SCORES}
B_SUCC: dict[str, list[str]] = {
    "x1": ["y1", "y2"], "x2": ["y1"], "x3": ["y2"], "x4": ["y1"], "x5": ["y3"],
    "y1": ["z1"], "y2": ["z1", "z2"], "y3": ["z2"],
}  # fmt: skip


def close(
    d: Discrepancy,
    value: float | None,
    intensity: float | None,
    frequency: float | None,
    nodes: int,
) -> None:
    assert d.nodes == nodes
    for got, want in ((d.value, value), (d.intensity, intensity), (d.frequency, frequency)):
        assert (got is None) == (want is None), (got, want)
        if got is not None and want is not None:
            assert got == pytest.approx(want)


def test_depth_means_skip_missing() -> None:
    assert depth_means(F_SCORES, F_DEPTH) == {1: 4.0, 2: 3.25, 3: 2.0}
    assert depth_scores(F_SCORES, F_DEPTH) == {1: [5, 4, 4, 3], 2: [3, 4, 1, 5], 3: [2, 2]}


def test_depth_without_results_is_none_not_zero() -> None:
    scores = {**F_SCORES, "c1": None, "c2": None}
    assert depth_means(scores, F_DEPTH)[3] is None
    assert depth_means({}, {}) == {1: None, 2: None, 3: None}


def test_forward_by_hand() -> None:
    fwd = forward_discrepancy(F_SCORES, F_DEPTH, F_PRED)
    assert set(fwd) == {"d1_d2", "d2_d3", "overall"}
    close(fwd["d1_d2"], value=(0.375 + 0) / 2, intensity=0.375, frequency=0.5, nodes=2)
    close(fwd["d2_d3"], value=0.625, intensity=0.625, frequency=1.0, nodes=1)
    # pooled over the three qualifying nodes, not the mean of the two transitions
    close(fwd["overall"], value=1.0 / 3, intensity=0.5, frequency=2 / 3, nodes=3)
    assert forward_gaps(F_SCORES, F_DEPTH, F_PRED) == {"d1_d2": [0.375, 0.0], "d2_d3": [0.625]}


def test_forward_strict_threshold() -> None:
    # The paper's text ("exceeds" 4): b2's predecessors average exactly 4, so it drops out.
    fwd = forward_discrepancy(F_SCORES, F_DEPTH, F_PRED, inclusive=False)
    close(fwd["d1_d2"], value=0.375, intensity=0.375, frequency=1.0, nodes=1)
    close(fwd["overall"], value=0.5, intensity=0.5, frequency=1.0, nodes=2)


def test_backward_uses_all_successors() -> None:
    bwd = backward_discrepancy(B_SCORES, B_DEPTH, B_SUCC)
    close(bwd["d1_d2"], value=0.25, intensity=0.5, frequency=0.5, nodes=2)
    close(bwd["d2_d3"], value=0.375 / 2, intensity=0.375, frequency=0.5, nodes=2)
    close(bwd["overall"], value=0.875 / 4, intensity=0.4375, frequency=0.5, nodes=4)
    # x1's gap is against the mean of y1 and y2; y1 alone (the first successor) gives 0.75
    assert backward_gaps(B_SCORES, B_DEPTH, B_SUCC)["d1_d2"] == [0.5, 0.0]


def test_backward_strict_threshold() -> None:
    bwd = backward_discrepancy(B_SCORES, B_DEPTH, B_SUCC, inclusive=False)
    # x1's successors average exactly 4: left out; x2 remains with a zero gap
    close(bwd["d1_d2"], value=0.0, intensity=None, frequency=0.0, nodes=1)
    close(bwd["overall"], value=0.375 / 3, intensity=0.375, frequency=1 / 3, nodes=3)


def test_successor_order_does_not_matter() -> None:
    reordered = {**B_SUCC, "x1": ["y2", "y1"]}
    assert backward_discrepancy(B_SCORES, B_DEPTH, reordered) == backward_discrepancy(
        B_SCORES, B_DEPTH, B_SUCC
    )


def test_transition_without_results_is_none() -> None:
    # No depth-3 scores: d2_d3 has no qualifying node; no ZeroDivisionError, no 0.
    scores = {**F_SCORES, "c1": None, "c2": None}
    fwd = forward_discrepancy(scores, F_DEPTH, F_PRED)
    assert fwd["d2_d3"] == Discrepancy(value=None, intensity=None, frequency=None, nodes=0)
    close(fwd["overall"], value=0.1875, intensity=0.375, frequency=0.5, nodes=2)
    empty = forward_discrepancy({}, {}, {})
    assert all(d.value is None and d.nodes == 0 for d in empty.values())
    assert set(backward_discrepancy({}, {}, {})) == {"d1_d2", "d2_d3", "overall"}


def test_nodes_without_neighbours_or_scores() -> None:
    # Only b4 (no predecessors) and c3 (no score) at their depths: nothing qualifies.
    depth = {"b4": 2, "c3": 3}
    fwd = forward_discrepancy(F_SCORES, depth, F_PRED)
    assert fwd["overall"].nodes == 0
    # All of a node's predecessors missing: it does not qualify (not a mean of nothing).
    fwd = forward_discrepancy({"a": None, "b": 1}, {"a": 1, "b": 2}, {"b": ["a"]})
    assert fwd["d1_d2"].nodes == 0


def test_neighbours_at_other_depths_are_ignored() -> None:
    # DP(q_k) is the predecessors at depth k - 1; a depth-1 node listed under a depth-3
    # node does not enter the d2_d3 mean.
    scores = {"a": 5.0, "b": 3.0, "c": 1.0}
    depth = {"a": 1, "b": 2, "c": 3}
    fwd = forward_discrepancy(scores, depth, {"c": ["a", "b"]})
    assert fwd["d2_d3"].nodes == 0


def test_scores_outside_range_are_refused() -> None:
    # 0 is what the reference code substitutes for an unparseable verdict.
    with pytest.raises(ValueError, match="outside"):
        depth_means({"a": 0.0}, {"a": 1})
    with pytest.raises(ValueError, match="outside"):
        forward_discrepancy({"a": 5, "b": 6}, {"a": 1, "b": 2}, {"b": ["a"]})


def test_fractional_scores_from_repeated_judgements() -> None:
    fwd = forward_discrepancy({"a": 4.5, "b": 3.5}, {"a": 1, "b": 2}, {"b": ["a"]})
    close(fwd["d1_d2"], value=0.25, intensity=0.25, frequency=1.0, nodes=1)


@pytest.mark.parametrize(
    "gaps",
    [[0.375, 0.0, 0.625], [0.0, 0.0], [1.0], [0.25, 0.5, 0.0, 0.0, 0.125], [0.1] * 7 + [0.0] * 3],
)
def test_value_is_intensity_times_frequency(gaps: list[float]) -> None:
    d = discrepancy_from_gaps(gaps)
    assert d.value is not None and d.frequency is not None
    assert d.value == pytest.approx((d.intensity or 0.0) * d.frequency)
    assert d.value == pytest.approx(sum(gaps) / len(gaps))


def test_identity_on_graphs() -> None:
    for result in (
        forward_discrepancy(F_SCORES, F_DEPTH, F_PRED),
        backward_discrepancy(B_SCORES, B_DEPTH, B_SUCC),
    ):
        for d in result.values():
            assert d.value is not None and d.frequency is not None
            assert d.value == pytest.approx((d.intensity or 0.0) * d.frequency)


def test_discrepancy_round_trips() -> None:
    d = forward_discrepancy(F_SCORES, F_DEPTH, F_PRED)["overall"]
    assert Discrepancy.model_validate_json(d.model_dump_json()) == d


# --- Min-K% -------------------------------------------------------------------------------


def test_min_k_prob_by_hand() -> None:
    logprobs = [-0.1, -2.0, -0.5, -3.0, -0.2, -0.3, -1.0, -0.05, -0.4, -0.6]
    # 20% of 10 tokens = 2 lowest: -3.0 and -2.0 -> negative mean 2.5
    assert min_k_prob(logprobs) == pytest.approx(2.5)
    assert min_k_prob(logprobs, k=0.5) == pytest.approx((3.0 + 2.0 + 1.0 + 0.6 + 0.5) / 5)
    assert min_k_prob(logprobs, k=1.0) == pytest.approx(-sum(logprobs) / 10)


def test_min_k_prob_at_least_one_token() -> None:
    assert min_k_prob([-0.7, -0.1, -0.2]) == pytest.approx(0.7)  # floor(0.6) -> 1 token
    assert min_k_prob([-1.5]) == pytest.approx(1.5)


def test_min_k_prob_floor_is_not_fooled_by_rounding() -> None:
    # 100 * 0.29 is 28.999999999999996 in floating point; 29 tokens are meant.
    logprobs = [-float(i) for i in range(100)]
    assert min_k_prob(logprobs, k=0.29) == pytest.approx(sum(range(71, 100)) / 29)


def test_min_k_prob_lower_means_more_likely_seen() -> None:
    seen = [-0.01, -0.02, -0.05, -0.1, -0.2]
    unseen = [-1.0, -2.5, -4.0, -0.3, -6.0]
    low, high = min_k_prob(seen), min_k_prob(unseen)
    assert low is not None and high is not None
    assert 0 <= low < high


def test_min_k_prob_empty_and_bad_k() -> None:
    assert min_k_prob([]) is None
    for k in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError):
            min_k_prob([-1.0], k=k)


# --- Krippendorff's alpha ---------------------------------------------------------------


# Krippendorff, K. (2011). Computing Krippendorff's Alpha-Reliability. University of
# Pennsylvania, https://repository.upenn.edu/asc_papers/43, section C: 4 observers x 12
# units, values 1-5, missing data; published alpha: nominal 0.743, ordinal 0.815,
# interval 0.849, ratio 0.797. Written here as units x coders (the paper prints coders as
# rows); unit 12 has a single value and is unpairable.
KRIPPENDORFF_2011: list[list[float | None]] = [
    [1, 1, None, 1],
    [2, 2, 3, 2],
    [3, 3, 3, 3],
    [3, 3, 3, 3],
    [2, 2, 2, 2],
    [1, 2, 3, 4],
    [4, 4, 4, 4],
    [1, 1, 2, 1],
    [2, 2, 2, 2],
    [None, 5, 5, 5],
    [None, None, 1, 1],
    [None, 3, None, None],
]


def test_alpha_krippendorff_2011_example() -> None:
    alpha = krippendorff_alpha_ordinal(KRIPPENDORFF_2011)
    assert alpha is not None
    assert round(alpha, 3) == 0.815


def test_alpha_two_coders_binary() -> None:
    # Krippendorff (2011), section A: two observers, binary data, alpha = 0.095. With only
    # two values the ordinal distance is one constant, so ordinal alpha equals nominal:
    # 1 - (n - 1) o_01 / (n_0 n_1) = 1 - 19 * 4 / (14 * 6).
    a = [0, 1, 0, 0, 0, 0, 0, 0, 1, 0]
    b = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]
    alpha = krippendorff_alpha_ordinal([[x, y] for x, y in zip(a, b, strict=True)])
    assert alpha == pytest.approx(1 - 19 * 4 / (14 * 6))
    assert round(alpha or 0, 3) == 0.095


def test_alpha_by_hand_is_ordinal() -> None:
    # Units (1, 2), (2, 3): n_1 = 1, n_2 = 2, n_3 = 1, n = 4.
    # delta^2(1,2) = delta^2(2,3) = (3 - 3/2)^2 = 2.25; delta^2(1,3) = (4 - 1)^2 = 9.
    # observed sum o_ck delta^2 = 4 * 2.25 = 9; expected sum n_c n_k delta^2 =
    # 2 * (2 * 2.25 + 2 * 2.25 + 1 * 9) = 36; alpha = 1 - 3 * 9 / 36 = 0.25.
    assert krippendorff_alpha_ordinal([[1, 2], [2, 3]]) == pytest.approx(0.25)
    # Ordinal: only the order counts, so 3 -> 5 changes nothing (interval alpha would).
    assert krippendorff_alpha_ordinal([[1, 2], [2, 5]]) == pytest.approx(0.25)
    # A unit with one rating is dropped, and its value does not enter the marginals.
    assert krippendorff_alpha_ordinal([[1, 2], [2, 3], [4, None]]) == pytest.approx(0.25)
    assert krippendorff_alpha_ordinal([[1, 2], [2, 3], [math.nan, 4]]) == pytest.approx(0.25)


def test_alpha_edge_cases() -> None:
    assert krippendorff_alpha_ordinal([[1, 1], [2, 2], [5, 5]]) == pytest.approx(1.0)
    assert krippendorff_alpha_ordinal([]) is None
    assert krippendorff_alpha_ordinal([[1, None], [None, 2]]) is None  # nothing pairable
    assert krippendorff_alpha_ordinal([[3, 3], [3, 3]]) is None  # no variation: undefined
