"""A known-effect profile: simulated sweeps whose true pass probabilities are known, so the comparison
statistics (scoring/clustered.py, scoring/power.py) can be checked against the truth. SIMULATED data.

Per fixture f and condition c the true pass probability is

    p(f, c) = expit(mu_c + u_f + v_fc),   u_f ~ N(0, difficulty_sd^2),  v_fc ~ N(0, effect_sd^2),

u_f the fixture's difficulty, shared by every condition, and v_fc the fixture's own deviation under the
condition: the effect of an instruction set differs by fixture, which is what makes the repeats of one
fixture a cluster. mu_c is chosen so that the mean of p(f, c) over fixtures is the declared pass rate
of c: the true difference of a comparison is the difference of the declared rates. Every repeat of a
cell is an independent Bernoulli(p(f, c)) draw.

The truth the planner needs is exact here, by Gauss-Hermite quadrature: the share of discordant pairs
q = E[p1] + E[p2] - 2 E[p1 p2] and the variance over fixtures of a fixture's true difference,
tau^2 = Var(p1 - p2). Seeded (numpy's PCG64): the same seed gives the same sweep. In-process only; the
judge layer is workers/sim/known_judges.py. Nothing on the run path imports this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from afpbench.scoring.clustered import ClusterTable
from afpbench.scoring.comparison_family import ConditionPair
from afpbench.scoring.power import Design, VarianceModel

NODES = 64  # Gauss-Hermite nodes: the integrands are smooth, 64 nodes reach double precision


@dataclass(frozen=True)
class SweepDesign:
    """Fixtures and repeats of one simulated sweep (one model): the last `high_risk` fixtures are the
    high-risk ones and run max(repeats, high_risk_repeats)."""

    fixtures: int = 8
    repeats: int = 1
    high_risk: int = 3
    high_risk_repeats: int = 3

    def repeats_of(self, fixture: int) -> int:
        high = fixture >= self.fixtures - self.high_risk
        return max(self.repeats, self.high_risk_repeats) if high else self.repeats

    @property
    def planned(self) -> Design:
        return Design.of(self.fixtures, self.repeats, self.high_risk, self.high_risk_repeats)

    @property
    def label(self) -> str:
        return (f"{self.fixtures} fixtures x {self.repeats} repeat{'s' * (self.repeats != 1)} "
                f"({self.high_risk} high-risk at {max(self.repeats, self.high_risk_repeats)})")


def expit(x: np.ndarray) -> np.ndarray:
    """The logistic function 1 / (1 + e^-x)."""
    return 1 / (1 + np.exp(-x))


def _solve(f: Callable[[float], float], target: float, low: float, high: float) -> float:
    """The x in [low, high] with f(x) = target for an increasing f, by bisection to double precision."""
    for _ in range(200):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        low, high = (mid, high) if f(mid) < target else (low, mid)
    return (low + high) / 2


def _normal_nodes(sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Points and weights with sum(w f(x)) = E[f(X)] for X ~ N(0, sd^2)."""
    t, w = np.polynomial.hermite.hermgauss(NODES)
    return math.sqrt(2) * sd * t, w / math.sqrt(math.pi)


