"""How a rate and a difference between two rates are written, everywhere a result is shown.

- A rate (a pass rate, a share of cells) is a percentage: "66.7%".
- A difference between two rates (first condition minus second) is in percentage points, signed:
  "+12.5 pts", and its interval "-3.0 to +28.0 pts". Never "%", which would read as a relative change.

`places` is the number of decimals: the report, viewer and export write one, the 80-column terminal
summary none. Pure string formatting, no I/O.
"""

from __future__ import annotations

POINTS = "pts"


def percent(rate: float, places: int = 1) -> str:
    return f"{rate:.{places}%}"


def percent_interval(low: float, high: float, places: int = 1, joiner: str = " to ") -> str:
    return f"{percent(low, places)}{joiner}{percent(high, places)}"


def points(difference: float, places: int = 1) -> str:
    """A difference of two rates (fractions) in signed percentage points."""
    return f"{_signed(difference, places)} {POINTS}"


def points_size(size: float, places: int = 1) -> str:
    """A size of difference, unsigned (a minimum detectable difference): "35.0 pts"."""
    return f"{size * 100:.{places}f} {POINTS}"


def points_interval(low: float, high: float, places: int = 1, unit: bool = True) -> str:
    return f"{_signed(low, places)} to {_signed(high, places)}" + f" {POINTS}" * unit


def _signed(difference: float, places: int) -> str:
    return f"{difference * 100:+.{places}f}"
