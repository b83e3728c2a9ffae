"""Released figures and answer-figure identification (PROVENANCE.md "Operands"; AP-1 figure id)."""

from __future__ import annotations

import pytest

from afpbench.fixtures.numeric_schema import DerivationStep, NumericSpec, Quantisation, SourceField, StepInput
from afpbench.scoring.figures import extract_figures, identify_answer_figure


def spec(answer_unit: str = "USD", markers: tuple[str, ...] = ("cannot be determined",), x: str = "760"):
    chain = [
        DerivationStep(id="a", op="sum", inputs=[StepInput(source="x")]),
        DerivationStep(id="b", op="sum", inputs=[StepInput(intermediate="a")]),
        DerivationStep(id="c", op="sum", inputs=[StepInput(intermediate="b")]),
    ]
    return NumericSpec(
        source_fields=[SourceField(id="x", value=x, evidence_id="E1")],
        derivation=chain,
        quantisation=Quantisation(places=2, rounding="HALF_UP"),
        answer_unit=answer_unit,
        decline_markers=list(markers),
    )


def texts_values(text: str) -> list[tuple[str, str]]:
    return [(f.text, str(f.value)) for f in extract_figures(text)]


def test_grouped_figure_keeps_exact_decimal():
    """Rule: "1,234.50" -> Decimal("1234.50"), literal text kept, never through float."""
    [fig] = extract_figures("The total is $1,234.50.")
    assert fig.text == "$1,234.50"
    assert str(fig.value) == "1234.50"
    assert fig.currency == "$"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("USD 15,200.00 and 760 EUR", [("USD 15,200.00", "15200.00"), ("760 EUR", "760")]),
        ("a rate of 5% or 5.5 percent", [("5%", "5"), ("5.5 percent", "5.5")]),
        ("-$5, $-5 and \u22123", [("-$5", "-5"), ("$-5", "-5"), ("\u22123", "-3")]),
        ("a loss of (1,234.50)", [("(1,234.50)", "-1234.50")]),
        ("1.2 million", [("1.2 million", "1.2E+6")]),
        ("values 1, 2, 3.", [("1", "1"), ("2", "2"), ("3", "3")]),
    ],
)
def test_released_figure_forms(text, expected):
    """Rule: figures with currency, grouping, percent, sign or parentheses are all released figures."""
    assert texts_values(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Dated 2024-03-01 and 01/03/2024 at 10:30",
        "Invoice INV-2291 per E3 and FY2024, the 3rd item, v1.2.3",
        "Due March 1, 2024 or 14 March 2024 or March 2024",
        "1. First\n2) Second\n  3. Third",
        "(1) aside, Step 2: multiply, #4",
        "between 10-20",
    ],
)
def test_non_figures_are_ignored(text):
    """Documented choice: dates, ids, evidence ids, versions, ranges and list numbering are not figures."""
    assert extract_figures(text) == []


def test_parentheses_are_negative_only_around_money():
    """Documented choice: "rate (5%)" is an aside, "(1,234.50)" is a negative."""
    assert texts_values("rate (5%) and (760.00)") == [("5%", "5"), ("(760.00)", "-760.00")]


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("The interest comes to $760.00.", "$760.00"),
        ("Interest = 15,200 x 0.05 = 760.00\nTotal = 15,200 + 760 = 15,960.00", "15,960.00"),
        ("Principal $15,200 at 5%.\n\n### Final answer\n$760.00", "$760.00"),
        ("Final answer (rounded to 2 places): $760.00", "$760.00"),
        ("The interest is **$760.00**.", "$760.00"),
        ("Interest for the period: \\boxed{760.00}", "760.00"),
        ("The principal is $15,200 and the rate 5%. The interest is $760.", "$760"),
    ],
)
def test_answer_found_by_cues(text, answer):
    """Identification by position and cues ("answer", "final", "comes to", "total", "=", bold, unit)."""
    result = identify_answer_figure(text, spec())
    assert result.kind == "found"
    assert result.figure is not None and result.figure.text == answer


@pytest.mark.parametrize(
    "text",
    [
        "Total principal: $15,200. Total interest: $760.",
        "The interest is 760 and the principal 15200.",
        "The answer is $700. Actually the answer is $760.",
    ],
)
def test_equally_plausible_candidates_are_ambiguous(text):
    """Rule: no guessing; several equally plausible candidates go to a human."""
    result = identify_answer_figure(text, spec())
    assert result.kind == "ambiguous"
    assert result.figure is None
    assert len(result.candidates) >= 2


def test_decline_marker_without_candidate_is_declined():
    """Rule: a response that declines is never auto-scored as a figure."""
    result = identify_answer_figure("The rate cannot be determined; the principal is $15,200.", spec())
    assert result.kind == "declined"


def test_decline_marker_with_a_cued_figure_goes_to_a_human():
    result = identify_answer_figure("The rate cannot be determined. Final answer: $760", spec())
    assert result.kind == "ambiguous"


def test_no_figure_is_none():
    assert identify_answer_figure("I need more information.", spec()).kind == "none"
    assert identify_answer_figure("Rates were 5% and 6%.", spec("USD")).kind == "none"


def test_percent_answer_unit_prefers_percent_figures():
    result = identify_answer_figure("On $15,200 the effective rate works out to 5.25%.", spec("%"))
    assert result.kind == "found" and result.figure is not None and result.figure.text == "5.25%"


def test_identification_is_blind_to_the_expected_value():
    """Rule: identification never peeks at the reference answer (that would bias accuracy)."""
    text = "Principal $15,200, interest $760. Total due: $15,960."
    results = {x: identify_answer_figure(text, spec(x=x)) for x in ("760", "15960", "15200")}
    picked = {x: (r.kind, r.figure.text if r.figure else None) for x, r in results.items()}
    assert len(set(picked.values())) == 1
    assert picked["760"] == ("found", "$15,960")
