"""Student's t distribution in pure Python: the tail and the quantile the fixture-clustered interval and the
length-bias slope need, for any positive (also fractional: Bell-McCaffrey) degrees of freedom, without
SciPy. A summary is computed after every run, and importing scipy.stats costs 0.6-1.7 s of it
(scoring/exact.py does the same for the binomial).

P(|T| > t) = I_x(df/2, 1/2) with x = df / (df + t^2): the regularized incomplete beta function, by its
continued fraction evaluated with the modified Lentz method (Press et al., Numerical Recipes, 3rd ed.,
section 6.4), on the side where it converges fast (the other by I_x(a, b) = 1 - I_(1-x)(b, a)). The
quantile is a safeguarded Newton root of the tail. The power of the two-sided test under a non-central t
(the planner's, scoring/power.py) is one smooth integral over the chi-square of the variance estimate.
tests/unit/scoring/test_student_t.py compares each with SciPy (scipy.stats.t, scipy.stats.nct).
"""

from __future__ import annotations

import math
from statistics import NormalDist

_TINY = 1e-300
_EPS = 1e-16
_MAX_TERMS = 100_000  # the fraction needs about sqrt(max(a, b)) terms: plenty for any df a sweep has


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), for x < (a + 1) / (a + b + 2)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > _TINY else _TINY)
            c = 1 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta fraction did not converge at a={a}, b={b}, x={x}")


def _stirling_tail(x: float) -> float:
    """log Gamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2), by its series (x >= 50: below 1e-17 after 3 terms)."""
    inv = 1 / x
    return inv * (1 / 12 - inv * inv * (1 / 360 - inv * inv / 1260))


def _log_gamma_ratio(a: float, b: float) -> float:
    """log Gamma(a + b) - log Gamma(a). For a large, lgamma's two values near a log a would cancel away about
    log10(a log a) digits (1e-10 at df = 10^6); Stirling's form keeps every term small instead."""
    if a < 50:
        return math.lgamma(a + b) - math.lgamma(a)
    return ((a - 0.5) * math.log1p(b / a) + b * math.log(a + b) - b
            + _stirling_tail(a + b) - _stirling_tail(a))


def incomplete_beta(a: float, b: float, x: float, complement: float | None = None) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0, x in [0, 1]; `complement` is 1 - x
    when the caller has it more exactly than 1 - x can be computed (x close to 1)."""
    y = 1 - x if complement is None else complement
    if x <= 0:
        return 0.0
    if y <= 0:
        return 1.0
    big, small = (a, b) if a >= b else (b, a)
    front = math.exp(_log_gamma_ratio(big, small) - math.lgamma(small) + a * math.log(x) + b * math.log(y))
    if x < (a + 1) / (a + b + 2):
        return front * _continued_fraction(a, b, x) / a
    return 1 - front * _continued_fraction(b, a, y) / b


def _check_df(df: float) -> None:
    if not df > 0 or math.isinf(df):
        raise ValueError(f"degrees of freedom must be positive and finite, got {df}")


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t on `df` degrees of freedom."""
    _check_df(df)
    if t == 0:
        return 0.5
    two_sided = _beyond(t, df)
    return two_sided / 2 if t > 0 else 1 - two_sided / 2


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| > |t|): computed directly, so a tiny p keeps its digits."""
    _check_df(df)
    return 1.0 if t == 0 else _beyond(t, df)


def _beyond(t: float, df: float) -> float:
    """P(|T| > |t|) = I_x(df/2, 1/2), x = df / (df + t^2), with 1 - x = t^2 / (df + t^2) kept exact."""
    return incomplete_beta(df / 2, 0.5, df / (df + t * t), t * t / (df + t * t))


def _log_density(t: float, df: float) -> float:
    return (math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
            - (df + 1) / 2 * math.log1p(t * t / df))


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p, for 0 < p < 1."""
    _check_df(df)
    if not 0 < p < 1:
        raise ValueError(f"p must lie strictly between 0 and 1, got {p}")
    if p == 0.5:
        return 0.0
    return _upper_point(1 - p, df) if p > 0.5 else -_upper_point(p, df)


def _upper_point(tail: float, df: float) -> float:
    """The t > 0 with P(T > t) = tail, for 0 < tail < 1/2: safeguarded Newton inside a bracket."""
    low, high = 0.0, 1.0
    while t_sf(high, df) > tail:  # the tail falls as t grows
        low, high = high, high * 2
    t = (low + high) / 2
    for _ in range(400):
        excess = t_sf(t, df) - tail
        if excess > 0:
            low = t
        else:
            high = t
        nxt = t + excess / math.exp(_log_density(t, df))  # Newton: d/dt sf = -density
        if not low < nxt < high:
            nxt = (low + high) / 2
        if abs(nxt - t) <= 1e-14 * max(1.0, abs(t)):
            return nxt
        t = nxt
    return t


def two_sided_power(noncentrality: float, df: float, alpha: float) -> float:
    """P(|T| > t_(1 - alpha/2)) for T non-central t on `df` degrees of freedom: the power of a two-sided t
    test. With T = (Z + d) / sqrt(V / df), V chi-square on df, it is the mean over V of
    Phi(d - c u) + Phi(-d - c u), u = sqrt(V / df): one integral, taken over w = log V by the trapezoid
    rule, which converges geometrically for an integrand this smooth and this fast to vanish (both
    sides). Checked against scipy.stats.nct to an absolute 1e-9."""
    _check_df(df)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha}")
    critical = t_quantile(1 - alpha / 2, df)
    normal = NormalDist()
    centre, spread = math.log(df), math.sqrt(2 / df)  # the mode and width of log V's density
    low, high = centre - max(12 * spread, 60 / df), centre + 12 * spread
    # Fine enough for the density (an eighth of its width) and for Phi's step where c u passes d, which
    # moves at d / 2 per unit of w.
    steps = math.ceil((high - low) / min(spread / 8, 0.25 / max(1.0, abs(noncentrality))))
    step = (high - low) / steps
    log_norm = -df / 2 * math.log(2) - math.lgamma(df / 2)
    total = 0.0
    for i in range(steps + 1):
        w = low + i * step
        density = math.exp(df / 2 * w - math.exp(w) / 2 + log_norm)
        u = math.exp((w - centre) / 2)
        value = normal.cdf(noncentrality - critical * u) + normal.cdf(-noncentrality - critical * u)
        total += density * value * (0.5 if i in (0, steps) else 1.0)
    return min(1.0, max(0.0, total * step))