@dataclass(frozen=True)
class OutcomeProfile:
    """True pass rates per condition (means over fixtures) and the spread of fixtures, in logits."""

    pass_rates: Mapping[str, float] = field(default_factory=lambda: {"A": 0.55, "B": 0.60, "C": 0.68, "D": 0.75})
    difficulty_sd: float = 1.2
    effect_sd: float = 0.6

    def __post_init__(self) -> None:
        for condition, rate in self.pass_rates.items():
            if not 0 < rate < 1:
                raise ValueError(f"pass rate of {condition!r} must lie strictly between 0 and 1, got {rate}")
        if self.difficulty_sd < 0 or self.effect_sd < 0:
            raise ValueError("the standard deviations must be non-negative")

    @property
    def conditions(self) -> list[str]:
        return sorted(self.pass_rates)

    @cached_property
    def logit_means(self) -> dict[str, float]:
        """mu_c with E[expit(mu_c + u + v)] equal to the declared pass rate."""
        x, w = _normal_nodes(math.hypot(self.difficulty_sd, self.effect_sd))

        def mean_pass(mu: float) -> float:
            return float(w @ expit(mu + x))

        return {c: _solve(mean_pass, rate, -30, 30) for c, rate in self.pass_rates.items()}

    def true_difference(self, pair: ConditionPair) -> float:
        return self.pass_rates[pair.first] - self.pass_rates[pair.second]

    def variance_model(self, pair: ConditionPair) -> VarianceModel:
        """The exact discordance and between-fixture spread of the pair's difference (module docstring)."""
        mu = self.logit_means
        u, wu = _normal_nodes(self.difficulty_sd)
        v, wv = _normal_nodes(self.effect_sd)
        # E[p_c | u] over v, at each u node: (NODES,)
        given_u = {c: expit(mu[c] + u[:, None] + v[None, :]) @ wv for c in pair}
        squared = {c: (expit(mu[c] + u[:, None] + v[None, :]) ** 2) @ wv for c in pair}
        p1, p2 = (float(wu @ given_u[c]) for c in pair)
        both = float(wu @ (given_u[pair.first] * given_u[pair.second]))  # v1, v2 independent given u
        second_moment = float(wu @ squared[pair.first]) + float(wu @ squared[pair.second]) - 2 * both
        tau2 = second_moment - (p1 - p2) ** 2
        return VarianceModel(discordance=p1 + p2 - 2 * both, between_fixture_sd=math.sqrt(max(0.0, tau2)),
                             source="pilot", note="the known-effect profile's exact values (SIMULATED)")


@dataclass(frozen=True)
class SimulatedOutcomes:
    """One simulated sweep of one model: per (fixture, condition) the pass/fail of each repeat."""

    design: SweepDesign
    passed: Mapping[tuple[str, str], tuple[bool, ...]]
    probabilities: Mapping[tuple[str, str], float]

    def tables(self, pair: ConditionPair) -> list[ClusterTable]:
        """Per fixture, the repeats paired across the two conditions (repeat r with repeat r)."""
        out = []
        for f in range(self.design.fixtures):
            fixture = fixture_id(f)
            firsts, seconds = self.passed[(fixture, pair.first)], self.passed[(fixture, pair.second)]
            counts = {(a, b): 0 for a in (True, False) for b in (True, False)}
            for a, b in zip(firsts, seconds, strict=True):
                counts[(a, b)] += 1
            out.append(ClusterTable.of(fixture, counts))
        return out


def fixture_id(index: int) -> str:
    return f"K{index + 1:03d}@1.0.0"


def simulate_outcomes(profile: OutcomeProfile, design: SweepDesign, seed: int) -> SimulatedOutcomes:
    """One seeded sweep: fixture difficulties, fixture x condition deviations, then every repeat's outcome."""
    rng = np.random.default_rng(seed)
    conditions = profile.conditions
    mu = np.array([profile.logit_means[c] for c in conditions])
    difficulty = rng.normal(0.0, profile.difficulty_sd, size=design.fixtures)
    deviation = rng.normal(0.0, profile.effect_sd, size=(design.fixtures, len(conditions)))
    p = expit(mu[None, :] + difficulty[:, None] + deviation)
    passed: dict[tuple[str, str], tuple[bool, ...]] = {}
    probabilities: dict[tuple[str, str], float] = {}
    for f in range(design.fixtures):
        draws = rng.random(size=(design.repeats_of(f), len(conditions))) < p[f][None, :]
        for j, c in enumerate(conditions):
            passed[(fixture_id(f), c)] = tuple(bool(x) for x in draws[:, j])
            probabilities[(fixture_id(f), c)] = float(p[f, j])
    return SimulatedOutcomes(design, passed, probabilities)
