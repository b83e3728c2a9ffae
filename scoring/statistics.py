"""Exact intervals and paired tests for pass/fail counts.

- Zero failures are an estimate, never certainty: "0/n; upper bound x%" with the exact one-sided bound
  x = 1 - (1 - confidence)^(1/n) (the Clopper-Pearson bound at k = 0). The 3/n rule is its large-n
  approximation and is shown only for n >= 30 (below that it overstates, and above 1 for n < 3).
- k failures in n: the exact two-sided Clopper-Pearson interval from Beta quantiles
  (Clopper & Pearson 1934, Biometrika 26:404-413), solved as roots of binomial tails (scoring/exact.py).
- Paired conditions (same model, fixture and repeat under two instruction conditions): the exact
  McNemar test on the discordant pairs, and Newcombe's square-and-add interval for the difference of
  paired proportions (Newcombe 1998, Statistics in Medicine 17:2635-2650, method 10; as given in
  Fagerland, Lydersen & Laake 2017, "Statistical Analysis of Contingency Tables", ch. 8).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import NormalDist

from afpbench.scoring.exact import binom_quantile_root, binom_test_half


def _check_counts(k: int, n: int) -> None:
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    if not 0 <= k <= n:
        raise ValueError(f"k must be between 0 and n={n}, got {k}")


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact two-sided interval for a binomial proportion k/n; 0 and 1 at the edges.

    The bounds are the Beta quantiles B(alpha/2; k, n-k+1) and B(1-alpha/2; k+1, n-k), found as the p
    where P[Bin(n, p) >= k] = alpha/2 and where P[Bin(n, p) <= k] = alpha/2.
    """
    _check_counts(k, n)
    _check_confidence(confidence)
    tail = (1 - confidence) / 2
    low = 0.0 if k == 0 else binom_quantile_root(k, n, tail, upper=True)
    high = 1.0 if k == n else binom_quantile_root(k, n, tail, upper=False)
    return low, high


def zero_failure_upper_bound(n: int, confidence: float = 0.95) -> float:
    """Exact one-sided upper bound on the failure rate after 0 failures in n: 1 - (1 - confidence)^(1/n)."""
    _check_counts(0, n)
    _check_confidence(confidence)
    # -expm1(log(.)/n), not 1 - (.)**(1/n): for large n the bound is tiny and the subtraction would
    # keep only its first digits.
    return -math.expm1(math.log(1 - confidence) / n)


def rule_of_three(n: int) -> float | None:
    """3/n, the large-sample approximation of the zero-failure bound; None below n = 30."""
    return 3 / n if n >= 30 else None


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: binomial test of b successes in b + c discordant pairs at 1/2."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got b={b}, c={c}")
    if b + c == 0:
        return 1.0
    return binom_test_half(b, b + c)


def _wilson(x: int, n: int, z: float) -> tuple[float, float]:
    """Wilson score interval without continuity correction."""
    p = x / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_difference(
    pairs: Iterable[tuple[bool, bool]], confidence: float = 0.95
) -> tuple[float, float, float]:
    """Difference in pass proportions, first minus second, over matched pairs, with Newcombe's
    square-and-add interval (method 10): Wilson intervals for both margins, combined with the
    estimated correlation between them (phi, shrunk towards 0 by N/2 when positive, per Newcombe).

    `pairs` holds (first passed, second passed) for each matched unit. Returns (diff, low, high).
    """
    _check_confidence(confidence)
    n11 = n10 = n01 = n00 = 0
    for first, second in pairs:
        if first and second:
            n11 += 1
        elif first:
            n10 += 1
        elif second:
            n01 += 1
        else:
            n00 += 1
    n = n11 + n10 + n01 + n00
    if n == 0:
        raise ValueError("no pairs")
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p1, p2 = (n11 + n10) / n, (n11 + n01) / n
    diff = p1 - p2
    l1, u1 = _wilson(n11 + n10, n, z)
    l2, u2 = _wilson(n11 + n01, n, z)
    margins = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
    phi = 0.0
    if margins > 0:
        cross = n11 * n00 - n10 * n01
        if cross > n / 2:
            phi = (cross - n / 2) / math.sqrt(margins)
        elif cross < 0:
            phi = cross / math.sqrt(margins)
    d1, e1 = p1 - l1, u1 - p1
    d2, e2 = p2 - l2, u2 - p2
    low = diff - math.sqrt(max(0.0, d1 * d1 - 2 * phi * d1 * e2 + e2 * e2))
    high = diff + math.sqrt(max(0.0, d2 * d2 - 2 * phi * d2 * e1 + e1 * e1))
    return diff, max(-1.0, low), min(1.0, high)


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def describe_failures(failures: int, n: int) -> str:
    """Human-readable failure count: zero failures with the exact bound, otherwise k/n with its CI."""
    if n == 0:
        return "no scored runs"
    _check_counts(failures, n)
    if failures == 0:
        text = f"0/{n}; upper bound {_pct(zero_failure_upper_bound(n))}"
        three = rule_of_three(n)
        return text if three is None else f"{text}; 3/n {_pct(three)}"
    low, high = clopper_pearson(failures, n)
    return f"{failures}/{n} failures ({_pct(failures / n)}, 95% CI {_pct(low)}-{_pct(high)})"
