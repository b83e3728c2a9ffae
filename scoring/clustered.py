"""The fixture-clustered interval and test for a paired difference in pass rates.

A comparison pairs one model's cells on the same fixture and repeat under two conditions. The repeats of
one fixture share that fixture, so they are not independent draws: with few fixtures much of the
variance of the difference can lie between fixtures, and an interval that pools the pairs as if independent (the
exact paired interval beside this one) is too narrow for a claim about fixtures in general. Here the
fixture is the cluster (Miller 2024, "Adding Error Bars to Evals", arXiv 2411.00640).

Method: the pooled difference d = mean over pairs of (first passed - second passed), the same figure the
exact interval reports, with the CR2 cluster-robust variance (Bell & McCaffrey 2002; Pustejovsky &
Tipton 2018) and a t reference on the Bell-McCaffrey degrees of freedom, which equal G - 1 for G fixtures
of equal size and fall below it as the sizes differ (high-risk fixtures run more repeats). For a mean
both have a closed form, below. docs/PROTOCOL.md "Comparisons" says why this method and gives the
coverage measured by simulation (benchmarks/bench_statistics.py).

Edge cases, reported with a status and no interval: one fixture (no variance between fixtures can be
estimated), no discordant pair (every difference is zero: the clustered variance is zero and an interval
of width zero would be no finding), and no spread (every fixture shows exactly the pooled difference, so
the variance estimate is zero again). The exact paired interval and McNemar p stay beside it in each case.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from afpbench.scoring.rates import Contract, PairTable
from afpbench.scoring.student_t import t_quantile, t_two_sided_p

METHOD = ("pooled paired difference with the CR2 fixture-clustered standard error and a t reference on "
          "the Bell-McCaffrey degrees of freedom")
Status = Literal["ok", "one fixture", "no discordant pair", "no spread between fixtures"]


@dataclass(frozen=True, slots=True)
class ClusterTable:
    """One fixture's matched pairs under two conditions (first passed, second passed)."""

    fixture: str
    both_pass: int
    first_only: int  # first passed, second failed (b)
    second_only: int  # first failed, second passed (c)
    both_fail: int

    def __post_init__(self) -> None:
        if min(self.both_pass, self.first_only, self.second_only, self.both_fail) < 0:
            raise ValueError(f"fixture {self.fixture!r}: pair counts must be non-negative")

    @classmethod
    def of(cls, fixture: str, table: PairTable) -> ClusterTable:
        return cls(fixture, table.get((True, True), 0), table.get((True, False), 0),
                   table.get((False, True), 0), table.get((False, False), 0))

    @property
    def pairs(self) -> int:
        return self.both_pass + self.first_only + self.second_only + self.both_fail

    @property
    def difference_sum(self) -> int:
        """Sum over the fixture's pairs of (first passed - second passed)."""
        return self.first_only - self.second_only

    @property
    def discordant(self) -> int:
        return self.first_only + self.second_only


class ClusteredDifference(Contract):
    status: Status
    method: str = METHOD
    fixtures: int = Field(description="clusters with at least one matched pair")
    pairs: int
    difference: float = Field(description="pass rate of first minus second over the pooled pairs")
    standard_error: float | None = Field(description="CR2 fixture-clustered standard error")
    degrees_of_freedom: float | None = Field(description="Bell-McCaffrey degrees of freedom of the t reference")
    confidence: float
    interval: tuple[float, float] | None = Field(description="difference +- t quantile x standard error, in [-1, 1]")
    p_value: float | None = Field(description="two-sided t test of no difference; None with no interval")
    note: str


