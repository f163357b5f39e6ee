"""Paired statistics (hpt.reports.paired) against published values, hand arithmetic and brute
force written here independently of the module: every sign pattern, every bootstrap resample,
the Holm procedure run as a sequence of tests."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections import Counter
from fractions import Fraction as F

import numpy as np
import pytest

from hpt.reports.paired import (
    detectable_difference,
    holm,
    mcnemar_exact,
    paired_bootstrap_ci,
    permutation_p,
    samples_needed,
    sd,
)

Z975 = 1.959963984540054  # standard normal quantile at 0.975
Z80 = 0.8416212335729143  # ... at 0.8
Z995 = 2.5758293035489004  # ... at 0.995
Z90 = 1.2815515655446004  # ... at 0.9

# --- McNemar --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "b,c,p",
    [
        # 2 * (C(7,0) + C(7,1)) / 2^7 = 2 * 8 / 128
        (1, 6, 0.125),
        # R: binom.test(2, 12)$p.value; 2 * (1 + 12 + 66) / 4096 = 158 / 4096
        (2, 10, 0.03857421875),
        # 2 * 1 / 2^5
        (0, 5, 0.0625),
        # 2 / 2^10
        (0, 10, 0.001953125),
        # 2 * (1 + 20 + 190 + 1140) / 2^20 = 2702 / 1048576
        (3, 17, 2702 / 1048576),
        # one discordant pair: 2 * 1/2 = 1
        (0, 1, 1.0),
        # 2 * (1 + 3) / 8 = 1
        (1, 2, 1.0),
    ],
)
def test_mcnemar_known_values(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)
    assert mcnemar_exact(c, b) == pytest.approx(p, rel=1e-12)


@pytest.mark.parametrize("b", [0, 1, 2, 5, 30, 200])
def test_mcnemar_balanced_is_one(b: int) -> None:
    assert mcnemar_exact(b, b) == 1.0


def test_mcnemar_symmetric_bounded_and_monotone() -> None:
    for b in range(0, 25):
        for c in range(0, 25):
            p = mcnemar_exact(b, c)
            assert p == mcnemar_exact(c, b)
            assert 0 < p <= 1
    # moving one pair from the smaller to the larger side makes the result more extreme
    for n in range(2, 40):
        ps = [mcnemar_exact(b, n - b) for b in range(0, n // 2 + 1)]
        assert all(x <= y for x, y in itertools.pairwise(ps))


def test_mcnemar_large_counts_do_not_overflow() -> None:
    # 5000 discordant pairs, split 2400 / 2600: z = 200 / sqrt(5000) = 2.83, p ~ 0.0049
    p = mcnemar_exact(2400, 2600)
    assert 0.004 < p < 0.006


def test_mcnemar_negative_counts_raise() -> None:
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)
    with pytest.raises(ValueError):
        mcnemar_exact(3, -1)


def test_mcnemar_no_discordant_pairs() -> None:
    assert mcnemar_exact(0, 0) == 1.0


def test_mcnemar_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for b, c in [(1, 6), (2, 10), (0, 5), (7, 7), (13, 29), (40, 61), (0, 1), (150, 210)]:
        expected = stats.binomtest(min(b, c), b + c, 0.5).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300)


# --- permutation test -----------------------------------------------------------------------


def _hundredths(diffs: list[float]) -> list[int]:
    """The non-zero differences as exact integers in hundredths (HPI scores are k or m +
    penalty, penalties given to two decimals), so ties are decided without float rounding."""
    out = []
    for d in diffs:
        scaled = F(str(d)) * 100
        assert scaled.denominator == 1
        if scaled:
            out.append(int(scaled))
    return out


def _brute_p(diffs: list[float]) -> F:
    """Every sign pattern, enumerated with itertools.product, in exact integer arithmetic."""
    values = _hundredths(diffs)
    if not values:
        return F(1)
    observed = abs(sum(values))
    hits = 0
    for signs in itertools.product((1, -1), repeat=len(values)):
        if abs(sum(s * v for s, v in zip(signs, values, strict=True))) >= observed:
            hits += 1
    return F(hits, 2 ** len(values))


def _dp_p(diffs: list[float]) -> F:
    """The same exact p-value for many differences: the distribution of the sign-flipped sum,
    built by convolution (counts of each integer sum), 2^n patterns counted without listing."""
    values = _hundredths(diffs)
    counts = {0: 1}
    for v in values:
        nxt: dict[int, int] = {}
        for s, c in counts.items():
            nxt[s + v] = nxt.get(s + v, 0) + c
            nxt[s - v] = nxt.get(s - v, 0) + c
        counts = nxt
    observed = abs(sum(values))
    return F(sum(c for s, c in counts.items() if abs(s) >= observed), 2 ** len(values))


def test_permutation_hand_values() -> None:
    assert permutation_p([1.0]) == 1.0  # both patterns reach |1|
    assert permutation_p([1.0, 1.0]) == 0.5  # sums 2, 0, 0, -2
    # +-1 +-2 +-3: sums 6, 0, 2, -4, 4, -2, 0, -6; |s| >= 6 for 2 of 8
    assert permutation_p([1.0, 2.0, 3.0]) == 0.25
    assert permutation_p([1.0, -1.0]) == 1.0  # observed sum 0: everything is as extreme
    # four equal differences: only all-plus and all-minus reach 4 -> 2/16
    assert permutation_p([0.5] * 4) == 0.125


SMALL_CASES = [
    [1, 2, 3],
    [1, 1, 1, 1, 1],
    [1, 1, -1, 2, 2, -2, 3],
    [-1, -1, -2, -3, -1, 1],
    [0.29, -2.71, 0.29, 0.29, 1.71, -0.29, 2.71],
    [2.71, 2.71, -0.29, 1, 1, -1, 0.29, 3.71],
    [0.1, 0.2, -0.3, 0.3],  # the observed sum carries float noise (0.30000000000000004)
    [0.1, 0.2, 0.3, -0.6, 0.6],
    [1.71, -1.71, 1.71, 2.71, 0.29, -1, 4.71, -2.03, 1, 1, -1, 2],
    [-3.03, -1, -2, 3.03, -1, -1, -4.03, -0.03, 1, -2, -1, -1, 2, -8.03],
]


@pytest.mark.parametrize("diffs", SMALL_CASES)
def test_permutation_exact_matches_brute_force(diffs: list[float]) -> None:
    expected = _brute_p(diffs)
    assert permutation_p(diffs) == float(expected)
    # independent of order, of the overall sign, and of zeros (which flip to themselves)
    assert permutation_p(list(reversed(diffs))) == float(expected)
    assert permutation_p([-d for d in diffs]) == float(expected)
    assert permutation_p([0, *diffs, 0.0, 0]) == float(expected)


def test_permutation_brute_force_helpers_agree() -> None:
    for diffs in SMALL_CASES:
        assert _brute_p(diffs) == _dp_p(diffs)


def test_permutation_sixteen_nonzero_is_exact() -> None:
    # 16 non-zero differences (the default limit) plus zeros: enumerated, so the answer is a
    # multiple of 1/2^16 and equals the brute force exactly.
    diffs = [1, 2, -1, 1, 0.29, 1, -2.71, 1, 2, 1, -1, 1, 3, 0.71, 1, -1, 0, 0, 0]
    expected = _brute_p(diffs)
    assert len(_hundredths(diffs)) == 16
    got = permutation_p(diffs)
    assert got == float(expected)
    assert (got * 2**16).is_integer()


def test_permutation_seventeen_nonzero_is_monte_carlo() -> None:
    diffs = [1, 2, -1, 1, 0.29, 1, -2.71, 1, 2, 1, -1, 1, 3, 0.71, 1, -1, 1]
    rounds = 10_000
    got = permutation_p(diffs)
    assert got is not None
    # (1 + hits) / (1 + rounds)
    assert abs(got * (1 + rounds) - round(got * (1 + rounds))) < 1e-6
    exact = float(_dp_p(diffs))
    assert abs(got - exact) <= 5 * math.sqrt(exact * (1 - exact) / rounds) + 1 / (1 + rounds)


MC_DIFFS = [
    1, -1, 2, 0.29, -0.29, 1, 1, -2.71, 2.71, 3, -1, 1, 0.71, 1, -2, 1, 1, 0.29, -1, 2,
    1, 4.71, -1, 1, 1, -0.29, 2, -3, 1, 1, 1.29, -1, 1, 2, -1, 0.71, 1, -1, -2.71, 1,
]  # fmt: skip


@pytest.mark.parametrize("seed,rounds", [(0, 10_000), (1, 10_000), (7, 40_000)])
def test_permutation_monte_carlo_within_binomial_error(seed: int, rounds: int) -> None:
    """40 differences: 2^40 patterns, so the module samples. The reference is exact (the
    convolution above, p ~ 0.074). The estimate (1 + hits) / (1 + rounds) has hits ~
    Bin(rounds, p): allow 5 binomial standard errors plus the 1/(1 + rounds) offset."""
    assert len(_hundredths(MC_DIFFS)) == 40
    exact = float(_dp_p(MC_DIFFS))
    assert 0.05 < exact < 0.1
    got = permutation_p(MC_DIFFS, rounds=rounds, seed=seed)
    assert got is not None
    tolerance = 5 * math.sqrt(exact * (1 - exact) / rounds) + 1 / (1 + rounds)
    assert abs(got - exact) <= tolerance


def test_permutation_monte_carlo_path_on_small_problem() -> None:
    # exact_up_to=0 forces sampling on [1, 2, 3], whose exact answer is 1/4.
    got = permutation_p([1, 2, 3], exact_up_to=0, rounds=20_000, seed=3)
    assert got is not None
    assert abs(got - 0.25) <= 5 * math.sqrt(0.25 * 0.75 / 20_000) + 1 / 20_001
    # the sampled estimate is never 0, even when no pattern is as extreme as the observed
    strong = [1.0] * 60
    assert permutation_p(strong, rounds=500) == 1 / 501


def test_permutation_large_samples_match_normal_approximation() -> None:
    """200 differences of +-1 with 120 positive: the sign-flip sum is a sum of 200 fair +-1
    steps, observed 40. Exact: P(|2 Bin(200, 1/2) - 200| >= 40) = 2 P(Bin <= 80) ~ 0.0057."""
    diffs = [1.0] * 120 + [-1.0] * 80
    exact = 2 * sum(math.comb(200, i) for i in range(81)) / 2**200
    got = permutation_p(diffs, rounds=20_000, seed=5)
    assert got is not None
    assert abs(got - exact) <= 5 * math.sqrt(exact * (1 - exact) / 20_000) + 1 / 20_001


def test_permutation_seeded_and_in_range() -> None:
    cases = [*SMALL_CASES, MC_DIFFS, [1.0] * 30, [0.29, -0.29] * 20]
    for diffs in cases:
        first = permutation_p(diffs)
        assert first == permutation_p(list(diffs))
        assert first is not None and 0 < first <= 1
    assert permutation_p(MC_DIFFS, seed=11) == permutation_p(MC_DIFFS, seed=11)


def test_permutation_degenerate_inputs() -> None:
    assert permutation_p([]) is None
    assert permutation_p([0.0, 0, 0.0]) == 1.0
    assert permutation_p([0] * 40) == 1.0
    # symmetric differences: the observed sum is 0, every pattern is as extreme
    assert permutation_p([0.29, -0.29] * 20) == pytest.approx(1.0)


# --- paired bootstrap -----------------------------------------------------------------------


def _exact_bootstrap(data: list[float]) -> tuple[list[F], list[F]]:
    """Every one of the n^n equally likely resamples (itertools.product over positions): the
    distinct resample means and their probabilities, in exact arithmetic."""
    n = len(data)
    exact = [F(str(d)) for d in data]
    counts = Counter(sum(r, F(0)) / n for r in itertools.product(exact, repeat=n))
    atoms = sorted(counts)
    return atoms, [F(counts[a], n**n) for a in atoms]


def _quantile(atoms: list[F], probs: list[F], q: F, resamples: int) -> tuple[F, float]:
    """The atom holding the q-quantile, and how many standard errors a CDF sampled from
    ``resamples`` draws would have to err at either edge of that atom (cumulative probability
    just below and at it) to move the sampled quantile off it."""
    cum = F(0)
    for atom, p in zip(atoms, probs, strict=True):
        if cum + p >= q:
            distances = []
            for edge in (cum, cum + p):
                if 0 < edge < 1:
                    se = math.sqrt(float(edge * (1 - edge)) / resamples)
                    distances.append(abs(float(edge - q)) / se)
            return atom, min(distances, default=math.inf)
        cum += p
    raise AssertionError("probabilities do not reach q")


def test_bootstrap_exact_all_resamples_default_2000() -> None:
    """[0, 0, 0, 1] (one sample improved, three tied): the resample mean is Bin(4, 1/4) / 4,
    P = 81, 108, 54, 12, 1 (/256) for 0, 1/4, 1/2, 3/4, 1. The 2.5% point lies inside the
    atom at 0 (cumulative 0 .. 0.316) and the 97.5% point inside the atom at 3/4 (0.949 ..
    0.996): with 2000 resamples the sampled CDF errs by ~0.005 and ~0.0014, against
    margins of 0.026 and 0.021, 5 and 15 standard errors. So the interval is exactly
    (0, 3/4); 2000 resamples could only move it by an atom (0.25) on much worse luck."""
    atoms, probs = _exact_bootstrap([0, 0, 0, 1])
    assert probs == [F(81, 256), F(108, 256), F(54, 256), F(12, 256), F(1, 256)]
    low, z_low = _quantile(atoms, probs, F(25, 1000), 2000)
    high, z_high = _quantile(atoms, probs, F(975, 1000), 2000)
    assert (low, high) == (0, F(3, 4))
    assert z_low > 4.5 and z_high > 4.5
    ci = paired_bootstrap_ci([0, 0, 0, 1])
    assert ci is not None
    assert ci[0] == pytest.approx(float(low), abs=1e-12)
    assert ci[1] == pytest.approx(float(high), abs=1e-12)


@pytest.mark.parametrize(
    "data",
    [
        [-1, 0, 0, 1],  # sum of resample = Bin(8, 1/2) - 4: interval (-3/4, 3/4)
        [0, 2, 2, 5],
        [-2.71, 0, 0.29, 1],
        [1, 2, 2, 6.71],
    ],
)
def test_bootstrap_matches_every_resample(data: list[float]) -> None:
    """Both ends fall on interior atoms of the exact n^n = 256-resample distribution. With
    only 2000 resamples these ends sit ~2.5 standard errors from the next atom (too close for
    an exact assertion), so the default run is held to within one atom, and a run of 200,000
    resamples (errors ten times smaller: margins of > 15 standard errors, checked below) must
    land on the exact atoms."""
    atoms, probs = _exact_bootstrap(data)
    assert sum(probs) == 1
    resamples = 200_000
    low, z_low = _quantile(atoms, probs, F(25, 1000), resamples)
    high, z_high = _quantile(atoms, probs, F(975, 1000), resamples)
    assert atoms[0] < low and high < atoms[-1]  # interior: not simply the extremes
    assert min(z_low, z_high) > 15
    ci = paired_bootstrap_ci(data, resamples=resamples, seed=1)
    assert ci is not None
    assert ci[0] == pytest.approx(float(low), abs=1e-9)
    assert ci[1] == pytest.approx(float(high), abs=1e-9)
    # the default 2000 resamples: within the neighbouring atoms
    default = paired_bootstrap_ci(data)
    assert default is not None
    i, j = atoms.index(low), atoms.index(high)
    assert float(atoms[i - 1]) - 1e-9 <= default[0] <= float(atoms[i + 1]) + 1e-9
    assert float(atoms[j - 1]) - 1e-9 <= default[1] <= float(atoms[j + 1]) + 1e-9


def test_bootstrap_degenerate_inputs() -> None:
    assert paired_bootstrap_ci([]) is None
    assert paired_bootstrap_ci([3.0]) == (3.0, 3.0)
    assert paired_bootstrap_ci([-1.0, -1.0, -1.0]) == (-1.0, -1.0)
    low, high = paired_bootstrap_ci([0.29] * 7) or (None, None)
    assert low == high == pytest.approx(0.29)


def test_bootstrap_contains_mean_and_is_seeded() -> None:
    rng = random.Random(42)
    for trial in range(40):
        n = rng.randint(2, 60)
        skewed = trial % 2 == 0
        data = [
            (8.03 if rng.random() < 0.05 else 0.0) if skewed else rng.choice([-1, 0, 1, 2.71])
            for _ in range(n)
        ]
        mean = sum(data) / n
        ci = paired_bootstrap_ci(data)
        assert ci is not None
        assert ci[0] <= mean <= ci[1]
        assert ci == paired_bootstrap_ci(list(data))
        # even a single resample (whose mean is almost never the sample mean) must report an
        # interval holding the mean
        tiny = paired_bootstrap_ci(data, resamples=1, seed=trial)
        assert tiny is not None and tiny[0] <= mean <= tiny[1]


def test_order_does_not_matter() -> None:
    """The same differences in another order are the same data: the same interval and the
    same p-value, also on the sampled permutation path (the module sorts before drawing)."""
    data = [1, -1, 2, 0.29, -2.71, 1, 1, 0, 0, 3]
    shuffled = data[:]
    random.Random(3).shuffle(shuffled)
    assert paired_bootstrap_ci(data) == paired_bootstrap_ci(shuffled)
    mc = MC_DIFFS[:]
    random.Random(4).shuffle(mc)
    assert permutation_p(mc) == permutation_p(MC_DIFFS)
    assert permutation_p(shuffled) == permutation_p(data)


def test_pairing_cancels_shared_per_sample_effect() -> None:
    """Sixty samples whose difficulty varies widely (HPI 1 .. 6.71, shared by both models);
    model B is one level better on 15 of them and equal elsewhere. Paired differences are 0 or
    -1 (mean -0.25, SE ~0.056), so the paired interval excludes 0. Compared unpaired, each
    model's mean carries the spread of difficulty (SD ~1.9, SE of the difference ~0.35), and a
    bootstrap that resamples the two models independently straddles 0."""
    rng = random.Random(2024)
    a = [rng.choice([1, 2, 3, 4, 5, 6.71]) for _ in range(60)]
    improved = set(rng.sample([i for i, x in enumerate(a) if x > 1], 15))
    b = [x - 1 if i in improved else x for i, x in enumerate(a)]
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    assert sum(diffs) / len(diffs) == pytest.approx(-0.25)

    paired = paired_bootstrap_ci(diffs)
    assert paired is not None
    assert paired[1] < 0

    # unpaired: resample the two models independently
    gen = np.random.default_rng(99)
    xa, xb = np.array(a), np.array(b)
    idx_a = gen.integers(0, 60, size=(4000, 60))
    idx_b = gen.integers(0, 60, size=(4000, 60))
    unpaired = xb[idx_b].mean(axis=1) - xa[idx_a].mean(axis=1)
    lo, hi = np.percentile(unpaired, [2.5, 97.5])
    assert lo < 0 < hi
    # and the two per-model intervals overlap
    mean_a = np.percentile(xa[idx_a].mean(axis=1), [2.5, 97.5])
    mean_b = np.percentile(xb[idx_b].mean(axis=1), [2.5, 97.5])
    assert mean_b[1] > mean_a[0]
    assert (paired[1] - paired[0]) < (hi - lo) / 3


# --- Holm -----------------------------------------------------------------------------------


def test_holm_hand_values() -> None:
    # sorted 0.01, 0.03, 0.04: 3 * 0.01 = 0.03; 2 * 0.03 = 0.06; max(0.06, 1 * 0.04) = 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # sorted 0.01, 0.4, 0.9: 0.03; 0.8; max(0.8, 0.9) = 0.9
    assert holm([0.4, 0.9, 0.01]) == pytest.approx([0.8, 0.9, 0.03])
    # 0.005 * 4 = 0.02, 0.01 * 3 = 0.03, 0.02 * 2 = 0.04, 0.5
    assert holm([0.5, 0.02, 0.01, 0.005]) == pytest.approx([0.5, 0.04, 0.03, 0.02])
    # ties get the same value: 2 * 0.02 = 0.04 twice
    assert holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])
    assert holm([0.2]) == [0.2]


def test_holm_capped_at_one() -> None:
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert holm([0.9, 0.001, 0.7]) == pytest.approx([1.0, 0.003, 1.0])
    assert holm([1.0, 1.0, 1.0]) == [1.0, 1.0, 1.0]


def test_holm_none_does_not_count() -> None:
    # two real tests: k = 2 -> 0.02, 0.04
    assert holm([None, 0.01, None, 0.04]) == [None, pytest.approx(0.02), None, pytest.approx(0.04)]
    assert holm([0.01, None, None]) == [0.01, None, None]
    assert holm([None, None]) == [None, None]
    assert holm([]) == []


def _holm_rejects(pvalues: list[float], alpha: float) -> set[int]:
    """Holm's procedure itself: walk the sorted p-values, rejecting while p_(s) <= alpha /
    (k - s), and stop at the first that is not."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    k = len(pvalues)
    rejected: set[int] = set()
    for s, i in enumerate(order):
        if pvalues[i] <= alpha / (k - s):
            rejected.add(i)
        else:
            break
    return rejected


