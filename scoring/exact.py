"""Exact binomial and hypergeometric probabilities in pure Python: the numbers scoring/statistics.py and
scoring/balance.py report, without SciPy (importing scipy.stats takes 0.6-1.7 s, most of a short run's
aggregation).

Probabilities use Loader's saddle-point form (C. Loader 2000, "Fast and accurate computation of binomial
probabilities"; the form R's dbinom and dhyper use): every term is small, so the relative error stays near
1e-15 for n up to 10^6 and beyond, where lgamma differences of numbers near 10^7 would lose 8 digits.
Tails are summed outward from their largest term by the ratio of neighbours until the rest is negligible.

The two-sided tests follow SciPy 1.17's definitions (scipy/stats/_binomtest.py, binomtest; and
_stats_py.py, fisher_exact), tolerances and tie rules included; tests/unit/scoring/test_exact.py compares every
function with SciPy.
"""

from __future__ import annotations

import math
from collections.abc import Callable

_LN_2PI = math.log(2 * math.pi)
_HALF_LN_2PI = _LN_2PI / 2


def _stirlerr(n: int) -> float:
    """log(n!) - log(sqrt(2 pi n) (n/e)^n), the error of Stirling's formula (n >= 1)."""
    if n <= 15:  # the series below needs n > 15; here lgamma's cancellation costs < 1e-14
        return math.lgamma(n + 1) - (n + 0.5) * math.log(n) + n - _HALF_LN_2PI
    nn = float(n) * n
    # Stirling's series 1/12n - 1/360n^3 + 1/1260n^5 - 1/1680n^7 + 1/1188n^9, cut as in Loader / R.
    if n > 500:
        return (1 / 12 - (1 / 360) / nn) / n
    if n > 80:
        return (1 / 12 - (1 / 360 - (1 / 1260) / nn) / nn) / n
    if n > 35:
        return (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680) / nn) / nn) / nn) / n
    return (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - (1 / 1188) / nn) / nn) / nn) / nn) / n


def _bd0(x: float, m: float) -> float:
    """x log(x/m) + m - x, without the cancellation when x is near m (a series in (x-m)/(x+m))."""
    if abs(x - m) < 0.1 * (x + m):
        v = (x - m) / (x + m)
        s = (x - m) * v
        ej = 2 * x * v
        v2 = v * v
        j = 1
        while True:
            ej *= v2
            s1 = s + ej / (2 * j + 1)
            if s1 == s:
                return s1
            s = s1
            j += 1
    return x * math.log(x / m) + m - x


def _binom_pmf(x: int, n: int, p: float, q: float) -> float:
    """P[Bin(n, p) = x], with q = 1 - p passed in so that neither is rounded through the other."""
    if x < 0 or x > n:
        return 0.0
    if n == 0:
        return 1.0
    if p == 0:
        return 1.0 if x == 0 else 0.0
    if q == 0:
        return 1.0 if x == n else 0.0
    if x == 0:
        return math.exp(-_bd0(n, n * q) - n * p if p < 0.1 else n * math.log(q))
    if x == n:
        return math.exp(-_bd0(n, n * p) - n * q if q < 0.1 else n * math.log(p))
    lc = _stirlerr(n) - _stirlerr(x) - _stirlerr(n - x) - _bd0(x, n * p) - _bd0(n - x, n * q)
    lf = _LN_2PI + math.log(x) + math.log1p(-x / n)
    return math.exp(lc - 0.5 * lf)


def binom_pmf(x: int, n: int, p: float) -> float:
    return _binom_pmf(x, n, p, 1 - p)


def hypergeom_pmf(x: int, total: int, good: int, draws: int) -> float:
    """P[x good items in `draws` drawn without replacement from `total` of which `good` are good]."""
    bad = total - good
    if x < max(0, draws - bad) or x > min(draws, good):
        return 0.0
    p, q = draws / total, (total - draws) / total
    return _binom_pmf(x, good, p, q) * _binom_pmf(draws - x, bad, p, q) / _binom_pmf(draws, total, p, q)