def bell_mccaffrey_df(sizes: Sequence[int] | Mapping[int, int]) -> float:
    """Degrees of freedom of the CR2 variance of a mean over clusters of these sizes (a list, or a mapping of
    size to how many clusters have it), under the working model of independent pairs with equal variance
    (Bell & McCaffrey 2002, eq. 6; Imbens & Kolesar 2016).

    With M = (I-H) sum_g a_g a_g' (I-H) seen through its G x G Gram matrix, M_gh = [g = h] n_g k_g^2 -
    n_g k_g n_h k_h / N with k_g = (1 - n_g/N)^(-1/2); df = tr(M)^2 / tr(M^2). Equal sizes give G - 1."""
    counts = dict(sizes) if isinstance(sizes, Mapping) else dict(Counter(sizes))
    if sum(counts.values()) < 2 or min(counts) < 1:
        raise ValueError(f"need at least two clusters of at least one pair, got sizes {counts}")
    total = sum(n * k for n, k in counts.items())
    a = {n: n / (1 - n / total) for n in counts}  # n_g k_g^2
    b2 = {n: n * n / (1 - n / total) for n in counts}  # (n_g k_g)^2
    sum_b2 = sum(b2[n] * k for n, k in counts.items())
    trace = sum(a[n] * k for n, k in counts.items()) - sum_b2 / total
    cross = sum(a[n] * b2[n] * k for n, k in counts.items())
    trace_sq = sum(a[n] ** 2 * k for n, k in counts.items()) - 2 * cross / total + (sum_b2 / total) ** 2
    return trace * trace / trace_sq


def cr2_variance(tables: Sequence[ClusterTable]) -> float:
    """CR2 variance of the pooled difference: sum_g S_g^2 / (1 - n_g/N) / N^2, S_g the fixture's sum of
    residuals. For a mean, CR2's adjustment (I - H_gg)^(-1/2) scales S_g by (1 - n_g/N)^(-1/2); equal
    sizes give CR1's G/(G-1) times the plain sandwich."""
    total = sum(t.pairs for t in tables)
    weights = [t.pairs / total for t in tables]
    mean = sum(t.difference_sum for t in tables) / total
    return sum((t.difference_sum - t.pairs * mean) ** 2 / (1 - w) for t, w in zip(tables, weights, strict=True)) / (
        total * total)


def _no_spread(tables: Sequence[ClusterTable]) -> bool:
    """Every fixture's mean difference equals the pooled one, in exact integers: N s_g == n_g D."""
    total = sum(t.pairs for t in tables)
    whole = sum(t.difference_sum for t in tables)
    return all(total * t.difference_sum == t.pairs * whole for t in tables)


def clustered_difference(tables: Iterable[ClusterTable], confidence: float = 0.95) -> ClusteredDifference:
    """The fixture-clustered interval and two-sided t test for first minus second (module docstring)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")
    used = [t for t in tables if t.pairs]
    if not used:
        raise ValueError("no matched pairs")
    pairs = sum(t.pairs for t in used)
    difference = sum(t.difference_sum for t in used) / pairs

    def result(status: Status, note: str, se: float | None = 0.0, df: float | None = None,
               interval: tuple[float, float] | None = None, p: float | None = None) -> ClusteredDifference:
        return ClusteredDifference(status=status, fixtures=len(used), pairs=pairs, difference=difference,
                                   standard_error=se, degrees_of_freedom=df, confidence=confidence,
                                   interval=interval, p_value=p, note=note)

    if len(used) == 1:
        return result("one fixture", "one fixture: the spread between fixtures cannot be estimated; the exact "
                                     "interval speaks for this fixture's repeats only", se=None)
    if not any(t.discordant for t in used):
        return result("no discordant pair", "no discordant pair: every paired difference is zero, so the "
                                            "clustered variance is zero; read the exact interval")
    if _no_spread(used):
        return result("no spread between fixtures", "every fixture shows the pooled difference exactly, so the "
                                                    "clustered variance is zero; read the exact interval")
    se = math.sqrt(cr2_variance(used))
    df = bell_mccaffrey_df([t.pairs for t in used])
    half = t_quantile(1 - (1 - confidence) / 2, df) * se
    p = min(1.0, t_two_sided_p(difference / se, df))
    return result("ok", f"clustered by fixture: {len(used)} fixtures, t on {df:.1f} degrees of freedom", se=se,
                  df=df, interval=(max(-1.0, difference - half), min(1.0, difference + half)), p=p)