def test_holm_adjusted_values_reproduce_the_procedure() -> None:
    """An adjusted p-value is the smallest alpha at which the step-down procedure rejects
    that hypothesis: for any alpha, {i: adjusted_i <= alpha} is the procedure's rejected set.
    Also monotone in the raw p-values, never below them, never above 1."""
    rng = random.Random(5)
    for _ in range(300):
        k = rng.randint(1, 9)
        raw = [rng.choice([rng.random() * 0.1, rng.random()]) for _ in range(k)]
        with_none: list[float | None] = list(raw)
        for pos in sorted(rng.sample(range(k + 3), 3)):
            with_none.insert(pos, None)
        adjusted = holm(with_none)
        assert [a is None for a in adjusted] == [p is None for p in with_none]
        adj = [a for a in adjusted if a is not None]
        assert len(adj) == k
        for p, a in zip(raw, adj, strict=True):
            assert p <= a <= 1.0
        for i in range(k):
            for j in range(k):
                if raw[i] <= raw[j]:
                    assert adj[i] <= adj[j]
        for alpha in [0.001, 0.01, 0.05, 0.1, 0.2, 0.5, rng.random()]:
            assert {i for i, a in enumerate(adj) if a <= alpha} == _holm_rejects(raw, alpha)


# --- power arithmetic -----------------------------------------------------------------------


