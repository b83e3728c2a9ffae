"""What an answer states for a named quantity (docs/PROTOCOL.md "Numbers and units", `subject`;
scoring/subject.py): P01's cap invariant misses a misstated cap amount, never a worked example."""

from __future__ import annotations

import pytest

from afpbench.fixtures.loader import load_fixtures
from afpbench.scoring.assertions import check_assertion

P01 = next(fx for fx in load_fixtures() if fx.id == "P01")
CAP = next(a for a in P01.assertions if a.id == "cap_reported")
EVIDENCE = [e.text for e in P01.evidence]


@pytest.mark.parametrize(
    "text",
    [
        "The cap is 10% of the order value, i.e. EUR 840.00.",
        "**Cap:** 10 % of order value → EUR 8,000.00.",
        "Liquidated damages can't exceed 10 per cent of the order value (EUR 84,000.00), that is EUR 4.200,00.",
        "Capped at 10 % of the order value; the maximum is EUR 8,000.",
    ],
)
def test_a_misstated_cap_amount_misses_the_invariant_although_10_percent_is_stated(text: str) -> None:
    """P01: the cap is 10 % = EUR 8,400.00; an answer that says '10%' but states another amount for the
    cap fails the invariant (it caps task_correctness), as an answer without the cap does."""
    result = check_assertion(CAP, text, EVIDENCE)
    assert result.fired and "for the subject" in result.detail, result.detail


@pytest.mark.parametrize(
    "text",
    [
        "Clause 14.3 limits damages to 10% of the order value, which for PO-4471 (EUR 84,000.00) is EUR 8,400.00.",
        "Cap = 84,000.00 × 0.10 = 8,400.00 (clause 14.3).",
        "The cap is 10%; at Priya's 0.5% a day, 6 days would come to EUR 2,520.00.",
        "Capped at 10% of the order value, so the EUR 2,520.00 from 0.5% a day would fit under it.",
        "Even at 0.5% per day the claim stays under the cap of EUR 8,400.00 (10% of EUR 84,000.00).",
        "Die Obergrenze: höchstens 10 % des Auftragswerts, also 8.400,00 EUR.",
    ],
)
def test_the_order_value_a_fraction_and_worked_examples_are_not_the_caps_amount(text: str) -> None:
    """The evidence's order value is the operand, '0.10' is the 10 % as a fraction, and a hypothetical
    ('would', 'so', 'even at') after the cap is not stated for it."""
    result = check_assertion(CAP, text, EVIDENCE)
    assert not result.fired, result.detail
