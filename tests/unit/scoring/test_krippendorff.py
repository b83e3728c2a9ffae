"""Krippendorff's alpha on the 0-2 rubric dimensions (issue 37): ordinal metric, bootstrap interval; checked by
hand and against the `krippendorff` package."""

from __future__ import annotations

import random

import pytest

from afpbench.scoring.krippendorff import krippendorff_alpha

HAND = [[0, 0], [1, 1], [2, 2], [0, 1]]


def test_alpha_by_hand():
    """Values n0 = 3, n1 = 3, n2 = 2 (n = 8); one disagreeing unit gives o01 = o10 = 1.
    Ordinal deltas: d01 = ((3+3) - 3)^2 = 9, d02 = (8 - 2.5)^2 = 30.25, d12 = (5 - 2.5)^2 = 6.25;
    alpha = 1 - (n - 1) * 2 * 9 / (2 * (9*9 + 6*30.25 + 6*6.25)) = 1 - 7 * 18 / 600 = 0.79.
    Interval deltas (c - k)^2: alpha = 1 - 7 * 2 / (2 * (9 + 24 + 6)) = 1 - 14 / 78."""
    assert krippendorff_alpha(HAND).alpha == pytest.approx(0.79)
    assert krippendorff_alpha(HAND, metric="interval").alpha == pytest.approx(1 - 14 / 78)
    result = krippendorff_alpha(HAND)
    assert result.units == 4 and result.values == 8 and result.metric == "ordinal"


@pytest.mark.parametrize("metric", ["ordinal", "interval"])
def test_alpha_is_the_krippendorff_package(metric):
    krippendorff = pytest.importorskip("krippendorff")
    np = pytest.importorskip("numpy")
    rng = random.Random(9)
    for _ in range(25):
        judges, units = rng.randint(2, 4), rng.randint(3, 60)
        rows = [[rng.choice([0, 1, 2]) for _ in range(units)] for _ in range(judges)]
        for j in range(1, judges):  # some agreement with the first judge
            rows[j] = [a if rng.random() < 0.6 else b for a, b in zip(rows[0], rows[j], strict=True)]
        data = [[v if rng.random() > 0.15 else None for v in row] for row in rows]
        ours = krippendorff_alpha([[row[u] for row in data] for u in range(units)], metric=metric)
        reference = np.array([[np.nan if v is None else v for v in row] for row in data], dtype=float)
        try:
            theirs = krippendorff.alpha(reliability_data=reference, level_of_measurement=metric,
                                        value_domain=[0, 1, 2])
        except ValueError:  # the package refuses data with one value only
            assert ours.alpha is None
            continue
        if ours.alpha is None:
            assert np.isnan(theirs) or theirs == pytest.approx(1.0)
        else:
            assert ours.alpha == pytest.approx(theirs, abs=1e-12)


def test_the_bootstrap_interval_holds_alpha_and_is_the_same_every_time():
    rng = random.Random(1)
    truths = [rng.choice([0, 1, 2]) for _ in range(200)]
    units = [[t, t if rng.random() < 0.7 else rng.choice([0, 1, 2])] for t in truths]
    first, again = krippendorff_alpha(units), krippendorff_alpha(units)
    assert first.interval == again.interval
    low, high = first.interval
    assert low < first.alpha < high and high - low < 0.3
    assert krippendorff_alpha(units, seed=2).interval != first.interval


def test_units_without_two_values_drop_out_and_no_variation_has_no_alpha():
    result = krippendorff_alpha([[1, None], [None, None], [0, 2], [2, 2]])
    assert result.units == 2
    assert krippendorff_alpha([[1, 1], [1, 1]]).alpha is None
    assert krippendorff_alpha([[1, None]]).alpha is None
    with pytest.raises(ValueError, match="value 3"):
        krippendorff_alpha([[3, 1]])