def test_detectable_difference_hand_values() -> None:
    z = Z975 + Z80  # 2.8015852181129683
    assert detectable_difference(1.0, 100) == pytest.approx(0.28015852181129683, rel=1e-12)
    assert detectable_difference(1.0, 100) == pytest.approx(z / 10, rel=1e-12)
    # sd 0.5, n 25: 2.80158... * 0.5 / 5 = 0.28015852...
    assert detectable_difference(0.5, 25) == pytest.approx(0.28015852181129683, rel=1e-12)
    # sd 2.3, n 2: 2.80158... * 2.3 / 1.41421... = 6.44365 / 1.41421 = 4.55635
    assert detectable_difference(2.3, 2) == pytest.approx(z * 2.3 / math.sqrt(2), rel=1e-12)
    assert detectable_difference(2.3, 2) == pytest.approx(4.556346, abs=1e-6)
    # alpha 0.01, power 0.9: (2.5758 + 1.2816) * 2 / 4 = 1.92869...
    got = detectable_difference(2.0, 16, alpha=0.01, power=0.9)
    assert got == pytest.approx((Z995 + Z90) * 2 / 4, rel=1e-12)
    assert got == pytest.approx(1.9286904345, abs=1e-9)
    # No spread seen: no estimate (0 would read as "any difference is detectable").
    assert detectable_difference(0.0, 50) is None


