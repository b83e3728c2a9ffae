"""Judge reliability (issue 37): swap consistency, usable rate and agreement with humans with exact intervals;
Cohen's kappa on pass/fail with its Fleiss-Cohen-Everitt interval and base rates, against statsmodels."""

from __future__ import annotations

import random

import pytest

from afpbench.scoring.agreement import cohens_kappa, human_agreement, share, swap_consistency, usable_rate
from afpbench.scoring.statistics import clopper_pearson


def test_shares_carry_the_exact_interval():
    """Rule: swap consistency is the share of swapped re-judges that agreed with the first round."""
    result = swap_consistency(17, 20)
    assert result.share == 0.85 and result.interval == clopper_pearson(17, 20)
    assert usable_rate(0, 4).share == 0 and usable_rate(0, 4).interval == clopper_pearson(0, 4)
    empty = share(0, 0)
    assert empty.share is None and empty.interval is None


def test_kappa_and_its_standard_error_are_statsmodels():
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")
    rng = random.Random(2)
    for _ in range(40):
        pairs = [(rng.random() < 0.6, rng.random() < 0.5) for _ in range(rng.randint(5, 80))]
        pairs += [(True, True)] * rng.randint(1, 20) + [(False, False)] * rng.randint(1, 5)
        table = [[sum(p == (a, b) for p in pairs) for b in (True, False)] for a in (True, False)]
        expected = inter_rater.cohens_kappa(table)
        result = cohens_kappa(pairs)
        assert result.kappa == pytest.approx(expected.kappa, abs=1e-12)
        assert result.standard_error == pytest.approx(expected.std_kappa, rel=1e-9)
        low, high = result.interval
        assert low == pytest.approx(max(-1, result.kappa - 1.959963984540054 * result.standard_error))
        assert high == pytest.approx(min(1, result.kappa + 1.959963984540054 * result.standard_error))


def test_kappa_is_the_textbook_formula():
    """(observed - chance) / (1 - chance), the formula workers/grading/calibration.py used before it took this one."""
    rng = random.Random(4)
    for _ in range(30):
        pairs = [(rng.random() < 0.7, rng.random() < 0.6) for _ in range(rng.randint(1, 30))]
        n = len(pairs)
        observed = sum(a == b for a, b in pairs) / n
        pa, pb = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
        chance = pa * pb + (1 - pa) * (1 - pb)
        expected = None if chance == 1 else (observed - chance) / (1 - chance)
        assert cohens_kappa(pairs).kappa == pytest.approx(expected, abs=1e-12)


def test_kappa_by_hand_with_base_rates():
    # 40 items: both pass 20, first only 5, second only 5, both fail 10 -> po 0.75, pe .625^2 + .375^2
    pairs = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 5 + [(False, False)] * 10
    result = cohens_kappa(pairs)
    chance = 0.625 ** 2 + 0.375 ** 2
    assert result.kappa == pytest.approx((0.75 - chance) / (1 - chance))
    assert result.base_rates == (0.625, 0.625) and result.n == 40


def test_kappa_is_undefined_when_both_raters_give_one_verdict():
    result = cohens_kappa([(True, True)] * 5)
    assert result.kappa is None and result.interval is None and result.base_rates == (1.0, 1.0)
    assert cohens_kappa([]).kappa is None


def test_agreement_with_humans():
    result = human_agreement([(True, True), (True, False), (False, False), (True, True)])
    assert result.agreement.count == 3 and result.agreement.total == 4
    assert result.kappa.n == 4
