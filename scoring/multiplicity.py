"""Holm's step-down adjustment across a comparison family (Holm 1979, Scand. J. Statistics 6:65-70).

A sweep reports several comparisons (six for A-D); reading each at p < 0.05 would find a "difference"
somewhere far more often than one time in twenty when none exists. Holm controls the family-wise error
rate under any dependence between the tests, and is uniformly more powerful than Bonferroni.

Adjusted p of the i-th smallest of m p-values: max over j <= i of min(1, (m - j + 1) p_(j)). The same
values as statsmodels' multipletests(method="holm"), which tests/unit/scoring/test_multiplicity.py checks.
"""

from __future__ import annotations

from collections.abc import Sequence


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given. Ties keep their order (the adjusted values are equal
    either way)."""
    for p in p_values:
        if not 0 <= p <= 1:
            raise ValueError(f"p-values must lie in [0, 1], got {p}")
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
