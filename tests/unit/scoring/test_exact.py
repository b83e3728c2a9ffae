"""scoring/exact.py against SciPy (a dev dependency only) and against exact rational arithmetic.

Protocol rules (PROVENANCE.md "Statistics"): k failures read k/n with the exact Clopper-Pearson interval;
paired conditions use the exact McNemar test; exclusion balance uses the two-sided Fisher exact test.
Every replacement must give SciPy's number to a relative 1e-10. Reached: 2e-14 for the intervals up to
n = 10^4, 1e-11 at n = 10^6 (there SciPy's beta.ppf is the one off: its bound's tail misses the target
by 5e-11, ours by 2e-16); 3e-13 for McNemar; 4e-14 for Fisher on small tables and up to 7e-11 at counts
near 10^5, where SciPy's hypergeometric terms lose digits (the exact-integer check below shows ours).
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest

from afpbench.scoring.exact import binom_quantile_root, binom_test_half, fisher_exact_two_sided, hypergeom_pmf
from tests.unit.scoring.test_balance import fisher_two_sided

stats = pytest.importorskip("scipy.stats")
np = pytest.importorskip("numpy")

REL = 1e-10
CONFIDENCES = (0.8, 0.9, 0.95, 0.99, 0.999)
LARGE_N = (1_000, 10_000, 100_000, 1_000_000)


def worst_relative_error(pairs):
    """The largest |ours - scipy| / scipy over (ours, scipy, label), with the label where it occurs."""
    worst = (0.0, None)
    for ours, theirs, label in pairs:
        error = 0.0 if ours == theirs else abs(ours - theirs) / abs(theirs)
        worst = max(worst, (error, label), key=lambda w: w[0])
    return worst


def clopper_pearson_pairs(n, confidence, ks):
    """(ours, SciPy's Beta quantile, label) for both bounds at each k in ks."""
    tail = (1 - confidence) / 2
    ks = np.asarray(ks)
    low = stats.beta.ppf(tail, ks, n - ks + 1)
    high = stats.beta.ppf(1 - tail, ks + 1, n - ks)
    for k, lo_ref, hi_ref in zip(ks.tolist(), low.tolist(), high.tolist(), strict=True):
        if k > 0:
            yield binom_quantile_root(k, n, tail, upper=True), lo_ref, ("low", k, n, confidence)
        if k < n:
            yield binom_quantile_root(k, n, tail, upper=False), hi_ref, ("high", k, n, confidence)


@pytest.mark.parametrize("confidence", CONFIDENCES)
def test_exact_interval_bounds_are_scipys_beta_quantiles_for_every_k_up_to_n100(confidence):
    """Rule: exact interval (Clopper-Pearson), every k of every n <= 100 at each confidence."""
    pairs = itertools.chain.from_iterable(clopper_pearson_pairs(n, confidence, range(n + 1)) for n in range(1, 101))
    error, where = worst_relative_error(pairs)
    assert error <= REL, where


def test_exact_interval_bounds_for_every_k_from_n101_to_n200():
    """Rule: exact interval (Clopper-Pearson), every k of n = 101..200 at 95%."""
    pairs = itertools.chain.from_iterable(clopper_pearson_pairs(n, 0.95, range(n + 1)) for n in range(101, 201))
    error, where = worst_relative_error(pairs)
    assert error <= REL, where


@pytest.mark.parametrize("n", LARGE_N)
def test_exact_interval_bounds_at_large_n_neither_overflow_nor_underflow(n):
    """Rule: exact interval at n up to 10^6, from the edges (bounds near 1e-8 and 1 - 1e-8) to the middle."""
    ks = [0, 1, 2, 5, n // 100, n // 3, n // 2, n - 5, n - 1, n]
    pairs = itertools.chain.from_iterable(clopper_pearson_pairs(n, c, ks) for c in (0.8, 0.95, 0.999))
    error, where = worst_relative_error(pairs)
    assert error <= REL, where


def test_exact_interval_bound_is_the_root_of_the_binomial_tail():
    """Rule: exact interval, by its definition and not through SciPy: P[X >= k | low] = alpha/2, computed
    here with exact rationals at the bound (rounded to a fraction) for a few small n."""
    for k, n in ((1, 10), (3, 40), (17, 30)):
        low = Fraction(binom_quantile_root(k, n, 0.025, upper=True))
        tail = sum(math.comb(n, j) * low**j * (1 - low) ** (n - j) for j in range(k, n + 1))
        assert float(tail) == pytest.approx(0.025, rel=1e-13)


def test_exact_interval_rejects_what_has_no_root():
    with pytest.raises(ValueError):
        binom_quantile_root(0, 10, 0.025, upper=True)
    with pytest.raises(ValueError):
        binom_quantile_root(10, 10, 0.025, upper=False)


def test_mcnemar_binomial_test_is_scipys_for_every_b_up_to_n100():
    """Rule: McNemar (exact, two-sided): binomtest(k, n, 1/2) for every k of every n <= 100 (SciPy's
    binomtest takes about a millisecond a call; the rational test below covers the definition)."""
    pairs = ((binom_test_half(k, n), stats.binomtest(k, n, 0.5).pvalue, (k, n))
             for n in range(1, 101) for k in range(n + 1))
    error, where = worst_relative_error(pairs)
    assert error <= REL, where


def test_mcnemar_binomial_test_at_large_n():
    """Rule: McNemar at up to 10^6 discordant pairs (p-values from 1 down to about 1e-290)."""
    cases = [(k, n) for n in (150, 201, 300, 1_001, 5_000, 100_000, 1_000_000)
             for k in (n // 2 - 2_000, n // 2 - 50, n // 2 - 1, n // 2, n // 2 + 1, n // 2 + 50) if k >= 0]
    cases += [(0, 900), (1, 900), (450, 1_001), (300, 1_001), (0, 150), (3, 201), (60, 300), (251, 300)]
    pairs = ((binom_test_half(k, n), stats.binomtest(k, n, 0.5).pvalue, (k, n)) for k, n in cases)
    error, where = worst_relative_error(pairs)
    assert error <= REL, where


def test_mcnemar_binomial_test_is_the_exact_rational_sum():
    """Rule: McNemar by its definition: 2 * P[X <= min(b, c)] at 1/2, in integers, for b + c <= 200."""
    for n in range(1, 201):
        below = list(itertools.accumulate(math.comb(n, j) for j in range(n + 1)))  # outcomes <= j
        for k in range(n + 1):
            exact = 1.0 if 2 * k == n else min(1.0, 2 * below[min(k, n - k)] / 2**n)
            assert binom_test_half(k, n) == pytest.approx(exact, rel=1e-13), (k, n)


def test_fisher_exact_is_scipys_on_every_table_with_counts_up_to_7():
    """Rule: exclusion balance (two-sided Fisher exact), every 2x2 table with counts 0..7, zeros included."""
    tables = itertools.product(range(8), repeat=4)
    pairs = ((fisher_exact_two_sided(*t), stats.fisher_exact([t[:2], t[2:]]).pvalue, t) for t in tables)
    error, where = worst_relative_error(pairs)
    assert error <= REL, where


def test_fisher_exact_is_scipys_on_large_and_lopsided_tables():
    """Rule: exclusion balance with counts up to 10^5, a zero cell or a near-empty row."""
    rng = random.Random(20240611)
    tables = []
    for scale in (30, 300, 3_000, 30_000, 100_000):
        for _ in range(40):
            a, b, c, d = (rng.randint(0, scale) for _ in range(4))
            tables += [(a, b, c, d), (0, b, c, d), (a, b, rng.randint(0, 3), d)]
    tables += [(0, 1000, 5, 995), (1, 0, 0, 1), (5000, 5000, 5000, 5000), (0, 0, 3, 4), (3, 4, 0, 0)]
    pairs = []
    for t in tables:
        theirs = stats.fisher_exact([t[:2], t[2:]]).pvalue
        if theirs > 1e-290:  # below, both are zero or denormal: no relative error to speak of
            pairs.append((fisher_exact_two_sided(*t), theirs, t))
    error, where = worst_relative_error(pairs)
    assert error <= REL, where


def test_fisher_exact_is_the_sum_by_its_definition():
    """Rule: exclusion balance by its definition (each table's probability a correctly rounded ratio of
    integers, test_balance.py), on small tables, ties included, and one of 2,000 cells."""
    for t in [(3, 7, 9, 1), (0, 5, 5, 0), (2, 2, 2, 2), (10, 0, 3, 12), (1, 20, 7, 4), (400, 600, 430, 570)]:
        assert fisher_exact_two_sided(*t) == pytest.approx(fisher_two_sided(*t), rel=1e-12), t


def test_hypergeometric_term_at_counts_near_10_5_is_exact_to_1e_13():
    """The term SciPy loses digits on (its Fisher p-values at counts near 10^5 are off by up to 1e-10)."""
    good, bad, draws, x = 82_000, 176_882, 115_268, 35_358
    exact = Fraction(math.comb(good, x) * math.comb(bad, draws - x), math.comb(good + bad, draws))
    assert hypergeom_pmf(x, good + bad, good, draws) == pytest.approx(float(exact), rel=1e-13)
