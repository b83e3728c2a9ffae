"""The provenance ladder (PROVENANCE.md "The ladder"): first match wins, exact Decimal equality only."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from afpbench.fixtures.schema import (
    Constant,
    DerivationStep,
    NumericSpec,
    Quantisation,
    SourceField,
    StepInput,
    Transformation,
)
from afpbench.scoring.evidence_class import EvidenceClass
from afpbench.scoring.provenance import CalculatorCall, trace_provenance

MONTHLY = "63.333333333333333333333333333333333333333333333333"


def loan_spec(rounding: str = "HALF_UP", tolerance: str = "0.01") -> NumericSpec:
    """Principal 15200.00 at 5% a year for 6 months: interest 380.00 (annual 760, monthly 63.33...)."""
    return NumericSpec(
        source_fields=[
            SourceField(id="principal", value="15200.00", unit="USD", evidence_id="E1"),
            SourceField(id="rate", value="5", unit="%", evidence_id="E1"),
            SourceField(id="months", value="6", evidence_id="E2"),
        ],
        constants=[
            Constant(id="percent", value="100", justification="percent to fraction"),
            Constant(id="months_per_year", value="12", justification="months in a year"),
        ],
        transformations=[Transformation(name="percent_to_fraction", op="divide", by="100")],
        derivation=[
            DerivationStep(
                id="rate_fraction",
                op="divide",
                inputs=[StepInput(source="rate"), StepInput(constant="percent")],
            ),
            DerivationStep(
                id="annual_interest",
                op="multiply",
                inputs=[StepInput(source="principal"), StepInput(intermediate="rate_fraction")],
            ),
            DerivationStep(
                id="monthly",
                op="divide",
                inputs=[StepInput(intermediate="annual_interest"), StepInput(constant="months_per_year")],
            ),
            DerivationStep(
                id="period_interest",
                op="multiply",
                inputs=[StepInput(intermediate="monthly"), StepInput(source="months")],
            ),
        ],
        quantisation=Quantisation(places=2, rounding=rounding),
        answer_tolerance=tolerance,
        answer_unit="USD",
        decline_markers=["cannot be determined"],
    )


def trace(*calls: tuple[str, str | None], text: str = "", records: bool = True):
    return trace_provenance(loan_spec(), [CalculatorCall(e, r) for e, r in calls], text, records)


def only_operand(report, call_no: int, position: int):
    return report.calls[call_no - 1].operands[position]


def test_step1_source_value():
    """Ladder step 1: an operand equal to a source value resolves to that source."""
    report = trace(("15200.00 * 6", "91200.00"))
    op = only_operand(report, 1, 0)
    assert (op.step, op.matched) == ("source", "source:principal")
    assert report.calls[0].status == "grounded"


def test_step1_declared_constant():
    """Ladder step 1: a declared constant resolves as `constant`."""
    op = only_operand(trace(("760 / 12", MONTHLY)), 1, 1)
    assert (op.step, op.matched) == ("constant", "constant:months_per_year")


def test_step2_transformed_source():
    """Ladder step 2: a declared transformation of a source value (5% -> 0.05)."""
    op = only_operand(trace(("15200.00 * 0.05", "760.0000")), 1, 1)
    assert (op.step, op.matched) == ("transformed_source", "transformed:percent_to_fraction(source:rate)")


def test_step3_reference_intermediate_raw_and_transformed():
    """Ladder step 3: an intermediate of the reference derivation, raw or transformed."""
    report = trace(("760 / 12", MONTHLY), ("7.6 * 2", "15.2"))
    assert (only_operand(report, 1, 0).step, only_operand(report, 1, 0).matched) == (
        "reference_intermediate",
        "intermediate:annual_interest",
    )
    transformed = only_operand(report, 2, 0)
    assert transformed.step == "reference_intermediate"
    assert transformed.matched == "transformed:percent_to_fraction(intermediate:annual_interest)"


def test_step3_quantised_intermediate_has_quantisation_finding():
    """Ladder step 3: an intermediate quantised under the declared policy is grounded, with a finding."""
    op = only_operand(trace(("63.33 * 6", "379.98")), 1, 0)
    assert op.step == "reference_intermediate_quantised"
    assert op.matched == "quantised:intermediate:monthly"
    assert op.findings == ["quantisation"]


def test_step4_computed_in_session_from_grounded_call():
    """Ladder step 4: equal to the return of an earlier call that was itself grounded."""
    report = trace(("15200.00 * 6", "91200.00"), ("91200 / 12", "7600"))
    op = only_operand(report, 2, 0)
    assert (op.step, op.matched) == ("computed_in_session", "call#1")
    assert report.calls[1].status == "grounded"


def test_step5_originated():
    """Ladder step 5: nothing matched -> originated, listed in the originated list."""
    report = trace(("15200 * 0.051", "775.2"))
    op = only_operand(report, 1, 1)
    assert (op.step, op.matched) == ("originated", "")
    assert report.calls[0].status == "originated"
    assert report.originated == ["0.051"]


def test_first_match_wins():
    """Rule: the ladder stops at the first rung that matches (a source beats a later call return)."""
    report = trace(("3 * 2", "6"), ("6 * 1", "6"))
    assert only_operand(report, 2, 0).step == "source"  # 6 is source:months before call#1's return


def test_laundering_through_ungrounded_call_stays_originated():
    """Rule: provenance never propagates through an ungrounded computation (laundering)."""
    report = trace(("15200 * 0.051", "775.2"), ("775.2 / 2", "387.6"))
    laundered = only_operand(report, 2, 0)
    assert laundered.step == "originated"
    assert "ungrounded_chain" in laundered.findings
    assert report.calls[1].status == "originated"


def test_grounded_equal_return_wins_over_originated_one():
    """Rule: only returns of grounded calls count; an equal originated return does not block them."""
    report = trace(("5.5 * 2", "11"), ("5 + 6", "11"), ("11 * 100", "1100"))
    assert [c.status for c in report.calls] == ["originated", "grounded", "grounded"]
    assert only_operand(report, 3, 0).matched == "call#2"
    report = trace(("5 + 6", "11"), ("5.5 * 2", "11"), ("11 * 100", "1100"))
    assert only_operand(report, 3, 0).matched == "call#1"


def test_value_0_001_from_source_is_originated():
    """Rule: equality is exact, never a tolerance: 15200.001 is not the source 15200.00."""
    op = only_operand(trace(("15200.001 * 0.05", "760.00005")), 1, 0)
    assert op.step == "originated"


def test_numeric_equality_ignores_trailing_zeros():
    """Decimal("15200") equals the source "15200.00": numeric equality, not string equality."""
    assert only_operand(trace(("15200 * 1", "15200")), 1, 0).matched == "source:principal"


def test_unparseable_expression_is_unobservable_and_grounds_nothing():
    """Rule: an unparseable call is UNOBSERVABLE, counted, never grounded, and its result grounds nothing."""
    report = trace(("15200 x 0.05", "4321"), ("4321 + 1", "4322"))
    assert report.calls[0].status == "unobservable"
    assert report.calls[0].operands == []
    assert report.unobservable_calls == 1
    chained = only_operand(report, 2, 0)
    assert chained.step == "originated"
    assert "ungrounded_chain" in chained.findings


def test_sign_inversion_finding():
    """Finding: an originated operand equal to the negation of a source value."""
    op = only_operand(trace(("-15200.00 * 0.05", "-760.0000")), 1, 0)
    assert op.step == "originated"
    assert op.findings == ["sign_inversion"]
    assert op.value == Decimal("-15200.00")


def test_near_miss_finding():
    """Finding: an originated operand equal to an earlier return after rounding."""
    report = trace(("760 / 12", MONTHLY), ("63.3333 * 6", "379.9998"))
    op = only_operand(report, 2, 0)
    assert op.step == "originated"
    assert "near_miss" in op.findings
    assert "call#1" in op.notes[-1]


def test_released_figure_equal_to_grounded_return_is_grounded():
    """Rule: released figures go through the same ladder; a grounded call's return grounds a figure."""
    report = trace(("15200.00 * 6", "91200.00"), text="Six times the principal: $91,200.00.")
    [fig] = report.figures
    assert (fig.step, fig.matched) == ("computed_in_session", "call#1")


