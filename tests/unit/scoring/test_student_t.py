"""Student's t in pure Python (scoring/student_t.py) against scipy.stats.t: the tails and quantiles behind the
fixture-clustered interval and the length-bias slope, for whole and fractional (Bell-McCaffrey) df."""

from __future__ import annotations

import pytest

from afpbench.scoring.student_t import incomplete_beta, t_quantile, t_sf, t_two_sided_p, two_sided_power

stats = pytest.importorskip("scipy.stats")
special = pytest.importorskip("scipy.special")

DFS = (0.6, 1, 1.5, 2, 3.7, 5.154776909503402, 7, 12.3, 39, 200, 5_000, 1_000_000)
TS = (0.0, 0.01, 0.3, 1, 1.96, 2.5, 4, 10, 40, 300)
PROBABILITIES = (1e-9, 1e-4, 0.001, 0.005, 0.025, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.975, 0.995, 0.9999)


@pytest.mark.parametrize("df", DFS)
def test_tails_are_scipys(df):
    for t in TS:
        for signed in (t, -t):
            expected = float(stats.t.sf(signed, df))
            assert t_sf(signed, df) == pytest.approx(expected, rel=1e-10, abs=1e-300)
        assert t_two_sided_p(t, df) == pytest.approx(float(2 * stats.t.sf(t, df)), rel=1e-10, abs=1e-300)


@pytest.mark.parametrize("df", DFS)
def test_quantiles_are_scipys(df):
    for p in PROBABILITIES:
        assert t_quantile(p, df) == pytest.approx(float(stats.t.ppf(p, df)), rel=1e-10, abs=1e-12)


def test_the_incomplete_beta_is_scipys_betainc():
    for a in (0.3, 0.5, 1, 2.5, 40, 3000):
        for b in (0.5, 1, 7, 900):
            for x in (1e-8, 0.01, 0.2, 0.5, 0.77, 0.999):
                assert incomplete_beta(a, b, x) == pytest.approx(float(special.betainc(a, b, x)), rel=1e-10, abs=1e-300)


def test_bad_arguments():
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_sf(1.0, 0)
    with pytest.raises(ValueError, match="p must"):
        t_quantile(1.0, 3)


def test_random_points_around_where_the_fraction_switches_sides():
    """I_x(a, b) changes method at x = (a + 1) / (a + b + 2): both sides, every df, agree with SciPy."""
    import random

    rng = random.Random(12)
    for _ in range(400):
        df = rng.choice([rng.uniform(0.5, 3), rng.uniform(3, 60), 10 ** rng.uniform(2, 5)])
        switch = (df / 2 + 1) / (df / 2 + 2.5)
        x = min(0.999999, max(1e-6, switch + rng.uniform(-0.05, 0.05)))
        t = (df * (1 - x) / x) ** 0.5
        assert t_sf(t, df) == pytest.approx(float(stats.t.sf(t, df)), rel=1e-10)


@pytest.mark.parametrize("df", (0.7, 1, 2, 5.154776909503402, 7, 39, 500, 10_000))
def test_the_power_of_the_two_sided_test_is_scipys_noncentral_t(df):
    for alpha in (0.01, 0.05, 0.2):
        critical = stats.t.ppf(1 - alpha / 2, df)
        for delta in (0.0, 0.4, 1, 2, 2.8, 5, 10, 25):
            expected = float(stats.nct.sf(critical, df, delta) + stats.nct.cdf(-critical, df, delta))
            if expected != expected:  # SciPy's non-central t gives NaN far in some tails
                continue
            assert two_sided_power(delta, df, alpha) == pytest.approx(expected, abs=1e-9)


def test_the_power_at_a_million_degrees_of_freedom_is_the_normal_ones():
    """Where SciPy's non-central t gives NaN, the normal limit: Phi(d - z) + Phi(-d - z)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.975)
    for delta in (0.5, 2, 3):
        expected = NormalDist().cdf(delta - z) + NormalDist().cdf(-delta - z)
        assert two_sided_power(delta, 1e6, 0.05) == pytest.approx(expected, abs=1e-5)