def _sum_outward(term: float, j: int, end: int, step: int, ratio: Callable[[int], float]) -> float:
    """term(j) + term(j+step) + ... up to `end`, each from the last by ratio(j) = term(j+step)/term(j).
    Terms must shrink away from j (j is on the tail side of the mode); stops once they are negligible."""
    total = 0.0
    while True:
        total += term
        if j == end:
            return total
        term *= ratio(j)
        j += step
        if term <= total * 1e-20:  # the rest shrinks at least as fast: below double precision
            return total


def binom_tail(k: int, n: int, p: float, upper: bool) -> float:
    """P[Bin(n, p) >= k] if upper, else P[Bin(n, p) <= k]. The tail not holding the mean is summed;
    the other is 1 minus its complement (only ever compared with a small target, never reported)."""
    if k < 0 or k > n:
        return float(upper == (k < 0))  # the whole support, or none of it
    q = 1 - p
    if upper and k > n * p:  # all terms j >= k lie above the mode: they shrink upwards
        return _sum_outward(_binom_pmf(k, n, p, q), k, n, 1, lambda j: (n - j) / (j + 1) * p / q)
    if not upper and k < n * p:
        return _sum_outward(_binom_pmf(k, n, p, q), k, 0, -1, lambda j: j / (n - j + 1) * q / p)
    return 1.0 - binom_tail(k - 1 if upper else k + 1, n, p, not upper)


def binom_quantile_root(k: int, n: int, target: float, upper: bool) -> float:
    """The p in (0, 1) where P[Bin(n, p) >= k] = target (upper) or P[Bin(n, p) <= k] = target (not upper),
    for a target below 1/2: the Clopper-Pearson bounds, since I_p(a, b) = P[Bin(a+b-1, p) >= a].

    Safeguarded Newton on log(tail) - log(target), nearly linear in p over a tail: the root is bracketed
    by 0 or 1 and k/n (where the tail is at least 1/2, k being the median of Bin(n, k/n)), and a step that
    leaves the bracket is replaced by bisection. A step below 1e-12 of min(p, 1-p) is the last: Newton's
    error after it is of the order of its square.
    """
    if upper and not 1 <= k <= n or not upper and not 0 <= k < n or not 0 < target < 0.5:
        raise ValueError(f"no root for k={k}, n={n}, target={target}")
    # Where the tail or its complement is one term (p^n, q^n) the root is closed: no iteration for the
    # outer bounds at k = 0, 1, n-1, n, so every bound of a cell with n <= 2 (per-fixture cells are often that small).
    if upper and k in (1, n):
        return -math.expm1(math.log1p(-target) / n) if k == 1 else math.exp(math.log(target) / n)
    if not upper and k in (0, n - 1):
        return -math.expm1(math.log(target) / n) if k == 0 else math.exp(math.log1p(-target) / n)
    sign = 1.0 if upper else -1.0  # the tail grows with p for P[X >= k], shrinks for P[X <= k]
    lo, hi = (0.0, k / n) if upper else (k / n, 1.0)
    p = hi if upper else lo
    log_target = math.log(target)
    for _ in range(200):
        q = 1 - p
        tail = binom_tail(k, n, p, upper)
        if tail == 0:  # underflow, far on the side where the tail is below the target: bisect
            f, nxt = -math.inf, math.nan
        else:
            f = math.log(tail) - log_target
            # d/dp P[X >= k] = k/p pmf(k); d/dp P[X <= k] = -(n-k)/q pmf(k); divided by the tail for the log
            slope = _binom_pmf(k, n, p, q) * (k / p if upper else -(n - k) / q) / tail
            nxt = p - f / slope if slope else math.nan
            if abs(nxt - p) <= 1e-12 * min(p, q):
                return nxt
        if sign * f > 0:
            hi = p
        else:
            lo = p
        if not lo < nxt < hi:
            nxt = lo + (hi - lo) / 2
            if nxt in (lo, hi):  # the bracket is two neighbouring doubles
                return p
        p = nxt
    return p