def test_detectable_difference_needs_two_pairs() -> None:
    assert detectable_difference(1.0, 1) is None
    assert detectable_difference(1.0, 0) is None


def test_detectable_difference_shrinks_as_root_n() -> None:
    d100 = detectable_difference(1.3, 100)
    d400 = detectable_difference(1.3, 400)
    assert d100 is not None and d400 is not None
    assert d100 / d400 == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize(
    "sd_,delta,kwargs,expected",
    [
        # (2.8016 / 1)^2 = 7.849 -> 8
        (1.0, 1.0, {}, 8),
        # (2.8016 / 0.28)^2 = 10.0057^2 = 100.11 -> 101
        (1.0, 0.28, {}, 101),
        # (2.8016 * 2 / 0.5)^2 = 11.2063^2 = 125.58 -> 126
        (2.0, 0.5, {}, 126),
        # (2.8016 * 1.71 / 0.1)^2 = 47.907^2 = 2295.1 -> 2296
        (1.71, 0.1, {}, 2296),
        # (3.8574 / 0.5)^2 = 7.7148^2 = 59.52 -> 60
        (1.0, 0.5, {"alpha": 0.01, "power": 0.9}, 60),
        # (2.8016 * 0.3)^2 = 0.706 -> 1, raised to the floor of 2
        (0.3, 1.0, {}, 2),
        (1.0, 100.0, {}, 2),
    ],
)
def test_samples_needed_hand_values(
    sd_: float, delta: float, kwargs: dict[str, float], expected: int
) -> None:
    assert samples_needed(sd_, delta, **kwargs) == expected


