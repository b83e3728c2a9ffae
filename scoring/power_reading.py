"""What a comparison's interval says, read against what the sweep could have detected.

An interval that includes zero is no evidence of a difference; it is not evidence of none. Whether it says
anything depends on the sweep's power: a sweep whose minimum detectable difference (scoring/power.py) is
larger than the effect the user declared could not have found that effect, and is read UNDERPOWERED.
The readings, in order:

- not estimable: no interval (scoring/clustered.py edge cases);
- difference: the interval excludes zero and the Holm-adjusted p (when given) is below alpha;
- not after adjustment: the interval excludes zero, the Holm-adjusted p does not;
- underpowered: the interval includes zero and the MDD exceeds the declared effect (or no MDD exists);
- smaller than the effect: the interval includes zero, the sweep was powered, and the whole interval lies
  within plus or minus the declared effect: any difference is smaller than the effect;
- no evidence: the interval includes zero, the sweep was powered, and the interval still reaches the effect.

No reading ever says "no difference".
"""

from __future__ import annotations

from enum import StrEnum

from afpbench.scoring.rates import Contract


class Reading(StrEnum):
    NOT_ESTIMABLE = "not estimable"
    DIFFERENCE = "difference"
    NOT_AFTER_ADJUSTMENT = "not after adjustment"
    UNDERPOWERED = "underpowered"
    SMALLER_THAN_EFFECT = "smaller than the declared effect"
    NO_EVIDENCE = "no evidence of a difference"


class ComparisonReading(Contract):
    reading: Reading
    text: str
    min_detectable_difference: float | None
    declared_effect: float


def _points(x: float) -> str:
    return f"{x * 100:.0f} points"


def read_comparison(label: str, difference: float, interval: tuple[float, float] | None,
                    min_detectable_difference: float | None, declared_effect: float,
                    holm_p_value: float | None = None, alpha: float = 0.05) -> ComparisonReading:
    """The reading of one comparison (module docstring); `interval` is the fixture-clustered one."""
    if not 0 < declared_effect <= 1:
        raise ValueError(f"the declared effect must lie in (0, 1], got {declared_effect}")
    mdd = min_detectable_difference

    def out(reading: Reading, text: str) -> ComparisonReading:
        return ComparisonReading(reading=reading, text=f"{label}: {text}", min_detectable_difference=mdd,
                                 declared_effect=declared_effect)

    if interval is None:
        return out(Reading.NOT_ESTIMABLE, f"difference {difference * 100:+.1f} points; no clustered interval")
    low, high = interval
    shown = f"{difference * 100:+.1f} points (95% CI {low * 100:+.1f} to {high * 100:+.1f})"
    if low > 0 or high < 0:
        if holm_p_value is not None and holm_p_value >= alpha:
            return out(Reading.NOT_AFTER_ADJUSTMENT,
                       f"{shown}; not significant after the Holm adjustment (p = {holm_p_value:.3g})")
        return out(Reading.DIFFERENCE, f"difference {shown}")
    if mdd is None or mdd > declared_effect:
        could = f"could detect only >= {_points(mdd)}" if mdd is not None else "could not detect any difference"
        return out(Reading.UNDERPOWERED, f"{shown}; UNDERPOWERED ({could})")
    if -declared_effect < low and high < declared_effect:
        return out(Reading.SMALLER_THAN_EFFECT,
                   f"{shown}; any difference is smaller than the declared {_points(declared_effect)}")
    return out(Reading.NO_EVIDENCE, f"{shown}; no evidence of a difference (powered for >= {_points(mdd)})")
