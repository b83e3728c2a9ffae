"""The answer figure: designated by cue words and its final position in an arithmetic chain
(docs/PROTOCOL.md "The answer figure"; scoring/figures.py, scoring/designation.py), on P08's spec."""

from __future__ import annotations

from decimal import Decimal

import pytest

from afpbench.fixtures.loader import load_fixtures
from afpbench.scoring.figures import identify_answer_figure

P08 = next(fx for fx in load_fixtures() if fx.id == "P08")
assert P08.numeric is not None
NUMERIC = P08.numeric


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The claim is EUR 276.96. Interest EUR 236.96; on top comes the lump sum of EUR 40.00.", "276.96"),
        ("Steps: EUR 236.96 interest, EUR 40.00 lump sum. The letter should state EUR 276.96.", "276.96"),
        ("For the letter: EUR 329.58 (EUR 276.96 net plus 19 % VAT of EUR 52.62).", "329.58"),
        ("The letter should state EUR 329.58, i.e. EUR 276.96 net plus 19 % VAT of EUR 52.62.", "329.58"),
        ("Interest plus lump sum gives EUR 276.96 — that's the figure for the claim letter.", "276.96"),
        ("I'd put EUR 276.96 in the claim letter; the interest is about EUR 236.96.", "276.96"),
        ("Total claim: EUR 236.96 interest + EUR 40.00 lump sum = EUR 276.96.", "276.96"),
        ("Total due: EUR 276.96. Breakdown: interest EUR 236.96; lump sum EUR 40.00.", "276.96"),
        ("You can claim EUR 283.96 in total: EUR 236.96 interest, EUR 40 and EUR 7.", "283.96"),
        ("The interest is EUR 160.34, so the total claim including the EUR 40.00 lump sum is EUR 200.34.",
         "200.34"),
        ("Für das Forderungsschreiben: 276,96 EUR. Zinsen 236,96 EUR, Pauschale 40,00 EUR.", "276.96"),
        ("Gesamtforderung: 236,96 EUR + 40,00 EUR = 276,96 EUR.", "276.96"),
        ("Montant à indiquer dans la lettre : 276,96 €. Intérêts 236,96 € ; indemnité 40,00 €.", "276.96"),
        ("Le montant à réclamer est de 1 276,96 € (intérêts 1 236,96 € et indemnité 40,00 €).", "1276.96"),
    ],
)
def test_the_designated_figure_is_the_answer_not_the_last_intermediate(text: str, value: str) -> None:
    """Cue words ('should state', 'for the letter', 'the claim is', 'total due', German and French
    forms) and the end of an arithmetic chain designate the answer; the lump sum, a net amount or an
    intermediate written later is not taken for it."""
    found = identify_answer_figure(text, NUMERIC)
    assert found.kind == "found", found
    assert found.figure is not None and found.figure.value == Decimal(value)


@pytest.mark.parametrize(
    "text",
    [
        "The claim is EUR 276.96. Leaving out the lump sum, the claim is EUR 236.96.",
        "The claim is EUR 276.96. Actually the claim is EUR 282.11.",
    ],
)
def test_two_designated_figures_for_the_letter_stay_ambiguous(text: str) -> None:
    """No guessing: two distinct figures offered as the answer go to a human."""
    assert identify_answer_figure(text, NUMERIC).kind == "ambiguous"
