"""Power planning (issue 37, `afpbench plan`): the variance model, power, MDD, repeats and fixtures needed,
and the variance model estimated from a pilot's per-fixture pair tables."""

from __future__ import annotations

import json
import math

import pytest

from afpbench.scoring.clustered import ClusterTable
from afpbench.scoring.power import (
    DEFAULT_VARIANCE,
    Design,
    VarianceModel,
    difference_variance,
    estimate_variance,
    fixtures_needed,
    min_detectable_difference,
    plan_comparison,
    power,
    repeats_needed,
)

MODEL = VarianceModel(discordance=0.4, between_fixture_sd=0.1, source="default")


def test_the_design_puts_high_risk_fixtures_at_three_repeats_at_least():
    """Rule: P05-P07 need >= 3 repeats per condition."""
    design = Design.of(8, 1, high_risk=3)
    assert design.fixtures_by_pairs == ((1, 5), (3, 3)) and design.pairs == 14 and design.fixtures == 8
    assert Design.of(8, 5, high_risk=3).fixtures_by_pairs == ((5, 8),)
    assert Design.of(8, 3, high_risk=3).degrees_of_freedom == pytest.approx(7)
    assert Design.of(1, 3).degrees_of_freedom is None
    with pytest.raises(ValueError, match="high_risk"):
        Design.of(2, 1, high_risk=3)


def test_the_variance_of_the_difference_by_hand():
    """Var(d) = (q - D^2 - tau^2) / N + tau^2 sum(n_g^2) / N^2."""
    design = Design.of(8, 1, high_risk=3)  # N = 14, sum n^2 = 5 + 27 = 32
    expected = (0.4 - 0.04 - 0.01) / 14 + 0.01 * 32 / 14 ** 2
    assert difference_variance(MODEL, design, 0.2) == pytest.approx(expected)


def test_power_with_equal_sizes_is_statsmodels_one_sample_t_power():
    """Equal sizes: t on G - 1 with non-centrality D / SE is a one-sample t test on G cluster means."""
    TTestPower = pytest.importorskip("statsmodels.stats.power").TTestPower
    for fixtures, repeats, difference in ((8, 3, 0.2), (40, 3, 0.1), (12, 1, 0.3)):
        design = Design.of(fixtures, repeats)
        effect = difference / math.sqrt(difference_variance(MODEL, design, difference) * fixtures)
        expected = TTestPower().power(effect_size=effect, nobs=fixtures, alpha=0.05, alternative="two-sided")
        assert power(MODEL, design, difference) == pytest.approx(float(expected), rel=1e-6)


def test_power_at_no_difference_is_alpha_and_grows_with_the_difference():
    design = Design.of(8, 1, high_risk=3)
    assert power(MODEL, design, 0.0) == pytest.approx(0.05)
    values = [power(MODEL, design, d) for d in (0.05, 0.1, 0.2, 0.3)]
    assert values == sorted(values)
    assert power(MODEL, Design.of(1, 5), 0.3) == 0.0  # one fixture: the clustered test does not exist


def test_the_mdd_is_where_power_reaches_the_target():
    design = Design.of(40, 3, high_risk=3)
    mdd = min_detectable_difference(MODEL, design)
    assert mdd is not None and power(MODEL, design, mdd) == pytest.approx(0.8, abs=1e-4)
    assert min_detectable_difference(MODEL, Design.of(1, 3)) is None


def test_repeats_needed_is_the_smallest_that_reaches_the_target():
    needed = repeats_needed(MODEL, 40, 0.1, high_risk=3)
    assert needed is not None and needed > 1
    assert power(MODEL, Design.of(40, needed, 3), 0.1) >= 0.8 > power(MODEL, Design.of(40, needed - 1, 3), 0.1)


def test_a_difference_below_the_between_fixture_floor_is_not_reachable_by_repeats():
    """With F fixtures Var(d) >= tau^2 / F: repeats alone cannot reach 10 points on 8 fixtures at tau = 0.15;
    more fixtures can."""
    assert repeats_needed(DEFAULT_VARIANCE, 8, 0.10, high_risk=3) is None
    more = fixtures_needed(DEFAULT_VARIANCE, 3, 0.10, high_risk=3)
    assert more is not None and more > 8
    assert power(DEFAULT_VARIANCE, Design.of(more, 3, 3), 0.10) >= 0.8
    assert power(DEFAULT_VARIANCE, Design.of(more - 1, 3, 3), 0.10) < 0.8


def test_power_stays_finite_at_thousands_of_fixtures():
    """SciPy's non-central t is NaN there; the normal limit takes over."""
    assert 0 < power(DEFAULT_VARIANCE, Design.of(20_000, 1, 3), 0.01) < 1


def test_the_plan_has_the_fields_the_json_promises():
    plan = plan_comparison("D", "A", DEFAULT_VARIANCE, fixtures=8, repeats=1, high_risk=3, detect=0.10)
    data = json.loads(plan.model_dump_json())
    assert {"first", "second", "min_detectable_difference", "repeats_needed"} <= set(data)
    assert data["first"] == "D" and data["second"] == "A" and data["repeats_needed"] is None
    assert data["variance"]["source"] == "default" and data["variance"]["discordance"] == 0.5
    assert data["pairs_per_model"] == 14 and data["high_risk_repeats"] == 3
    assert "not reachable by repeats" in plan.reading and f"{plan.fixtures_needed} fixtures" in plan.reading
    assert plan.min_detectable_difference is not None and plan.min_detectable_difference > 0.10
    reachable = plan_comparison("D", "A", MODEL, fixtures=40, repeats=3, high_risk=3, detect=0.10)
    assert reachable.repeats_needed is not None and f"needs {reachable.repeats_needed} repeats" in reachable.reading
    with pytest.raises(ValueError, match="detect"):
        plan_comparison("D", "A", MODEL, fixtures=8, repeats=1, detect=0)


def test_the_variance_model_from_a_pilot_by_hand():
    """q = discordant / N; tau^2 = (MSB - MSW) / n0, the one-way ANOVA estimator."""
    tables = [ClusterTable("P01", 0, 3, 0, 0), ClusterTable("P02", 2, 0, 1, 0), ClusterTable("P03", 1, 1, 1, 0)]
    # d: P01 [1, 1, 1], P02 [0, 0, -1], P03 [0, 1, -1]; N = 9, mean 2/9
    within = (0 + (1 - 1 / 3) + (2 - 0)) / (9 - 3)
    means = [1, -1 / 3, 0]
    between = sum(3 * (m - 2 / 9) ** 2 for m in means) / 2
    n0 = (9 - 27 / 9) / 2
    model = estimate_variance(tables)
    assert model.discordance == pytest.approx(6 / 9)
    assert model.between_fixture_sd == pytest.approx(math.sqrt((between - within) / n0))
    assert model.source == "pilot" and model.pilot_fixtures == 3 and model.pilot_pairs == 9


def test_a_pilot_that_cannot_say_falls_back_to_the_defaults_and_says_so():
    none = estimate_variance([ClusterTable("P01", 2, 0, 0, 1), ClusterTable("P02", 1, 0, 0, 0)])
    assert none.discordance == DEFAULT_VARIANCE.discordance and "no discordant pair" in none.note
    single = estimate_variance([ClusterTable("P01", 0, 1, 0, 0), ClusterTable("P02", 1, 0, 0, 0)])
    assert single.discordance == 0.5 and single.between_fixture_sd == DEFAULT_VARIANCE.between_fixture_sd
    assert "one pair per fixture" in single.note