def test_released_figure_from_originated_call_is_originated():
    report = trace(("15200 * 0.051", "775.2"), text="The interest is $775.20.")
    [fig] = report.figures
    assert fig.step == "originated" and "ungrounded_chain" in fig.findings
    assert report.originated == ["0.051", "$775.20"]


def test_answer_correct_within_tolerance_of_quantised_reference():
    report = trace(("63.33 * 6", "379.98"), text="Final answer: $379.99")
    assert report.answer.kind == "found" and report.answer_correct is True
    assert [f.is_answer for f in report.figures] == [True]
    assert trace(text="Final answer: $379.98").answer_correct is False


def test_answer_correct_is_none_when_declined():
    report = trace(text="The rate cannot be determined from the evidence.")
    assert report.answer.kind == "declined"
    assert report.answer_correct is None


def test_evidence_class_is_reported():
    assert trace(("1 + 1", "2"), text="2").evidence_class is EvidenceClass.EV2
    assert trace(text="I calculated it: $380.00", records=False).evidence_class is EvidenceClass.EV1


def test_float_results_are_refused():
    """Rule: floats never enter the ladder."""
    with pytest.raises(TypeError):
        CalculatorCall("0.1 + 0.2", 0.30000000000000004)  # type: ignore[arg-type]


def test_record_is_json_and_keeps_decimal_text():
    record = trace(("15200.00 * 0.05", "760.0000"), text="Final answer: $380.00").as_record()
    encoded = json.dumps(record)
    assert '"value": "15200.00"' in encoded
    assert record["calls"][0]["status"] == "grounded"
    assert record["evidence_class"] == "EV-2"
