"""The uniform guesser's floor (hpt.results.chance): values worked out by hand as exact
fractions, a Monte Carlo guesser, and the HPI skill scale built on it."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction as F

import pytest

from hpt.results.chance import ChanceLevels, chance_levels, hpi_skill
from hpt.tasks import TASKS

# Penalties are given in hundredths; Fraction(str(x)) reads them exactly (2.52 -> 63/25).
CSQA_PENALTY = TASKS["csqa"].penalty
MMLU_PENALTY = TASKS["mmlu"].penalty


def _exact(value: float) -> F:
    return F(str(value))


def _close(got: float, want: F) -> None:
    assert got == pytest.approx(float(want), rel=1e-12, abs=1e-12)


# --- hand-worked ladders --------------------------------------------------------------------


def test_boolq_two_options_five_levels() -> None:
    # k = 2: P(first right at level j) = (1/2)^j, never right = (1/2)^5 = 1/32.
    # sum_j j / 2^j = 1/2 + 2/4 + 3/8 + 4/16 + 5/32 = (16 + 16 + 12 + 8 + 5) / 32 = 57/32
    # unresolved: (1/32) * (5 + 1.71) = 6.71/32
    # HPI = (57 + 6.71) / 32 = 63.71 / 32 = 1.9909375
    hpi = F(57, 32) + F(1, 32) * (5 + F("1.71"))
    assert hpi == F("63.71") / 32 == F("1.9909375")
    levels = chance_levels(2, 5, 1.71)
    assert isinstance(levels, ChanceLevels)
    _close(levels.hpi, hpi)
    assert levels.hpi == pytest.approx(1.9909, abs=5e-5)
    assert levels.accuracy == 0.96875 == 31 / 32
    assert levels.level1_accuracy == 0.5


def test_csqa_five_options_five_levels() -> None:
    assert _exact(CSQA_PENALTY) == F("2.52")  # HPT table 4; the arithmetic below uses it
    # k = 5, in 3125ths: P(j) = 4^(j-1) * 5^(5-j) / 3125 -> 625, 500, 400, 320, 256;
    # unresolved (4/5)^5 = 1024/3125.  Check: 625 + 500 + 400 + 320 + 256 + 1024 = 3125.
    assert 625 + 500 + 400 + 320 + 256 + 1024 == 3125
    # resolved part: 1*625 + 2*500 + 3*400 + 4*320 + 5*256 = 625 + 1000 + 1200 + 1280 + 1280
    #              = 5385;  unresolved part: 1024 * (5 + 2.52) = 1024 * 7.52 = 7700.48
    # HPI = (5385 + 7700.48) / 3125 = 13085.48 / 3125 = 4.1873536
    hpi = (F(5385) + 1024 * F("7.52")) / 3125
    assert hpi == F("4.1873536")
    levels = chance_levels(5, 5, CSQA_PENALTY)
    _close(levels.hpi, hpi)
    _close(levels.accuracy, F(3125 - 1024, 3125))  # 2101/3125 = 0.67232
    assert levels.accuracy == pytest.approx(0.67232, abs=1e-12)
    assert levels.level1_accuracy == pytest.approx(0.2, abs=1e-15)


def test_mmlu_four_options_five_levels() -> None:
    assert _exact(MMLU_PENALTY) == F("3.03")
    # k = 4, in 1024ths: P(j) = 3^(j-1) * 4^(5-j) / 1024 -> 256, 192, 144, 108, 81;
    # unresolved (3/4)^5 = 243/1024.  Check: 256 + 192 + 144 + 108 + 81 + 243 = 1024.
    assert 256 + 192 + 144 + 108 + 81 + 243 == 1024
    # resolved part: 256 + 384 + 432 + 432 + 405 = 1909
    # unresolved part: 243 * 8.03 = 1951.29
    # HPI = 3860.29 / 1024 = 3.769814453125
    hpi = (F(1909) + 243 * F("8.03")) / 1024
    assert hpi == F("3860.29") / 1024
    levels = chance_levels(4, 5, MMLU_PENALTY)
    _close(levels.hpi, hpi)
    assert levels.hpi == pytest.approx(3.769814453125, abs=1e-12)
    _close(levels.accuracy, F(781, 1024))
    assert levels.level1_accuracy == 0.25


def test_four_options_three_levels() -> None:
    # In 64ths: P(1) = 16, P(2) = 12, P(3) = 9, unresolved 27.
    # Penalty 1: HPI = (16 + 24 + 27 + 27 * 4) / 64 = 175/64 = 2.734375
    levels = chance_levels(4, 3, 1.0)
    assert levels.hpi == 175 / 64 == 2.734375
    assert levels.accuracy == pytest.approx(37 / 64, abs=1e-15)
    assert levels.level1_accuracy == 0.25
    # Penalty 2.5: the unresolved 27/64 now score 5.5 -> (67 + 27 * 5.5) / 64 = 215.5/64
    _close(chance_levels(4, 3, 2.5).hpi, F("215.5") / 64)


def test_one_level_ladder() -> None:
    # m = 1: right with 1/4 (score 1), else unresolved (score 1 + penalty).
    # Penalty 1: 1/4 * 1 + 3/4 * 2 = 7/4.  Penalty 3.03: 1/4 + 3/4 * 4.03 = 3.2725
    assert chance_levels(4, 1, 1.0).hpi == 1.75
    _close(chance_levels(4, 1, 3.03).hpi, F(1, 4) + F(3, 4) * F("4.03"))
    one = chance_levels(4, 1, 3.03)
    assert one.accuracy == one.level1_accuracy == 0.25


def test_one_option_is_always_right() -> None:
    for m, penalty in [(1, 1.71), (5, 3.03), (9, 100.0)]:
        levels = chance_levels(1, m, penalty)
        assert levels.hpi == 1.0
        assert levels.accuracy == 1.0
        assert levels.level1_accuracy == 1.0


def test_zero_penalty_and_long_ladder_limits() -> None:
    # A ladder long enough that (1 - 1/k)^m is negligible: the HPI tends to the mean of a
    # geometric variable, k, and accuracy to 1.
    levels = chance_levels(2, 200, 1.71)
    assert levels.hpi == pytest.approx(2.0, abs=1e-12)
    assert levels.accuracy == pytest.approx(1.0, abs=1e-12)
    # Penalty 0 with m = 2, k = 2: 1/2 * 1 + 1/4 * 2 + 1/4 * 2 = 3/2
    assert chance_levels(2, 2, 0.0).hpi == 1.5


@pytest.mark.parametrize("k", [0, -1])
def test_no_options_is_an_error(k: int) -> None:
    with pytest.raises(ValueError):
        chance_levels(k, 5, 1.71)


@pytest.mark.parametrize("m", [0, -3])
def test_no_levels_is_an_error(m: int) -> None:
    with pytest.raises(ValueError):
        chance_levels(4, m, 1.71)


# --- structure: the outcome probabilities sum to one -----------------------------------------


def _outcomes(k: int, m: int) -> list[F]:
    """P(first right at level 1..m) then P(never), by multiplying out the ladder one level at
    a time (not the closed form): still-unresolved mass times 1/k resolves at this level."""
    still = F(1)
    out = []
    for _ in range(m):
        out.append(still / k)
        still -= still / k
    out.append(still)
    return out


@pytest.mark.parametrize("k,m", [(1, 1), (2, 5), (3, 4), (4, 5), (5, 5), (10, 7), (4, 1)])
def test_outcome_probabilities_sum_to_one(k: int, m: int) -> None:
    probs = _outcomes(k, m)
    assert sum(probs) == 1
    assert all(p >= 0 for p in probs)
    levels = chance_levels(k, m, 2.0)
    # What the module reports must be consistent with this one distribution:
    _close(levels.level1_accuracy, probs[0])
    _close(levels.accuracy, sum(probs[:m]))
    expected = sum((j + 1) * p for j, p in enumerate(probs[:m])) + probs[m] * (m + 2)
    _close(levels.hpi, expected)
    # The resolved probability and the unresolved probability (the HPI's slope in the penalty)
    # add up to one.
    slope = chance_levels(k, m, 3.0).hpi - chance_levels(k, m, 2.0).hpi
    assert levels.accuracy + slope == pytest.approx(1.0, abs=1e-12)


def test_per_level_probabilities_from_successive_ladders() -> None:
    # accuracy(m) - accuracy(m - 1) is P(first right at level m); rebuild the 5-level HPI of
    # MMLU from the module's own shorter ladders.
    k, m, penalty = 4, 5, MMLU_PENALTY
    acc = [0.0] + [chance_levels(k, j, penalty).accuracy for j in range(1, m + 1)]
    rebuilt = sum(j * (acc[j] - acc[j - 1]) for j in range(1, m + 1)) + (1 - acc[m]) * (m + penalty)
    assert chance_levels(k, m, penalty).hpi == pytest.approx(rebuilt, abs=1e-12)
    assert all(acc[j] > acc[j - 1] for j in range(1, m + 1))


# --- Monte Carlo --------------------------------------------------------------------------


def _simulate(k: int, m: int, penalty: float, climbs: int, seed: int) -> tuple[list[float], int]:
    rng = random.Random(seed)
    scores: list[float] = []
    resolved = 0
    for _ in range(climbs):
        answer = rng.randrange(k)
        for level in range(1, m + 1):
            if rng.randrange(k) == answer:  # a fresh uniform guess at each level
                scores.append(level)
                resolved += 1
                break
        else:
            scores.append(m + penalty)
    return scores, resolved


@pytest.mark.parametrize(
    "k,m,penalty,seed",
    [(2, 5, 1.71, 1), (5, 5, CSQA_PENALTY, 2), (4, 5, MMLU_PENALTY, 3), (4, 3, 1.0, 4)],
)
def test_monte_carlo_guesser(k: int, m: int, penalty: float, seed: int) -> None:
    """200k simulated climbs. Tolerance: 5 standard errors of the mean, with the score's
    standard deviation taken from the exact outcome distribution; a correct module misses by
    more than that with probability below 1e-6 for any seed, while every plausible slip (a
    missing penalty, a level off by one, (1/k)^j instead of (1-1/k)^(j-1)/k) moves the HPI by
    tens of standard errors (MMLU: SE ~ 0.006; dropping the penalty alone moves it by 0.72)."""
    climbs = 200_000
    scores, resolved = _simulate(k, m, penalty, climbs, seed)
    probs = _outcomes(k, m)
    values = [F(j) for j in range(1, m + 1)] + [m + _exact(penalty)]
    mean = sum(p * v for p, v in zip(probs, values, strict=True))
    variance = sum(p * (v - mean) ** 2 for p, v in zip(probs, values, strict=True))
    se = math.sqrt(float(variance) / climbs)
    levels = chance_levels(k, m, penalty)
    simulated = sum(scores) / climbs
    assert abs(levels.hpi - simulated) <= 5 * se
    acc = float(sum(probs[:m]))
    acc_se = math.sqrt(acc * (1 - acc) / climbs)
    assert abs(levels.accuracy - resolved / climbs) <= 5 * acc_se
    level1 = sum(1 for s in scores if s == 1) / climbs
    assert abs(levels.level1_accuracy - level1) <= 5 * math.sqrt((1 / k) * (1 - 1 / k) / climbs)


# --- the skill scale ---------------------------------------------------------------------


def test_skill_is_zero_at_chance_and_one_at_level_one() -> None:
    for chance in [chance_levels(2, 5, 1.71).hpi, chance_levels(4, 5, MMLU_PENALTY).hpi, 1.5]:
        assert hpi_skill(chance, chance) == 0.0
        assert hpi_skill(1.0, chance) == 1.0


def test_skill_hand_values() -> None:
    # (2 - 1.5) / (2 - 1) = 0.5;  (2 - 3) / 1 = -1;  (4 - 2.5) / 3 = 0.5
    assert hpi_skill(1.5, 2.0) == 0.5
    assert hpi_skill(3.0, 2.0) == -1.0
    assert hpi_skill(2.5, 4.0) == 0.5
    # BoolQ: a model at HPI 1.5 against 1.9909375 -> 0.4909375 / 0.9909375
    assert hpi_skill(1.5, chance_levels(2, 5, 1.71).hpi) == pytest.approx(
        0.4909375 / 0.9909375, rel=1e-12
    )


def test_skill_below_chance_is_negative() -> None:
    chance = chance_levels(4, 5, MMLU_PENALTY).hpi
    assert hpi_skill(chance + 0.1, chance) < 0
    # the worst possible HPI (everything unresolved: m + penalty) is below chance
    assert hpi_skill(5 + MMLU_PENALTY, chance) < 0


def test_skill_orders_like_hpi_reversed() -> None:
    chance = chance_levels(5, 5, CSQA_PENALTY).hpi
    hpis = [1.0, 1.3, 2.0, 3.5, chance, 6.0, 7.52]
    skills = [hpi_skill(h, chance) for h in hpis]
    assert all(a is not None and b is not None and a > b for a, b in itertools.pairwise(skills))


@pytest.mark.parametrize(
    "hpi,chance",
    [
        (None, 2.0),
        (1.5, None),
        (None, None),
        (1.0, 1.0),
        (1.2, 0.9),
        (1.0, chance_levels(1, 5, 2).hpi),
    ],
)
def test_skill_none_cases(hpi: float | None, chance: float | None) -> None:
    assert hpi_skill(hpi, chance) is None
