"""Number and unit normalisation shared by invariants, released figures and the provenance ladder
(docs/PROTOCOL.md "Numbers and units"): every form below is the same exact Decimal, never a tolerance."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from afpbench.scoring import numbers
from afpbench.scoring.numbers import figures_in
from afpbench.scoring.numerals import parse_number
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
        ("276,96 €", [("276,96 €", "276.96", None, "EUR", False)]),
        ("1 234,56 €", [("1 234,56 €", "1234.56", None, "EUR", False)]),
        ("15.200,00 €", [("15.200,00 €", "15200.00", None, "EUR", False)]),
        ("EUR 1.234,56", [("EUR 1.234,56", "1234.56", None, "EUR", False)]),
        ("15 per cent", [("15 per cent", "15", None, None, True)]),
        ("15 %", [("15 %", "15", None, None, True)]),
        ("12,37 Prozent", [("12,37 Prozent", "12.37", None, None, True)]),
        ("3,37 pour cent", [("3,37 pour cent", "3.37", None, None, True)]),
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
    ("text", "released"),
    [
        ("Under § 288(5) BGB and § 5 UStG", []),
        ("Art. 15(5) GDPR, Abs. 2, para. 3", []),
        ("clause 14.3 and section 6.3 apply; see Schedule 4", []),
        ("policy 3.2 excludes EUR 4.90", ["EUR 4.90"]),
        ("§ 288 Abs. 5 BGB: EUR 40,00", ["EUR 40,00"]),
    ],
)
def test_references_to_parts_of_a_text_are_not_figures(text, released):
    """A section, article, clause or paragraph number is a reference, not a quantity: it is never a
    released figure, so it cannot ground or be taken for an operand (issue 39)."""
    assert [f.text for f in figures_in(text)] == released


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


# --- the scan's fast paths equal the plain computation (docs/PROTOCOL.md "Numbers and units") -----------

# Written the way people and documents write them, not the way the scanner's rules are written.
VARIED = [
    "1.200,50 €", "EUR 1,200", "12 %", "(300)", "three hundred", "1e3", "\u22125 EUR", "-\u20ac5", "+3",
    "(1,250.00)", "Fr. 12.50", "SFr. 7", "CHF 280.-", "USD 1 200,00", "$3.5bn", "EUR 186.4k", "12mo", "9pp",
    "10d", "2 hrs", "\u00a340", "\u00a51,000", "\u20b9 50", "1\u00a0200,00 EUR", "12\u202f000", "5 pct",
    "7 percentage points", "ten per cent", "one tenth", "a quarter", "twenty-five percent", "forty-two dollars",
    "30 euros", "12 swiss francs", "3 business days", "6 full days", "4 weeks", "Step 2", "1.", "(2)", "no. 5",
    "#12", "INV-2291", "PO-4471", "v1.2.3", "10-20", "2025-02-17", "March 3, 2025", "3rd Sept 2024",
    "15 March 2024", "Jun 2025", "Jan 5, 2025", "12 January 2024", "Feb 2023", "Apr. 1", "Aug 31",
    "Oct 2024", "Nov 11th", "Dec 24", "July 4", "1.284.370", "3,37", "0.5%", "10,0 %", ".75", "\u0661\u0662\u0663 EUR",
    "\u0130", "\u017fix days", "\u212a", "Mayday 12", "Dec.", "SEP 3", "\n", "  ", ".", "-", "EUR", "per cent",
    "276,96 \u20ac", "1 234,56 \u20ac", "12 Prozent", "3 pour cent", "\u00a7 5", "Art. 15(5)", "clause 14.3",
]


def _varied_texts(count: int = 400, seed: int = 20250311) -> list[str]:
    """The forms above alone, and joined into sentences by prose, newlines and glue, cut at random."""
    rng = random.Random(seed)
    glue = [" ", "\n", "", "-", "/", ". ", ", ", " of ", " the cap is ", " due ", "\n1. ", " (", ") "]
    texts = list(VARIED)
    for _ in range(count):
        text = "".join(rng.choice(VARIED) + rng.choice(glue) for _ in range(rng.randint(1, 8)))
        cut = rng.randrange(len(text))
        texts += [text, text[cut:], text[:cut]]
    return texts


def test_figure_scan_fast_paths_equal_the_plain_regex_scans():
    """Starting the figure regex near the next digit, and skipping the month-date scan without a month
    name, find exactly the matches of the plain scans over the whole text."""
    for text in _varied_texts():
        assert [m.span() for m in numbers._figure_matches(text)] == [
            m.span() for m in numbers._FIGURE.finditer(text)
        ], text
        assert numbers._month_dates(text) == [d.span() for d in numbers._MONTH_DATES.finditer(text)], text


def test_figures_in_equals_its_plain_composition():
    """The digit pre-test (a text without a digit has word figures only) changes nothing."""
    for text in _varied_texts():
        dates = [d.span() for d in numbers._MONTH_DATES.finditer(text)]
        digits = numbers._digit_figures(text, dates)
        plain = sorted(digits + numbers._word_figures(text, dates + [(f.start, f.end) for f in digits]),
                       key=lambda f: f.start)
        assert figures_in(text) == plain, text


def test_cached_quantities_equal_the_plain_reading():
    for text in [*_varied_texts(), *VARIED_VALUES]:
        assert parse_quantity(text) == parse_quantity.__wrapped__(text), text


VARIED_VALUES = ["10 %", "8400.00 EUR", "EUR 1200", "1.200,50 EUR", "$ 40", "\u20ac 12", "10 weeks", "12 widgets",
                 "7 percentage points", "280.00 CHF", "10 per cent", "-5", "\u22125 EUR", "1'200.00", "6 full days"]
