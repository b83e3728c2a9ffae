"""Krippendorff's alpha: how far judges agree on the rubric's 0-2 dimension scores, with a bootstrap interval.

alpha = 1 - D_o / D_e, observed over expected disagreement, from the coincidence matrix of the values
judges gave the same unit (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability"). A unit is
one cell's score on one dimension; each judge that gave a usable judgement gives it one value; a unit
with fewer than two values is not pairable and drops out. Any number of judges, missing values allowed.

Metric: ordinal by default. The scores 0, 1, 2 are ordered anchors ("absent", "partial", "full"), not
measured quantities with equal steps, which the interval metric would assume; the ordinal metric takes
the distance between two scores from how many values lie between them. metric="interval" is there for
comparison. The same values as the `krippendorff` package (checked in tests/unit/scoring/test_krippendorff.py).

Interval: percentile bootstrap over units (resampled with replacement, `resamples` times, from a fixed
seed, so a report reads the same every time it is computed). A unit's contribution to the coincidence
matrix depends only on its multiset of values, so a resample is a multinomial draw of how many units of
each kind it holds: the cost does not grow with the number of units.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from afpbench.scoring.rates import Contract

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

Metric = Literal["ordinal", "interval"]
LEVELS = (0, 1, 2)
RESAMPLES = 2000
SEED = 20240637


class Alpha(Contract):
    alpha: float | None = Field(description="None when there is no pairable unit or no variation at all")
    interval: tuple[float, float] | None = Field(description="percentile bootstrap over units")
    confidence: float
    metric: Metric
    units: int = Field(description="pairable units (at least two values)")
    values: int = Field(description="pairable values")
    resamples: int


def _kinds(units: Iterable[Sequence[int | None]], levels: Sequence[int]) -> Counter[tuple[int, ...]]:
    """Pairable units by their multiset of values, as counts per level."""
    index = {v: i for i, v in enumerate(levels)}
    kinds: Counter[tuple[int, ...]] = Counter()
    for unit in units:
        counts = [0] * len(levels)
        for value in unit:
            if value is None:
                continue
            if value not in index:
                raise ValueError(f"value {value!r} is not one of the levels {list(levels)}")
            counts[index[value]] += 1
        if sum(counts) >= 2:
            kinds[tuple(counts)] += 1
    return kinds


def _contribution(counts: tuple[int, ...]) -> NDArray[np.float64]:
    """The unit's coincidences o_ck: ordered pairs of values from different judges, over m_u - 1."""
    import numpy as np

    c = np.array(counts, dtype=np.float64)
    pairs: NDArray[np.float64] = (np.outer(c, c) - np.diag(c)) / (c.sum() - 1)
    return pairs


def _alphas(coincidences: NDArray[np.float64], metric: Metric, levels: Sequence[int]) -> NDArray[np.float64]:
    """alpha for each coincidence matrix in a stack (..., L, L); NaN where expected disagreement is 0."""
    import numpy as np

    n_c = coincidences.sum(axis=-1)  # (..., L)
    n = n_c.sum(axis=-1)
    if metric == "interval":
        values = np.array(levels, dtype=float)
        delta = np.broadcast_to((values[:, None] - values[None, :]) ** 2, coincidences.shape)
    else:
        # ordinal: (sum of n_g for g from c to k, minus (n_c + n_k) / 2)^2
        cum = np.cumsum(n_c, axis=-1)
        before = cum - n_c
        low = np.minimum.outer(np.arange(len(levels)), np.arange(len(levels)))
        high = np.maximum.outer(np.arange(len(levels)), np.arange(len(levels)))
        between = cum[..., high] - before[..., low]
        delta = (between - (n_c[..., :, None] + n_c[..., None, :]) / 2) ** 2
    observed = (coincidences * delta).sum(axis=(-2, -1))
    expected = (n_c[..., :, None] * n_c[..., None, :] * delta).sum(axis=(-2, -1)) / (n - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(expected > 0, 1 - observed / expected, np.nan)


def krippendorff_alpha(units: Iterable[Sequence[int | None]], metric: Metric = "ordinal",
                       levels: Sequence[int] = LEVELS, confidence: float = 0.95, resamples: int = RESAMPLES,
                       seed: int = SEED) -> Alpha:
    """Alpha over units, each the values the judges gave it (None: that judge gave no usable judgement)."""
    import numpy as np

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")
    kinds = _kinds(units, levels)
    count = sum(kinds.values())
    pairable = sum(sum(k) * n for k, n in kinds.items())

    def result(alpha: float | None, interval: tuple[float, float] | None = None) -> Alpha:
        return Alpha(alpha=alpha, interval=interval, confidence=confidence, metric=metric, units=count,
                     values=pairable, resamples=resamples)

    if not kinds:
        return result(None)
    patterns = list(kinds)
    each = np.stack([_contribution(k) for k in patterns])  # (P, L, L)
    weights = np.array([kinds[k] for k in patterns], dtype=float)
    alpha = float(_alphas(np.tensordot(weights, each, axes=1), metric, levels))
    if np.isnan(alpha):
        return result(None)
    draws = np.random.default_rng(seed).multinomial(count, weights / count, size=resamples)  # (B, P)
    boot = _alphas(np.tensordot(draws.astype(float), each, axes=1), metric, levels)
    boot = boot[~np.isnan(boot)]
    tail = (1 - confidence) / 2 * 100
    interval = (float(np.percentile(boot, tail)), float(np.percentile(boot, 100 - tail))) if boot.size else None
    return result(alpha, interval)
