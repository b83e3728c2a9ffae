"""Does a judge prefer longer answers? The protocol's worry is that an instruction set may only add format
and length; C and D answers are longer, so a judge that rewards length would favour them for it.

Measured within strata of one fixture under one condition, where the task and the instruction are the
same and only the answers differ: the slope of the judge's rubric total on log2(answer length), pooled
over strata (each stratum's own mean taken out of both, the fixed-effects "within" estimator). The slope
reads "points of total per doubling of length", the same whatever the length is counted in (characters,
tokens). Its interval is cluster-robust by fixture (CR1: the sandwich times G/(G-1), t on G-1 degrees
of freedom; Cameron & Miller 2015, J. Human Resources 50:317-372), since answers to one fixture share it.
The benchmark (benchmarks/bench_statistics.py) measures its coverage against a simulated judge's known bias.

It is an association: a longer answer may also be a better one. What it rules out is the difference in
length between conditions, and between fixtures, standing in for it. Beside it, the mean answer length
per condition. Answers of length 0 have no logarithm and are counted apart.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import Field

from afpbench.scoring.rates import Contract
from afpbench.scoring.student_t import t_quantile, t_two_sided_p

METHOD = ("within fixture x condition: slope of the judge's total on log2(answer length), "
          "CR1 standard error clustered by fixture, t on fixtures - 1 degrees of freedom")


@dataclass(frozen=True, slots=True)
class JudgedAnswer:
    fixture: str
    condition: str
    length: float  # characters or tokens: the slope per doubling does not depend on which
    total: float  # the judge's rubric total


class LengthBias(Contract):
    method: str = METHOD
    slope_per_doubling: float | None = Field(description="points of total per doubling of answer length")
    standard_error: float | None
    degrees_of_freedom: int | None
    confidence: float
    interval: tuple[float, float] | None
    p_value: float | None
    answers: int
    strata: int = Field(description="fixture x condition strata with at least two answers of different lengths")
    fixtures: int
    empty_answers: int
    note: str


class MeanLength(Contract):
    condition: str
    answers: int
    mean_length: float


def length_bias(answers: Iterable[JudgedAnswer], confidence: float = 0.95) -> LengthBias:
    """The within-stratum slope of total on log2(length) with its fixture-clustered interval."""
    strata: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    empty = 0
    for a in answers:
        if a.length <= 0:
            empty += 1
        else:
            strata[(a.fixture, a.condition)].append((math.log2(a.length), a.total))
    # Demeaned within each stratum; a stratum whose lengths are all equal carries no information.
    rows: list[tuple[str, float, float]] = []
    used = 0
    for (fixture, _), points in strata.items():
        mx = sum(x for x, _ in points) / len(points)
        my = sum(y for _, y in points) / len(points)
        if any(x != mx for x, _ in points):
            used += 1
            rows.extend((fixture, x - mx, y - my) for x, y in points)
    fixtures = sorted({f for f, _, _ in rows})
    sxx = sum(x * x for _, x, _ in rows)

    def result(note: str, slope: float | None = None, se: float | None = None, df: int | None = None,
               interval: tuple[float, float] | None = None, p: float | None = None) -> LengthBias:
        return LengthBias(slope_per_doubling=slope, standard_error=se, degrees_of_freedom=df, confidence=confidence,
                          interval=interval, p_value=p, answers=sum(len(v) for v in strata.values()),
                          strata=used, fixtures=len(fixtures), empty_answers=empty, note=note)

    if not rows or sxx <= 0:
        return result("no stratum has answers of different lengths: no slope")
    slope = sum(x * y for _, x, y in rows) / sxx
    if len(fixtures) < 2:
        return result("one fixture: the slope has no fixture-clustered interval", slope=slope)
    score: dict[str, float] = defaultdict(float)
    for fixture, x, y in rows:
        score[fixture] += x * (y - slope * x)
    groups = len(fixtures)
    se = math.sqrt(groups / (groups - 1) * sum(s * s for s in score.values())) / sxx
    if se == 0:
        return result("every answer lies on the fitted line: no interval", slope=slope, se=0.0)
    df = groups - 1
    half = t_quantile(1 - (1 - confidence) / 2, df) * se
    p = t_two_sided_p(slope / se, df)
    return result(f"{used} strata on {groups} fixtures", slope=slope, se=se, df=df,
                  interval=(slope - half, slope + half), p=p)


def mean_length_by_condition(answers: Iterable[JudgedAnswer]) -> list[MeanLength]:
    """Mean answer length per condition, in condition order (empty answers count, as length 0)."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for a in answers:
        sums[a.condition][0] += 1
        sums[a.condition][1] += a.length
    return [MeanLength(condition=c, answers=int(n), mean_length=total / n) for c, (n, total) in sorted(sums.items())]
