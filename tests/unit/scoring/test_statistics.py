"""Statistics (PROVENANCE.md "Statistics"): exact bounds, Clopper-Pearson, exact McNemar, paired CI.

SciPy is a dev dependency only, the reference the tests compare with (the full grids: test_exact.py).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from afpbench.scoring.statistics import (
    clopper_pearson,
    describe_failures,
    mcnemar_exact,
    paired_difference,
    rule_of_three,
    zero_failure_upper_bound,
)


def test_zero_failure_bound_at_n49_reads_5_9_percent():
    """Rule: zero failures is an estimate: 0/49 reads 'upper bound 5.9%' (1 - 0.05^(1/49))."""
    assert zero_failure_upper_bound(49) == pytest.approx(0.05931, abs=1e-5)
    assert describe_failures(0, 49) == "0/49; upper bound 5.9%; 3/n 6.1%"


def test_zero_failure_bound_is_the_one_sided_clopper_pearson_bound():
    """Rule: zero-failure bound: the exact one-sided bound, B(0.95; 1, n), up to n = 10^6."""
    beta = pytest.importorskip("scipy.stats").beta
    for n in (1, 5, 49, 200, 10**4, 10**6):
        assert zero_failure_upper_bound(n) == pytest.approx(beta.ppf(0.95, 1, n), rel=1e-9)


def test_rule_of_three_only_from_n30():
    """Rule: 3/n is shown only for n >= 30 (below it overstates; above 1 for n < 3)."""
    assert rule_of_three(29) is None
    assert rule_of_three(2) is None
    assert rule_of_three(30) == pytest.approx(0.1)
    assert describe_failures(0, 29) == "0/29; upper bound 9.8%"


def test_clopper_pearson_k3_n40_matches_beta_quantiles_and_tail_definition():
    """Rule: k failures use the exact Clopper-Pearson interval (Beta quantiles)."""
    stats = pytest.importorskip("scipy.stats")
    beta, binom = stats.beta, stats.binom
    low, high = clopper_pearson(3, 40)
    assert low == pytest.approx(beta.ppf(0.025, 3, 38), rel=1e-12)
    assert high == pytest.approx(beta.ppf(0.975, 4, 37), rel=1e-12)
    # Definition, independent of Beta: P(X >= 3 | low) = 0.025 and P(X <= 3 | high) = 0.025.
    assert binom.sf(2, 40, low) == pytest.approx(0.025, abs=1e-9)
    assert binom.cdf(3, 40, high) == pytest.approx(0.025, abs=1e-9)
    assert describe_failures(3, 40) == "3/40 failures (7.5%, 95% CI 1.6%-20.4%)"


def test_clopper_pearson_published_table_values():
    """Published exact 95% limits (standard exact binomial tables, R binom.test):
    1/10 -> 0.0025-0.4450, 0/10 -> 0-0.3085, 5/10 -> 0.1871-0.8129."""
    low, high = clopper_pearson(1, 10)
    assert (round(low, 4), round(high, 4)) == (0.0025, 0.4450)
    assert clopper_pearson(0, 10) == (0.0, pytest.approx(0.3085, abs=5e-5))
    low, high = clopper_pearson(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.1871, 0.8129)
    assert clopper_pearson(10, 10)[1] == 1.0


def test_clopper_pearson_rejects_impossible_counts():
    with pytest.raises(ValueError):
        clopper_pearson(5, 4)
    with pytest.raises(ValueError):
        clopper_pearson(0, 0)


def test_mcnemar_exact_b10_c2():
    """Exact two-sided McNemar for b=10, c=2: 2 * P(X <= 2 | 12, 1/2) = 158/4096 = 0.0386."""
    p = mcnemar_exact(10, 2)
    assert p == pytest.approx(158 / 4096, rel=1e-12)
    assert round(p, 4) == 0.0386
    assert mcnemar_exact(2, 10) == p


def test_mcnemar_without_discordant_pairs_is_one():
    assert mcnemar_exact(0, 0) == 1.0


def test_paired_difference_newcombe_published_example():
    """Newcombe square-and-add (method 10) on Cavo et al. 2012 (Fagerland, Lydersen & Laake 2017, ch. 8):
    estimate -0.0621, 95% CI -0.1186 to -0.0046."""
    pairs = [(True, True)] * 59 + [(True, False)] * 6 + [(False, True)] * 16 + [(False, False)] * 80
    diff, low, high = paired_difference(pairs)
    assert (round(diff, 4), round(low, 4), round(high, 4)) == (-0.0621, -0.1186, -0.0046)


def test_paired_difference_all_concordant_contains_zero():
    diff, low, high = paired_difference([(True, True)] * 10 + [(False, False)] * 10)
    assert diff == 0
    assert low < 0 < high
    assert -1 <= low and high <= 1


def test_paired_difference_needs_pairs():
    with pytest.raises(ValueError):
        paired_difference([])


def test_no_scored_runs():
    assert describe_failures(0, 0) == "no scored runs"


def test_the_statistics_of_a_summary_never_import_scipy():
    """Importing scipy.stats costs 0.6-1.7 s, most of a short run's aggregation: the summary path (rate
    blocks, paired comparisons, exclusion balance) computes its exact statistics without it. A fresh
    interpreter, so that other tests' imports do not count."""
    code = textwrap.dedent("""
        import sys
        import afpbench.workers.results.aggregation
        from afpbench.scoring.balance import exclusion_balance
        from afpbench.scoring.rates import compare, rate_block
        from afpbench.scoring.statistics import paired_difference

        block = rate_block({"MODEL_PASS": 7, "MODEL_FAIL": 3})
        assert block.pass_rate_ci95 is not None and 0 < block.pass_rate_ci95[0] < 0.7 < block.pass_rate_ci95[1] < 1
        assert rate_block({"MODEL_PASS": 49}).failures.startswith("0/49; upper bound 5.9%")
        test = compare("C", "B", {(True, True): 5, (True, False): 10, (False, True): 2, (False, False): 3})
        assert abs(test.p_value - 158 / 4096) < 1e-12
        paired_difference([(True, False)] * 3 + [(False, False)] * 4, confidence=0.9)
        counts = {("h", "C"): {"GRADER_DISPUTE": 6, "MODEL_PASS": 4}, ("h", "B"): {"MODEL_PASS": 10}}
        balance = exclusion_balance(counts, {"h": "m"}, [("C", "B")])
        assert balance.comparisons[0].p_value is not None and balance.flagged == 1
        loaded = sorted(m for m in sys.modules if m == "scipy" or m.startswith("scipy."))
        assert not loaded, loaded
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
