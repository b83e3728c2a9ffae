"""The comparison's reading against its power (issue 37): UNDERPOWERED, never "no difference"."""

from __future__ import annotations

import pytest

from afpbench.scoring.power_reading import Reading, read_comparison


@pytest.mark.parametrize(("interval", "mdd", "holm_p", "reading", "text"), [
    (None, 0.2, None, Reading.NOT_ESTIMABLE, "no clustered interval"),
    ((0.02, 0.30), 0.2, None, Reading.DIFFERENCE, "difference +16.0 points"),
    ((-0.40, -0.01), 0.2, 0.01, Reading.DIFFERENCE, "difference"),
    ((0.02, 0.30), 0.2, 0.09, Reading.NOT_AFTER_ADJUSTMENT, "Holm adjustment (p = 0.09)"),
    ((-0.32, 0.32), 0.35, None, Reading.UNDERPOWERED, "UNDERPOWERED (could detect only >= 35 points)"),
    ((-0.32, 0.32), None, None, Reading.UNDERPOWERED, "UNDERPOWERED (could not detect any difference)"),
    ((-0.05, 0.08), 0.08, None, Reading.SMALLER_THAN_EFFECT, "smaller than the declared 10 points"),
    ((-0.05, 0.15), 0.08, None, Reading.NO_EVIDENCE, "no evidence of a difference (powered for >= 8 points)"),
])
def test_the_readings(interval, mdd, holm_p, reading, text):
    result = read_comparison("D vs C", 0.16 if interval is None or interval[0] > 0 else 0.0, interval, mdd, 0.10,
                             holm_p_value=holm_p)
    assert result.reading == reading
    assert text in result.text and result.text.startswith("D vs C: ")


def test_no_reading_ever_says_no_difference():
    """Rule: a comparison whose interval includes zero is never read "no difference"."""
    for interval in ((-0.3, 0.3), (-0.01, 0.01), (0.0, 0.0)):
        for mdd in (None, 0.05, 0.5):
            text = read_comparison("D vs A", 0.0, interval, mdd, 0.1).text.lower()
            assert "no difference" not in text


def test_the_declared_effect_must_be_a_share():
    with pytest.raises(ValueError, match="declared effect"):
        read_comparison("D vs A", 0.0, (-0.1, 0.1), 0.2, 10)