def test_samples_needed_guards() -> None:
    assert samples_needed(0.0, 0.5) is None
    with pytest.raises(ValueError):
        samples_needed(1.0, 0.0)
    with pytest.raises(ValueError):
        samples_needed(1.0, -0.2)
    with pytest.raises(ValueError):  # the delta check comes first
        samples_needed(0.0, 0.0)


def test_samples_needed_is_enough_and_minimal() -> None:
    """The count returned detects delta (its detectable difference is <= delta) and one pair
    fewer would not, except where the floor of 2 applies."""
    rng = random.Random(8)
    for _ in range(500):
        sd_ = rng.uniform(0.05, 4.0)
        delta = rng.uniform(0.01, 3.0)
        n = samples_needed(sd_, delta)
        assert n is not None and n >= 2
        at_n = detectable_difference(sd_, n)
        assert at_n is not None and at_n <= delta * (1 + 1e-12)
        if n > 2:
            fewer = detectable_difference(sd_, n - 1)
            assert fewer is not None and fewer > delta


def test_round_trip_through_detectable_difference() -> None:
    """samples_needed(sd, detectable_difference(sd, n)) is n in exact arithmetic:
    (z sd / (z sd / sqrt n))^2 = n. In floats the squared ratio lands within a few ulps of
    n, which samples_needed shaves off before rounding up: the round trip gives n exactly."""
    for sd_ in [0.3, 1.0, 1.7, 2.5]:
        for n in range(2, 600):
            delta = detectable_difference(sd_, n)
            assert delta is not None
            assert samples_needed(sd_, delta) == n


# --- sample standard deviation --------------------------------------------------------------


def test_sd_hand_values() -> None:
    # mean 2.5, squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5, / 3
    assert sd([1, 2, 3, 4]) == pytest.approx(math.sqrt(5 / 3), rel=1e-12)
    # population SD 2 (sum of squares 32), sample SD sqrt(32 / 7)
    assert sd([2, 4, 4, 4, 5, 5, 7, 9]) == pytest.approx(math.sqrt(32 / 7), rel=1e-12)
    # two values a, b: |a - b| / sqrt 2
    assert sd([0.29, -2.71]) == pytest.approx(3 / math.sqrt(2), rel=1e-12)
    assert sd([5.0, 5.0, 5.0]) == 0.0


def test_sd_matches_statistics() -> None:
    rng = random.Random(1)
    for _ in range(50):
        values = [rng.choice([-1, 0, 1, 2.71, -3.03]) for _ in range(rng.randint(2, 40))]
        assert sd(values) == pytest.approx(statistics.stdev(values), rel=1e-9, abs=1e-12)


def test_sd_needs_two_values() -> None:
    assert sd([]) is None
    assert sd([1.0]) is None
