"""What grounds an operand, and what the judge is told is untraceable (docs/PROTOCOL.md "Provenance
reaches the verdict"; scoring/explanation.py, scoring/fabrication.py). P08 answers through the real
path a sweep uses (scoring/answer_check.py: calculator records as shown, then the ladder)."""

from __future__ import annotations

from typing import Any

import pytest

from afpbench.fixtures.loader import load_fixtures
from afpbench.scoring.answer_check import check_answer

P08 = next(fx for fx in load_fixtures() if fx.id == "P08")


def ladder(text: str, *expressions: str) -> dict[str, Any]:
    provenance = check_answer(P08, text, list(expressions)).provenance
    assert provenance is not None
    return provenance


@pytest.mark.parametrize(
    ("text", "calls", "made_up"),
    [
        ("Claim EUR 281.96: interest EUR 236.96, the EUR 40 lump sum (§ 288(5) BGB) and a EUR 5 fee.",
         ("15200 * 0.1237 * 46 / 365", "236.96 + 40 + 5"), "5"),
        ("Claim EUR 281.96: interest EUR 236.96, lump sum EUR 40 (Art. 15(5)), reminder of 5 Sept: EUR 5.",
         (), "EUR 5"),
        ("Claim EUR 283.96: interest EUR 236.96, lump sum EUR 40 and a EUR 7 fee.",
         ("15200 * 0.1237 * 46 / 365", "236.96 + 40 + 7"), "7"),
    ],
)
def test_a_made_up_fee_is_not_grounded_by_a_digit_inside_a_reference_or_a_date(
    text: str, calls: tuple[str, ...], made_up: str
) -> None:
    """The verbatim rule is for restated figures, not operands, and digits inside another token (the 5 of
    '§ 288(5)', of 'Art. 15(5)', of a date) state no figure: the EUR 5 fee is made up like the EUR 7."""
    fabrication = ladder(text, *calls)["fabrication"]
    assert fabrication["criterion"] == "fabricated_fact", fabrication
    assert made_up in fabrication["made_up"]


def test_a_made_up_margin_is_found_behind_a_rate_converted_from_its_return() -> None:
    """'0.1137' is 11.37 / 100, the declared transformation of call 1's return: the made-up number is the
    8 of call 1, found by following the converted return back."""
    record = ladder("The claim amounts to EUR 257.81.", "3.37 + 8", "15200 * 0.1137 * 46 / 365", "217.81 + 40")
    assert record["fabrication"]["criterion"] == "fabricated_fact"
    assert record["fabrication"]["made_up"] == ["8"]


@pytest.mark.parametrize(
    ("text", "calls", "explained"),
    [
        ("15,200 × 12.37 × 46 / 36,500 = EUR 236.96; with the EUR 40 lump sum the claim is EUR 276.96.",
         ("15200 * 12.37 * 46 / 36500", "236.96 + 40"), ("36500", "36,500")),
        ("The claim is EUR 276.96 (the call returned 276.9617…, rounded half up).",
         ("15200 * 0.1237 * 46 / 365 + 40",), ("276.9617",)),
        ("The claim is EUR 276.96; the base rate has applied since 2024.",
         ("15200 * 0.1237 * 46 / 365 + 40",), ("2024",)),
    ],
)
def test_legitimate_figures_are_neither_listed_to_the_judge_nor_made_up(
    text: str, calls: tuple[str, ...], explained: tuple[str, ...]
) -> None:
    """A source times a declared constant (365 x 100), a shortened return of a grounded value and a year
    the evidence writes are explained: not listed as untraceable, and nothing is proposed."""
    record = ladder(text, *calls)
    assert record["fabrication"] is None or record["fabrication"]["criterion"] is None
    for figure in explained:
        assert not any(entry.startswith(f"{figure} ") for entry in record["untraceable"]), record["untraceable"]


def test_a_repeat_of_the_answer_figure_is_not_another_made_up_number() -> None:
    """An answer worked in prose that states its (made-up) total twice names only what is behind it."""
    text = "Forderungsbetrag: 257,81 EUR. 3,37 % + 8 Prozentpunkte = 11,37 %; zusammen ergibt das 257,81 EUR."
    made_up = ladder(text)["fabrication"]["made_up"]
    assert "8" in made_up and "257,81 EUR" not in made_up
