"""One way to write a rate and a difference of rates (scoring/units.py): rates in %, differences in signed
percentage points, one decimal in full and none at 80 columns; the same rounding as Python's % format."""

from __future__ import annotations

import pytest

from afpbench.scoring.units import percent, percent_interval, points, points_interval


def test_a_rate_is_a_percentage_rounded_as_python_rounds_it():
    assert (percent(2 / 3), percent(2 / 3, 0), percent(0.0), percent(1.0)) == ("66.7%", "67%", "0.0%", "100.0%")
    assert percent_interval(0.084, 0.581) == "8.4% to 58.1%"
    assert percent_interval(0.084, 0.581, 0, "-") == "8%-58%"


@pytest.mark.parametrize("difference", [0.125, -0.0714, 2 / 7, -1.0, 0.0])
def test_a_difference_is_in_signed_percentage_points_never_percent(difference):
    """The digits are those of the % format the report used before; only the unit differs."""
    assert points(difference) == f"{difference:+.1%}"[:-1] + " pts"
    assert points(difference, 0) == f"{difference:+.0%}"[:-1] + " pts"


def test_an_interval_of_a_difference_carries_the_unit_once():
    assert points_interval(-0.064, 0.556) == "-6.4 to +55.6 pts"
    assert points_interval(-0.064, 0.556, 0) == "-6 to +56 pts"