def _threshold_index(pmf: Callable[[int], float], d: float, lo: int, hi: int) -> int:
    """SciPy's _binary_search_for_binom_tst: the i in [lo, hi] with a(i) <= d < a(i+1) for an ascending
    a; here pmf over one side of the mode (negated for the side where it falls)."""
    while lo < hi:
        mid = lo + (hi - lo) // 2
        value = pmf(mid)
        if value < d:
            lo = mid + 1
        elif value > d:
            hi = mid - 1
        else:
            return mid
    return lo if pmf(lo) <= d else lo - 1


def binom_test_half(k: int, n: int) -> float:
    """Two-sided exact binomial test of k successes in n trials at p = 1/2, as scipy.stats.binomtest: the
    probability of every outcome no more likely than k's, with SciPy's relative tolerance 1 + 1e-7."""
    if not 0 <= k <= n or n == 0:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    if 2 * k == n:
        return 1.0
    half = 0.5

    def pmf(x: int) -> float:
        return _binom_pmf(x, n, half, half)

    d = pmf(k) * (1 + 1e-7)
    if 2 * k < n:
        ix = _threshold_index(lambda x: -pmf(x), -d, (n + 1) // 2, n)
        y = n - ix + int(d == pmf(ix))
        p = binom_tail(k, n, half, upper=False) + binom_tail(n - y + 1, n, half, upper=True)
    else:
        y = _threshold_index(pmf, d, 0, n // 2) + 1
        p = binom_tail(y - 1, n, half, upper=False) + binom_tail(k, n, half, upper=True)
    return min(1.0, p)


def fisher_exact_two_sided(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher exact p-value of the 2x2 table [[a, b], [c, d]], as scipy.stats.fisher_exact
    (SciPy 1.17): 1 when a row or column is empty or the table is (within 1e-14) the most likely; else the
    observed tail plus the far-side tables at most 1 + 1e-14 times as likely as the observed one."""
    if min(a, b, c, d) < 0:
        raise ValueError(f"counts must be non-negative, got {[[a, b], [c, d]]}")
    row1, row2, col1 = a + b, c + d, a + c
    if 0 in (row1, row2, col1, b + d):
        return 1.0
    total = row1 + row2
    lowest, highest = max(0, col1 - row2), min(col1, row1)

    def pmf(x: int) -> float:
        return hypergeom_pmf(x, total, row1, col1)

    def up(x: int) -> float:  # term(x+1) / term(x)
        return (row1 - x) * (col1 - x) / ((x + 1) * (row2 - col1 + x + 1))

    def down(x: int) -> float:  # term(x-1) / term(x)
        return x * (row2 - col1 + x) / ((row1 - x + 1) * (col1 - x + 1))

    mode = int((col1 + 1) * (row1 + 1) / (total + 2))
    observed, most = pmf(a), pmf(mode)
    if abs(observed - most) / max(observed, most) <= 1e-14:
        return 1.0
    limit = observed * (1 + 1e-14)
    if a < mode:
        p = _sum_outward(observed, a, lowest, -1, down)
        if pmf(col1) <= limit:  # else no table beyond the mode is as unlikely as the observed one
            edge = _threshold_index(lambda x: -pmf(x), -limit, mode, col1) + 1
            if edge <= highest:
                p += _sum_outward(pmf(edge), edge, highest, 1, up)
    else:
        p = _sum_outward(observed, a, highest, 1, up)
        if pmf(0) <= limit:
            edge = _threshold_index(pmf, limit, 0, mode)
            if edge >= lowest:
                p += _sum_outward(pmf(edge), edge, lowest, -1, down)
    return min(1.0, p)
