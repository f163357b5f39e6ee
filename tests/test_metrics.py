import pytest

from hpt.results import Attempt, SampleRecord, hpi_score, summarize


def record(
    level: int | None, m: int = 5, penalty: float = 1.71, error: str | None = None
) -> SampleRecord:
    return SampleRecord(
        sample_id=f"s{level}-{error}",
        dataset="boolq",
        model="m",
        strategies=[f"s{i}" for i in range(m)],
        m=m,
        penalty=penalty,
        target="True",
        resolved_level=level,
        hpi_score=None if error else hpi_score(level, m, penalty),
        error=error,
        attempts=[Attempt(level=1, strategy="s0")],
    )


def test_hpi_score_per_sample() -> None:
    assert hpi_score(1, 5, 1.71) == 1
    assert hpi_score(4, 5, 1.71) == 4
    assert hpi_score(None, 5, 1.71) == pytest.approx(6.71)
    assert hpi_score(None, 3, 2.14) == pytest.approx(5.14)
    with pytest.raises(ValueError):
        hpi_score(6, 5, 1.0)


def test_summary_matches_hand_computation() -> None:
    # levels 1, 1, 3, 5 and one unresolved; m = 5, penalty 2.52 (CSQA)
    records = [record(1, penalty=2.52), record(1, penalty=2.52), record(3, penalty=2.52),
               record(5, penalty=2.52), record(None, penalty=2.52)]  # fmt: skip
    s = summarize(records, dataset="csqa", model="m", mode="standard", m=5, penalty=2.52)
    assert s.hpi == pytest.approx((1 + 1 + 3 + 5 + 7.52) / 5)  # 3.504
    assert s.accuracy == pytest.approx(4 / 5)
    assert s.level1_accuracy == pytest.approx(2 / 5)
    assert s.level_counts == {1: 2, 2: 0, 3: 1, 4: 0, 5: 1}
    assert (s.n, s.samples, s.unresolved, s.errors) == (5, 5, 1, 0)


def test_custom_m_and_errors_are_not_scored() -> None:
    records = [record(2, m=3, penalty=3.03), record(None, m=3, penalty=3.03),
               record(None, m=3, penalty=3.03, error="HTTP 500")]  # fmt: skip
    s = summarize(records, dataset="mmlu", model="m", mode="standard", m=3, penalty=3.03)
    assert s.hpi == pytest.approx((2 + 6.03) / 2)
    assert s.accuracy == pytest.approx(0.5)
    assert (s.n, s.samples, s.errors, s.unresolved) == (2, 3, 1, 1)
    assert s.level_counts == {1: 0, 2: 1, 3: 0}


def test_empty_run_has_no_hpi() -> None:
    s = summarize([], dataset="boolq", model="m", mode="standard", m=5, penalty=1.71)
    assert s.hpi is None and s.accuracy is None and s.n == 0


def test_pass_at_k_matches_the_papers_estimator() -> None:
    import math

    import pytest

    from hpt.results.scoring import pass_at_k

    def reference(n: int, c: int, k: int) -> float:  # Chen et al. 2021, figure 3
        if n - c < k:
            return 1.0
        return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))

    for n in range(1, 12):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(reference(n, c, k))
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)
