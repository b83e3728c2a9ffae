"""Holm's adjustment across the comparison family (issue 37), against statsmodels' multipletests."""

from __future__ import annotations

import random

import pytest

from afpbench.scoring.multiplicity import holm


def test_holm_by_hand():
    """Sorted 0.01, 0.02, 0.04, 0.30 of four: x4, x3 (max with before), x2, x1, then monotone."""
    assert holm([0.04, 0.01, 0.30, 0.02]) == pytest.approx([0.08, 0.04, 0.30, 0.06])
    assert holm([0.5, 0.4]) == pytest.approx([0.8, 0.8])  # 2 x 0.4 = 0.8; then max(0.8, 0.5)
    assert holm([]) == []
    assert holm([0.9, 0.9, 0.9]) == [1.0, 1.0, 1.0]


def test_holm_is_statsmodels_multipletests_holm():
    """Rule: the Holm-adjusted p of every comparison equals statsmodels' (method="holm")."""
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    rng = random.Random(7)
    for _ in range(40):  # ~40 ms a call
        m = rng.randint(1, 12)
        p = [rng.choice([rng.random(), rng.random() ** 4, 1.0, 0.0, 0.05]) for _ in range(m)]
        expected = multipletests(p, method="holm")[1]
        assert holm(p) == pytest.approx(list(expected), abs=1e-15)


def test_holm_rejects_a_value_outside_zero_to_one():
    with pytest.raises(ValueError, match="1.5"):
        holm([0.1, 1.5])
