"""Length bias (issue 37): within fixture x condition, the slope of the judge's total on log2(answer length),
with a CR1 interval clustered by fixture; against statsmodels' OLS."""

from __future__ import annotations

import math
import random

import pytest

from afpbench.scoring.length_bias import JudgedAnswer, length_bias, mean_length_by_condition


def _answers(seed: int, slope: float, noise: float, fixtures: int = 6) -> list[JudgedAnswer]:
    rng = random.Random(seed)
    out = []
    for f in range(fixtures):
        for condition, base in (("A", 400), ("D", 1600)):
            level = rng.uniform(2, 6)  # the stratum's own level: fixture x condition
            for _ in range(4):
                length = base * 2 ** rng.uniform(-1, 1)
                out.append(JudgedAnswer(f"F{f}", condition, length,
                                        level + slope * math.log2(length) + rng.gauss(0, noise)))
    return out


def test_a_noiseless_judge_gives_its_slope_exactly():
    result = length_bias(_answers(1, 0.5, 0.0))
    assert result.slope_per_doubling == pytest.approx(0.5)
    low, high = result.interval
    assert high - low < 1e-9
    exact = length_bias([JudgedAnswer(f"F{f}", "A", length, math.log2(length)) for f in range(3) for length in (2, 4)])
    assert exact.slope_per_doubling == 1.0 and exact.interval is None and "fitted line" in exact.note


def test_between_strata_length_differences_do_not_count():
    """D answers are four times longer and their stratum levels differ; only within-stratum length counts."""
    answers = [JudgedAnswer(a.fixture, a.condition, a.length, a.total + (3 if a.condition == "D" else 0))
               for a in _answers(2, 0.0, 0.0)]
    assert length_bias(answers).slope_per_doubling == pytest.approx(0.0, abs=1e-12)


def test_slope_and_clustered_standard_error_are_statsmodels():
    sm = pytest.importorskip("statsmodels.api")
    np = pytest.importorskip("numpy")
    answers = _answers(3, 0.3, 1.0)
    strata = sorted({(a.fixture, a.condition) for a in answers})
    x = np.array([math.log2(a.length) for a in answers])
    y = np.array([a.total for a in answers])
    dummies = np.array([[(a.fixture, a.condition) == s for s in strata] for a in answers], dtype=float)
    fixed = sm.OLS(y, np.column_stack([x, dummies])).fit()
    for s in range(len(strata)):  # demean within strata: the same slope and residuals (Frisch-Waugh-Lovell)
        rows = dummies[:, s] == 1
        x[rows] -= x[rows].mean()
        y[rows] -= y[rows].mean()
    groups = np.array([int(a.fixture[1:]) for a in answers])
    within = sm.OLS(y, x[:, None]).fit(cov_type="cluster", cov_kwds={"groups": groups})
    result = length_bias(answers)
    assert result.slope_per_doubling == pytest.approx(float(fixed.params[0]), rel=1e-9)
    assert result.standard_error == pytest.approx(float(within.bse[0]), rel=1e-9)
    assert result.degrees_of_freedom == 5 and result.strata == 12 and result.fixtures == 6
    stats = pytest.importorskip("scipy.stats")
    half = stats.t.ppf(0.975, 5) * result.standard_error
    assert result.interval == pytest.approx((result.slope_per_doubling - half, result.slope_per_doubling + half))


def test_edge_cases():
    one = length_bias([a for a in _answers(4, 0.3, 1.0) if a.fixture == "F0"])
    assert one.slope_per_doubling is not None and one.interval is None and "one fixture" in one.note
    same = length_bias([JudgedAnswer("F1", "A", 500, t) for t in (3, 4, 5)])
    assert same.slope_per_doubling is None and same.strata == 0
    empty = length_bias([JudgedAnswer("F1", "A", 0, 3)] + _answers(5, 0.2, 1.0))
    assert empty.empty_answers == 1


def test_mean_length_per_condition():
    answers = [JudgedAnswer("F1", "D", 900, 6), JudgedAnswer("F2", "D", 1100, 6), JudgedAnswer("F1", "A", 300, 5)]
    means = mean_length_by_condition(answers)
    assert [(m.condition, m.answers, m.mean_length) for m in means] == [("A", 1, 300.0), ("D", 2, 1000.0)]
