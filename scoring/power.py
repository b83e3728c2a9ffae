"""Power planning for a paired comparison, before any request: the maths behind `afpbench plan`.

The test planned for is the one the report runs (scoring/clustered.py): the pooled paired difference d
with its fixture-clustered CR2 standard error and a t reference on the Bell-McCaffrey degrees of freedom.

Variance model. One pair's difference (first passed - second passed) is -1, 0 or +1; with q the share of
discordant pairs and D the true difference, its variance is q - D^2. Part of it is between fixtures:
tau^2, the variance over fixtures of a fixture's own true difference (the effect differs by fixture);
the rest, q - D^2 - tau^2, is within a fixture (repeats). With n_g pairs on fixture g and N in all,

    Var(d) = (q - D^2 - tau^2) / N + tau^2 * sum(n_g^2) / N^2.

More repeats shrink only the first term: with F fixtures the variance never falls below tau^2 / F, so a
difference below a floor set by tau and F cannot be reached by repeats at all (repeats_needed is None);
only more fixtures help (fixtures_needed). Power is P(|T| > t_crit) for T non-central t on the design's
Bell-McCaffrey degrees of freedom with non-centrality D / sqrt(Var(d)) (scoring/student_t.py).

Where the variance model comes from: a pilot sweep's per-fixture pair tables (estimate_variance: q as
the pooled share of discordant pairs, tau^2 by the one-way analysis-of-variance estimator), or the stated
defaults (DEFAULT_VARIANCE: q = 0.5, the most discordance two independent outcomes have at no difference,
and tau = 0.15, fixtures' own differences spread about +-30 points around the mean). Pure Python: `run`
prints the plan before it starts, and SciPy would cost it a second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from afpbench.scoring.clustered import ClusterTable, bell_mccaffrey_df
from afpbench.scoring.rates import Contract
from afpbench.scoring.student_t import two_sided_power

DEFAULT_DISCORDANCE = 0.5
DEFAULT_BETWEEN_FIXTURE_SD = 0.15
REPEATS_LIMIT = 1000  # the spec's own upper bound on repeats
FIXTURES_LIMIT = 100_000


class VarianceModel(Contract):
    discordance: float = Field(gt=0, le=1, description="share of matched pairs whose outcomes differ (q)")
    between_fixture_sd: float = Field(ge=0, le=1, description="sd over fixtures of a fixture's true difference")
    source: Literal["default", "pilot"]
    pilot_fixtures: int | None = None
    pilot_pairs: int | None = None
    note: str = ""

    def within_variance(self, difference: float) -> float:
        return max(0.0, self.discordance - difference * difference - self.between_fixture_sd ** 2)


DEFAULT_VARIANCE = VarianceModel(
    discordance=DEFAULT_DISCORDANCE, between_fixture_sd=DEFAULT_BETWEEN_FIXTURE_SD, source="default",
    note="stated conservative defaults: half the pairs discordant, fixtures' own differences spread with sd 15 points")


@dataclass(frozen=True, slots=True)
class Design:
    """Matched pairs per fixture for one model and one comparison, as (pairs, fixtures with that many)."""

    fixtures_by_pairs: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, fixtures: int, repeats: int, high_risk: int = 0, high_risk_repeats: int = 3) -> Design:
        """`fixtures` fixtures at `repeats` each, of which `high_risk` run max(repeats, high_risk_repeats)."""
        if fixtures < 1 or repeats < 1 or not 0 <= high_risk <= fixtures:
            raise ValueError(f"need fixtures >= 1, repeats >= 1, 0 <= high_risk <= fixtures; got "
                             f"{fixtures}, {repeats}, {high_risk}")
        counts = {repeats: fixtures - high_risk}
        high = max(repeats, high_risk_repeats)
        counts[high] = counts.get(high, 0) + high_risk
        return cls(tuple(sorted((n, k) for n, k in counts.items() if k)))

    @property
    def fixtures(self) -> int:
        return sum(k for _, k in self.fixtures_by_pairs)

    @property
    def pairs(self) -> int:
        return sum(n * k for n, k in self.fixtures_by_pairs)

    @property
    def degrees_of_freedom(self) -> float | None:
        return bell_mccaffrey_df(dict(self.fixtures_by_pairs)) if self.fixtures > 1 else None


def difference_variance(model: VarianceModel, design: Design, difference: float) -> float:
    total = design.pairs
    between = model.between_fixture_sd ** 2
    squares = sum(n * n * k for n, k in design.fixtures_by_pairs)
    return model.within_variance(difference) / total + between * squares / (total * total)


def _power(alpha: float, df: float, variance: float, difference: float) -> float:
    if variance <= 0:
        return 1.0 if difference else alpha
    return two_sided_power(abs(difference) / math.sqrt(variance), df, alpha)


def power(model: VarianceModel, design: Design, difference: float, alpha: float = 0.05) -> float:
    """Probability that the clustered two-sided test at `alpha` finds a true difference `difference`."""
    df = design.degrees_of_freedom
    if df is None:
        return 0.0  # one fixture: the clustered test does not exist
    return _power(alpha, df, difference_variance(model, design, difference), difference)


def min_detectable_difference(model: VarianceModel, design: Design, alpha: float = 0.05,
                              target: float = 0.8) -> float | None:
    """The smallest true difference found with probability `target`; None when no difference up to the
    largest the discordance allows (|D| <= q) reaches it (one fixture, or tau too large for F fixtures)."""
    low, high = 0.0, min(1.0, model.discordance)
    if power(model, design, high, alpha) < target:
        return None
    while high - low > 1e-5:  # a thousandth of a point  # power grows with the difference: bisect
        mid = (low + high) / 2
        low, high = (mid, high) if power(model, design, mid, alpha) < target else (low, mid)
    return high


def _first_reaching(low: int, high: int, reaches: Callable[[int], bool]) -> int | None:
    """The smallest k in [low, high] with reaches(k), for a reaches that stays true once true: doubling from
    `low` until it reaches (the answer is usually small), then bisecting."""
    step = low
    while not reaches(step):
        if step >= high:
            return None
        low, step = step + 1, min(high, step * 2)
    high = step
    while low < high:
        mid = (low + high) // 2
        if reaches(mid):
            high = mid
        else:
            low = mid + 1
    return low


def repeats_needed(model: VarianceModel, fixtures: int, difference: float, alpha: float = 0.05,
                   target: float = 0.8, high_risk: int = 0, high_risk_repeats: int = 3) -> int | None:
    """Repeats per condition (high-risk fixtures at least `high_risk_repeats`) for power `target` at a true
    `difference`; None when no number of repeats up to REPEATS_LIMIT gets there: the between-fixture
    variance alone, tau^2 / F, leaves too little power (add fixtures instead)."""
    if fixtures < 2 or difference == 0:
        return None
    limit = _power(alpha, fixtures - 1, model.between_fixture_sd ** 2 / fixtures, difference)
    if limit < target:  # even infinitely many repeats (equal sizes: t on F - 1) fall short
        return None
    return _first_reaching(1, REPEATS_LIMIT, lambda r: power(
        model, Design.of(fixtures, r, high_risk, high_risk_repeats), difference, alpha) >= target)


def fixtures_needed(model: VarianceModel, repeats: int, difference: float, alpha: float = 0.05,
                    target: float = 0.8, high_risk: int = 0, high_risk_repeats: int = 3) -> int | None:
    """Fixtures (of which `high_risk` high-risk) for power `target` at `repeats` per condition; None past
    FIXTURES_LIMIT or at no difference."""
    if difference == 0:
        return None
    return _first_reaching(max(2, high_risk), FIXTURES_LIMIT, lambda f: power(
        model, Design.of(f, repeats, high_risk, high_risk_repeats), difference, alpha) >= target)


class ComparisonPlan(Contract):
    comparison: str = Field(description='"<first> vs <second>"')
    first: str
    second: str
    min_detectable_difference: float | None = Field(
        description="smallest true difference found with the target power; None: none is")
    repeats_needed: int | None = Field(
        description="repeats per condition to find `detect`; None: not reachable by repeats")
    fixtures_needed: int | None = Field(description="fixtures to find `detect` at the planned repeats")
    detect: float
    alpha: float
    power: float
    power_at_detect: float = Field(description="power of the planned design at `detect`")
    fixtures: int
    repeats: int
    high_risk_fixtures: int
    high_risk_repeats: int
    pairs_per_model: int
    degrees_of_freedom: float | None
    variance: VarianceModel = Field(description="the assumptions used")
    reading: str


def plan_comparison(first: str, second: str, model: VarianceModel, fixtures: int, repeats: int,
                    high_risk: int = 0, high_risk_repeats: int = 3, detect: float = 0.10, alpha: float = 0.05,
                    target: float = 0.8) -> ComparisonPlan:
    """The plan of one comparison at a design of `fixtures` fixtures and `repeats` repeats per condition."""
    if not 0 < detect <= 1 or not 0 < alpha < 1 or not 0 < target < 1:
        raise ValueError(f"need 0 < detect <= 1, 0 < alpha < 1, 0 < power < 1; got {detect}, {alpha}, {target}")
    design = Design.of(fixtures, repeats, high_risk, high_risk_repeats)
    mdd = min_detectable_difference(model, design, alpha, target)
    needed = repeats_needed(model, fixtures, detect, alpha, target, high_risk, high_risk_repeats)
    more_fixtures = fixtures_needed(model, repeats, detect, alpha, target, high_risk, high_risk_repeats)
    label = f"{first} vs {second}"
    reach = (f"could detect >= {mdd * 100:.0f} points" if mdd is not None
             else "could not detect any difference (one fixture, or fixtures differ too much for this many)")
    if needed is not None:
        how = f"{detect * 100:.0f} points needs {needed} repeat{'s' * (needed != 1)} per condition"
    else:
        how = (f"{detect * 100:.0f} points is not reachable by repeats (the spread between fixtures dominates)"
               + (f"; it needs {more_fixtures} fixtures at {repeats} repeat{'s' * (repeats != 1)}"
                  if more_fixtures is not None else ""))
    return ComparisonPlan(
        comparison=label, first=first, second=second, min_detectable_difference=mdd, repeats_needed=needed,
        fixtures_needed=more_fixtures, detect=detect, alpha=alpha, power=target,
        power_at_detect=power(model, design, detect, alpha), fixtures=fixtures, repeats=repeats,
        high_risk_fixtures=high_risk, high_risk_repeats=max(repeats, high_risk_repeats) if high_risk else repeats,
        pairs_per_model=design.pairs, degrees_of_freedom=design.degrees_of_freedom, variance=model,
        reading=f"{label}: {reach} at {target:.0%} power (alpha {alpha:g}); {how}")


def estimate_variance(tables: Sequence[ClusterTable]) -> VarianceModel:
    """The variance model from a pilot sweep's per-fixture pair tables of one comparison (one table per
    model and fixture: each is a cluster). q is the pooled share of discordant pairs; tau^2 the one-way
    ANOVA estimator max(0, (MSB - MSW) / n0), n0 = (N - sum n_g^2 / N) / (G - 1). Without two fixtures,
    a fixture with two pairs, or a discordant pair, what cannot be estimated is taken from the defaults
    and the note says so."""
    used = [t for t in tables if t.pairs]
    total = sum(t.pairs for t in used)
    groups = len(used)
    discordant = sum(t.discordant for t in used)
    if not discordant:
        return DEFAULT_VARIANCE.model_copy(update={"pilot_fixtures": groups, "pilot_pairs": total,
                                                   "note": "the pilot has no discordant pair: defaults used"})
    q = discordant / total
    if groups < 2 or total == groups:
        why = "one fixture" if groups < 2 else "one pair per fixture"
        return VarianceModel(discordance=q, between_fixture_sd=DEFAULT_BETWEEN_FIXTURE_SD, source="pilot",
                             pilot_fixtures=groups, pilot_pairs=total,
                             note=f"discordance from the pilot; the spread between fixtures cannot be "
                                  f"estimated from {why}: default sd {DEFAULT_BETWEEN_FIXTURE_SD:g} used")
    mean = sum(t.difference_sum for t in used) / total
    within = sum(t.discordant - t.difference_sum ** 2 / t.pairs for t in used) / (total - groups)
    between = sum(t.pairs * (t.difference_sum / t.pairs - mean) ** 2 for t in used) / (groups - 1)
    n0 = (total - sum(t.pairs ** 2 for t in used) / total) / (groups - 1)
    tau = math.sqrt(max(0.0, (between - within) / n0))
    return VarianceModel(discordance=q, between_fixture_sd=min(1.0, tau), source="pilot",
                             pilot_fixtures=groups, pilot_pairs=total,
                         note=f"estimated from a pilot of {total} pairs on {groups} fixtures")
