"""Simulated judges with known reliability: the ground truth for the judge reliability figures
(scoring/agreement.py, scoring/krippendorff.py, scoring/length_bias.py). SIMULATED data.

Every cell's answer has true rubric scores, each of the four dimensions drawn independently from
`true_scores` (P of 0, 1, 2), and a length: log2(length) uniform on the condition's mean +- spread (C and
D answers longer). A judge gives each dimension the true score, except with probability `disagreement`
one of the other two scores (equally likely); then its length bias: a dimension below 2 goes up by one
with probability pi(x), linear in x = log2(length), so that the judge's expected total rises by exactly
`length_bias` points per doubling of length at fixed true scores. Its verdict is the default pass rule
on its scores (no dimension at 0, total >= 6); its order-swapped re-judge (on a random `swap_share` of
cells) flips that verdict with probability `swap_flip`; each judgement is usable with probability
`usable`. A human decides a random `human_share` of cells, by the pass rule on the true scores.

The known values (`known`) are exact: Cohen's kappa and Krippendorff's alpha by enumeration over the 3^4
true and judged score vectors, integrated over length by Gauss-Legendre quadrature (the integrands are
polynomials in x of degree <= 8, which 8 nodes per condition integrate exactly).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from afpbench.reference.protocol_facts import DIMENSIONS as RUBRIC
from afpbench.scoring.length_bias import JudgedAnswer
from afpbench.scoring.rules import PassRule

DIMENSIONS = len(RUBRIC)
RULE = PassRule()  # the default pass rule; the simulated judges flag no fatal criterion
_CONFIGS = np.array(list(itertools.product(range(3), repeat=DIMENSIONS)))  # (81, 4) score vectors


def _passes(scores: np.ndarray) -> np.ndarray:
    """The pass rule on score vectors along the last axis."""
    return (scores.min(axis=-1) >= RULE.min_dimension) & (scores.sum(axis=-1) >= RULE.min_total)


_PASSES = _passes(_CONFIGS)


@dataclass(frozen=True)
class SimJudge:
    name: str
    disagreement: float  # per dimension: P(score differs from the true score)
    swap_flip: float  # P(the swapped re-judge's verdict differs from the first round's)
    length_bias: float  # points of total per doubling of answer length, at fixed true scores
    usable: float = 1.0  # P(a judgement is usable)


@dataclass(frozen=True)
class KnownValues:
    swap_consistency: dict[str, float]
    usable_rate: dict[str, float]
    length_bias: dict[str, float]
    human_agreement: dict[str, float]
    kappa: float  # pass/fail, first judge vs second
    alpha: float  # ordinal, per dimension (every dimension alike)
    mean_length: dict[str, float]


@dataclass(frozen=True)
class JudgeProfile:
    judges: tuple[SimJudge, ...] = (SimJudge("judge-1 (simulated)", 0.15, 0.10, 0.5, 0.95),
                                    SimJudge("judge-2 (simulated)", 0.25, 0.20, 0.0, 0.90))
    true_scores: tuple[float, float, float] = (0.15, 0.35, 0.50)
    log2_length: Mapping[str, float] = field(default_factory=lambda: {"A": 9.0, "B": 9.3, "C": 10.0, "D": 10.4})
    length_spread: float = 1.0
    swap_share: float = 0.3
    human_share: float = 0.1

    def __post_init__(self) -> None:
        if len(self.judges) != 2:
            raise ValueError("the profile's known kappa and alpha are for two judges")
        for judge in self.judges:
            low, high = self._bump(judge)
            if not (0 <= low <= 1 and 0 <= high <= 1):
                raise ValueError(f"{judge.name}: length_bias {judge.length_bias} needs a bump probability "
                                 f"outside [0, 1] over these lengths")

    @property
    def _range(self) -> tuple[float, float]:
        means = self.log2_length.values()
        return min(means) - self.length_spread, max(means) + self.length_spread

    def _bump(self, judge: SimJudge) -> tuple[float, float]:
        """The bump probability at the shortest and the longest length."""
        e, p2 = judge.disagreement, self.true_scores[2]
        below_two = 1 - (p2 * (1 - e) + (1 - p2) * e / 2)  # P(judged score < 2) before the bump
        slope = judge.length_bias / (DIMENSIONS * below_two)  # per unit of log2 length
        low, high = self._range
        span = (high - low) * slope
        return (0.0, span) if slope >= 0 else (-span, 0.0)

    def bump(self, judge: SimJudge, x: np.ndarray) -> np.ndarray:
        at_low, at_high = self._bump(judge)
        low, high = self._range
        return at_low + (at_high - at_low) * (x - low) / (high - low)

    def kernel(self, judge: SimJudge, pi: float) -> np.ndarray:
        """P(judged score | true score) for one dimension at bump probability pi: (3, 3)."""
        e = judge.disagreement
        noise = np.full((3, 3), e / 2) + np.eye(3) * (1 - 3 * e / 2)
        bump = np.array([[1 - pi, pi, 0.0], [0.0, 1 - pi, pi], [0.0, 0.0, 1.0]])
        return noise @ bump

    def known(self) -> KnownValues:
        """The values the reliability figures should recover (module docstring)."""
        first, second = self.judges
        t, w = np.polynomial.legendre.leggauss(8)
        prior = np.prod(np.array(self.true_scores)[_CONFIGS], axis=1)  # (81,) P(true vector)
        joint = np.zeros((3, 3))  # one dimension: P(first judge's score, second judge's)
        both = p1 = p2 = agree1 = agree2 = 0.0
        weight = 1 / (len(self.log2_length) * 2)  # each condition equally often; leggauss weights sum to 2
        for mean in self.log2_length.values():
            for node, wn in zip(mean + self.length_spread * t, w, strict=True):
                k1, k2 = (self.kernel(j, float(self.bump(j, np.array(node)))) for j in self.judges)
                joint += weight * wn * (k1.T * np.array(self.true_scores)) @ k2
                v1, v2 = (_pass_given_truth(k) for k in (k1, k2))
                both += weight * wn * float(prior @ (v1 * v2))
                p1 += weight * wn * float(prior @ v1)
                p2 += weight * wn * float(prior @ v2)
                agree1 += weight * wn * float(prior @ np.where(_PASSES, v1, 1 - v1))
                agree2 += weight * wn * float(prior @ np.where(_PASSES, v2, 1 - v2))
        observed = 1 - p1 - p2 + 2 * both
        chance = p1 * p2 + (1 - p1) * (1 - p2)
        w_ = self.length_spread
        return KnownValues(
            swap_consistency={j.name: 1 - j.swap_flip for j in self.judges},
            usable_rate={j.name: j.usable for j in self.judges},
            length_bias={j.name: j.length_bias for j in self.judges},
            human_agreement={first.name: float(agree1), second.name: float(agree2)},
            kappa=float((observed - chance) / (1 - chance)),
            alpha=_ordinal_alpha(joint),
            mean_length={c: 2 ** m * (2 ** w_ - 2 ** -w_) / (2 * w_ * math.log(2))
                         for c, m in self.log2_length.items()},
        )


def _pass_given_truth(kernel: np.ndarray) -> np.ndarray:
    """P(judge passes | true score vector), (81,): sum over judged vectors of prod_d kernel[t_d, o_d]."""
    per = kernel[_CONFIGS[:, None, :], _CONFIGS[None, :, :]]  # (81 true, 81 judged, 4)
    return np.prod(per, axis=2) @ _PASSES.astype(float)


def _ordinal_alpha(joint: np.ndarray) -> float:
    """Population Krippendorff alpha (ordinal) of two raters from their joint distribution."""
    sym = (joint + joint.T) / 2
    m = sym.sum(axis=1)
    cum = np.cumsum(m)
    delta = np.zeros((3, 3))
    for c, k in itertools.product(range(3), repeat=2):
        lo, hi = min(c, k), max(c, k)
        delta[c, k] = (cum[hi] - (cum[lo - 1] if lo else 0.0) - (m[c] + m[k]) / 2) ** 2
    return float(1 - (sym * delta).sum() / (np.outer(m, m) * delta).sum())


@dataclass(frozen=True)
class JudgedCell:
    fixture: str
    condition: str
    repeat: int
    length: float
    scores: tuple[tuple[int, ...] | None, ...]  # per judge; None: not a usable judgement
    verdicts: tuple[bool | None, ...]
    swapped: tuple[bool | None, ...]  # per judge, the swapped re-judge's verdict; None: not re-judged
    human: bool | None  # a human decision (the truth), on a sample of cells


def simulate_judging(profile: JudgeProfile, cells: list[tuple[str, str, int]], seed: int) -> list[JudgedCell]:
    """Both judges on every cell (fixture, condition, repeat), seeded."""
    rng = np.random.default_rng(seed)
    n = len(cells)
    truth = rng.choice(3, size=(n, DIMENSIONS), p=profile.true_scores)
    spread = rng.uniform(-profile.length_spread, profile.length_spread, size=n)
    x = np.array([profile.log2_length[c] for _, c, _ in cells]) + spread
    swap = rng.random(n) < profile.swap_share
    human = rng.random(n) < profile.human_share
    true_pass = _passes(truth)
    per_judge = []
    for judge in profile.judges:
        other = (truth + rng.integers(1, 3, size=truth.shape)) % 3  # one of the two other scores, equally likely
        judged = np.where(rng.random(truth.shape) < judge.disagreement, other, truth)
        bumped = rng.random(truth.shape) < profile.bump(judge, x)[:, None]
        judged = np.where((judged < 2) & bumped, judged + 1, judged)
        verdict = _passes(judged)
        usable = rng.random(n) < judge.usable
        flipped = verdict ^ (rng.random(n) < judge.swap_flip)
        per_judge.append((judged, verdict, usable, flipped))
    out = []
    for i, (fixture, condition, repeat) in enumerate(cells):
        out.append(JudgedCell(
            fixture=fixture, condition=condition, repeat=repeat, length=float(2 ** x[i]),
            scores=tuple(tuple(int(s) for s in j[i]) if ok[i] else None for j, _, ok, _ in per_judge),
            verdicts=tuple(bool(v[i]) if ok[i] else None for _, v, ok, _ in per_judge),
            swapped=tuple(bool(f[i]) if ok[i] and swap[i] else None for _, _, ok, f in per_judge),
            human=bool(true_pass[i]) if human[i] else None))
    return out


def judged_answers(cells: list[JudgedCell], judge: int) -> list[JudgedAnswer]:
    """One judge's usable judgements as the length-bias inputs."""
    return [JudgedAnswer(c.fixture, c.condition, c.length, float(sum(s)))
            for c in cells if (s := c.scores[judge]) is not None]
