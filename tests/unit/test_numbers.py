"""Number and unit normalisation shared by invariants, released figures and the provenance ladder
(docs/PROTOCOL.md "Numbers and units"): every form below is the same exact Decimal, never a tolerance."""

from __future__ import annotations

from decimal import Decimal

import pytest

from afpbench.scoring.numbers import figures_in, parse_number
from afpbench.scoring.quantities import matches, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1,120.00", "1120.00"), ("1.120,00", "1120.00"), ("1 120,00", "1120.00"), ("1'120.00", "1120.00"),
        ("1’120.00", "1120.00"), ("1\u202f120,00", "1120.00"), ("1.284.370,55", "1284370.55"),
        ("3,37", "3.37"), ("0,5", "0.5"), ("1,120", "1120"), ("1.120", "1.120"), ("280.-", "280"),
        ("-5", "-5"), ("ten", "10"), ("forty-six", "46"), ("one tenth", "0.1"), ("a quarter", "0.25"),
        ("three fifths", "0.6"),
    ],
)  # fmt: skip
def test_parse_number_reads_both_grouping_kinds_decimal_comma_and_small_number_words(text, value):
    """Thousands separators of both kinds, decimal comma, Swiss '.-', words and exact fractions."""
    assert parse_number(text) == Decimal(value)
    assert str(parse_number(text)) == value  # exact: the written places are kept


@pytest.mark.parametrize("text", ["abc", "1,2,3", "", "one third", "10%"])
def test_parse_number_refuses_what_is_not_one_numeral(text):
    assert parse_number(text) is None


def released(text: str) -> list[tuple[str, str, str | None, str | None, bool]]:
    return [(f.text, str(f.value), f.unit, f.currency_code, f.percent) for f in figures_in(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CHF 1.120,00", [("CHF 1.120,00", "1120.00", None, "CHF", False)]),
        ("1 120,00 CHF", [("1 120,00 CHF", "1120.00", None, "CHF", False)]),
        ("Fr. 280.00", [("Fr. 280.00", "280.00", None, "CHF", False)]),
        ("1,120 Swiss francs", [("1,120 Swiss francs", "1120", None, "CHF", False)]),
        ("89.90 euros", [("89.90 euros", "89.90", None, "EUR", False)]),
        ("€89,90", [("€89,90", "89.90", None, "EUR", False)]),
        ("EUR 186.4k", [("EUR 186.4k", "1.864E+5", None, "EUR", False)]),
        ("3,37 %", [("3,37 %", "3.37", None, None, True)]),
        ("ten per cent", [("ten per cent", "10", None, None, True)]),
    ],
)
def test_currency_marks_and_words_and_percent_are_normalised(text, expected):
    """Currency symbols, ISO codes, 'Fr.' and currency words before or after; percent kept as written."""
    assert released(text) == expected


@pytest.mark.parametrize(
    ("text", "unit"),
    [
        ("ten calendar days", "day"), ("a 10-day rule", "day"), ("the 10-calendar-day rule", "day"),
        ("10 days' notice", "day"), ("10d", "day"), ("12 months", "month"), ("12mo", "month"),
        ("forty-six days", "day"), ("nine percentage points", "percentage_point"), ("4 nights", "night"),
        ("ten working days", "business_day"), ("2 weeks", "week"),
    ],
)  # fmt: skip
def test_units_are_read_in_their_spellings_and_business_days_are_a_different_unit(text, unit):
    [figure] = figures_in(text)
    assert figure.unit == unit


@pytest.mark.parametrize(
    "text",
    ["one of the sources", "round half up", "one year's interest", "an hour", "no one", "the third item"],
)
def test_number_words_without_a_unit_or_fraction_release_nothing(text):
    """A bare 'one' or 'half' is language, not a figure; it would only add noise to the ladder."""
    assert figures_in(text) == []


@pytest.mark.parametrize(
    ("value", "text", "equal"),
    [
        ("10 %", "capped at 10% of the order value", True),
        ("10 %", "ten per cent of the order value", True),
        ("10 %", "one tenth of the order value", True),
        ("10 %", "a factor of 0.10", True),
        ("10 %", "the delay was 10 days", False),
        ("10 %", "EUR 0.10", False),
        ("280.00 CHF", "CHF 280", True),
        ("280.00 CHF", "280.00", True),
        ("280.00 CHF", "EUR 280.00", False),
        ("280.00 CHF", "280 %", False),
        ("10 days", "ten calendar days", True),
        ("10 days", "10 business days", False),
        ("10 days", "10 %", False),
        ("276.96 EUR", "EUR 276,96", True),
        ("276.96 EUR", "EUR 276.97", False),
        ("276.96 EUR", "EUR 276.961", False),
        ("100 USD", "$100", True),
        ("100 CAD", "$100", True),
        ("100 CAD", "USD 100", False),
    ],
)
def test_an_assertion_value_matches_a_released_figure_after_normalisation_never_within_a_tolerance(
    value, text, equal
):
    """Percent against fraction, currency against bare or compatible marks, units; exact equality."""
    quantity = parse_quantity(value)
    assert quantity is not None
    assert any(matches(quantity, f) for f in figures_in(text)) is equal


@pytest.mark.parametrize("value", ["EUR eighty", "10 parsecs", "CHF 10 %", "abc"])
def test_values_that_are_not_quantities_are_refused(value):
    assert parse_quantity(value) is None
