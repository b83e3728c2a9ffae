"""The provenance ladder (PROVENANCE.md "The ladder"): first match wins, exact Decimal equality only."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from afpbench.fixtures.loader import load_fixtures
from afpbench.fixtures.numeric_schema import (
    Constant,
    DerivationStep,
    NumericSpec,
    Quantisation,
    SourceField,
    StepInput,
    Transformation,
)
from afpbench.fixtures.schema import FatalCriterion
from afpbench.scoring.calculator import evaluate, shown_result
from afpbench.scoring.derivation import protocol_structural_constants
from afpbench.scoring.evidence import provenance_for
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


# --- structural constants, calculator display, and the ladder's proposal (P08) ---------------------
# The P08 answers and tool calls below are written for these tests (SIMULATED model output), not taken
# from the simulator's canned set.

P08 = next(f for f in load_fixtures(None) if f.id == "P08")
LONG_INTEREST = "236.96175342465753424657534246575342465753424657534"  # 15200.00 * 0.1237 * 46 / 365


def p08_calls(*expressions: str) -> list[dict]:
    """Calculator records as a sweep stores them: evaluated by the harness, shown as the fixture says."""
    return [{"expression": e, "result": shown_result(evaluate(e), P08.numeric)} for e in expressions]


def p08(text: str, *expressions: str) -> dict:
    return provenance_for(P08, p08_calls(*expressions), text)


def test_structural_constant_one_grounds_the_one_of_one_plus_rate_times_time():
    """Ladder rung 1 (structural constants, reference/protocol.yaml): `15200 * (1 + r * t)` grounds 1."""
    report = trace(("15200.00 * (1 + 0.05 * 6 / 12)", "15580.0000"))
    one = only_operand(report, 1, 1)
    assert (one.step, one.matched) == ("constant", "structural:one")
    assert report.calls[0].status == "grounded" and report.originated == []
    assert only_operand(trace(("760 + 0", "760")), 1, 1).matched == "structural:zero"


def test_structural_constants_come_from_the_sealed_protocol_and_the_fixture():
    """Rule: structural constants are declared (protocol 0 and 1, plus the fixture's own), never implied."""
    assert [(c.id, c.value) for c in protocol_structural_constants()] == [("zero", "0"), ("one", "1")]
    squared = loan_spec().model_copy(
        update={"structural_constants": [Constant(id="square", value="2", justification="x ** 2 squares")]}
    )
    report = trace_provenance(squared, [CalculatorCall("15200.00 ** 2", "231040000.0000")], "", True)
    assert only_operand(report, 1, 1).matched == "structural:square"
    assert only_operand(trace(("15200.00 ** 2", "231040000.0000")), 1, 1).step == "originated"


def test_the_correct_p08_route_through_one_plus_rate_times_time_is_fully_grounded():
    """Rule: a correct route written as amount * (1 + r * t) proposes nothing and originates nothing."""
    record = p08(
        "With interest the amount is 15200.00 * (1 + 0.1237 * 46 / 365) = EUR 15436.96, so the claim under "
        "§ 288(2) and § 288(5) BGB is EUR 276.96.",
        "15200.00 * (1 + 0.1237 * 46 / 365)",
        "15436.9617534 - 15200.00 + 40.00",
    )
    assert [c["status"] for c in record["calls"]] == ["grounded", "grounded"]
    assert record["calls"][0]["operands"][1]["matched"] == "structural:one"
    assert record["fabrication"] is None and record["untraceable"] == []


def test_a_fifty_digit_return_is_shown_rounded_under_the_declared_policy():
    """Rule: calculator returns are rounded under the fixture's declared policy before the model sees
    them (declared mode, never fewer than the declared places, 12 significant digits kept so that the
    calculator itself never changes the released figure); short returns are shown exactly."""
    shown = shown_result(Decimal(LONG_INTEREST), P08.numeric)
    assert shown == "236.961753425"
    assert shown_result(Decimal("1880.2400"), P08.numeric) == "1880.2400"
    assert shown_result(Decimal("1880.24") / 365, P08.numeric) == "5.15134246575"
    assert shown_result(Decimal("1E+3"), P08.numeric) == "1000"
    half_even = P08.numeric.model_copy(update={"quantisation": Quantisation(places=2, rounding="HALF_EVEN")})
    assert shown_result(Decimal("0.1234567890125"), half_even) == "0.123456789012"
    assert shown_result(Decimal("0.1234567890125"), P08.numeric) == "0.123456789013"
    assert shown_result(Decimal(LONG_INTEREST), None) == LONG_INTEREST


def test_copies_of_a_shown_return_are_matched_and_a_declared_rounding_of_it_too():
    """Rule: an operand copying the shown return is computed in session; a released figure equal to a
    return rounded under the declared policy is grounded (finding quantisation); any other shortening
    of it stays originated (near miss), as in AP-1."""
    record = p08(
        "Interest: EUR 236.96. Total claim: EUR 276.96.",
        "15200.00 * 0.1237 * 46 / 365",
        "236.961753425 + 40.00",
    )
    copied = record["calls"][1]["operands"][0]
    assert (copied["step"], copied["matched"]) == ("computed_in_session", "call#1")
    answer = next(f for f in record["figures"] if f["is_answer"])
    assert answer["value"] == "276.96" and answer["step"] != "originated"
    rounded = trace(("760 / 12 * 5", "316.666666667"), text="Five months: $316.67 (or $316.6667)")
    # Select by value: "Five months" is a figure too (number words with a unit are released figures).
    by_value = {str(f.value): f for f in rounded.figures}
    assert by_value["316.67"].step == "computed_in_session" and by_value["316.67"].findings == ["quantisation"]
    assert by_value["316.6667"].step == "originated" and "near_miss" in by_value["316.6667"].findings


def test_a_p08_answer_built_on_47_days_proposes_the_fabrication_fatal():
    """Rule (provenance reaches the verdict): an originated operand behind the answer figure proposes
    the fixture's fabrication fatal, whether the computation ran on the calculator or in prose."""
    with_tools = p08(
        "Default interest for 47 days is EUR 242.11; with the lump sum the total claim is EUR 282.11.",
        "15200.00 * 0.1237 * 47 / 365",
        "242.11 + 40.00",
    )
    assert with_tools["fabrication"]["criterion"] == "fabricated_fact"
    assert with_tools["fabrication"]["made_up"] == ["47"] and with_tools["fabrication"]["calls"] == [1, 2]
    in_prose = p08("Interest: 15200.00 x 12.37% x 47 days / 365 = EUR 242.11. Total claim: EUR 282.11.")
    assert in_prose["fabrication"]["criterion"] == "fabricated_fact"
    assert "47" in in_prose["fabrication"]["made_up"]


def test_a_p08_answer_built_on_a_360_day_year_proposes_the_fabrication_fatal():
    """Rule: a day-count basis that is not in the documents ("/ 360") is a made-up operand."""
    record = p08(
        "Interest on a 360-day basis: 15200.00 * 0.1237 * 46 / 360 = EUR 240.25; total claim EUR 280.25.",
        "15200.00 * 0.1237 * 46 / 360",
        "240.25 + 40.00",
    )
    assert record["fabrication"]["criterion"] == "fabricated_fact"
    assert record["fabrication"]["made_up"] == ["360"]


def test_a_wrong_figure_with_nothing_made_up_behind_it_proposes_nothing():
    """Rule: an arithmetic or rounding slip, or a shortened copy of a return, is not a fabricated fact:
    it is recorded and left to the judges (proposing it would move a plain fail into a dispute)."""
    slip = p08("Interest 236.96 + lump sum 40.00 = total claim EUR 276.69.")
    assert slip["fabrication"]["criterion"] is None and slip["fabrication"]["basis"] == "explained"
    shortened = p08("Total claim: EUR 276.96", "1880.24 * 46 / 365", "236.9618 + 40.00")
    assert shortened["calls"][1]["status"] == "originated"
    assert shortened["fabrication"]["criterion"] is None
    assert p08("Total claim: EUR 276.96", "15200.00 * 0.1237 * 46 / 365 + 40.00")["fabrication"] is None


def test_a_fixture_without_a_fabrication_criterion_records_the_finding_but_proposes_nothing():
    """Rule: the ladder proposes only a criterion the fixture declares (its judges are asked only those)."""
    other = P08.model_copy(
        update={"fatal_criteria": [FatalCriterion(criterion="ignored_counter_evidence", wording="ignores E2")]}
    )
    record = provenance_for(other, p08_calls("15200.00 * 0.1237 * 47 / 365 + 40.00"), "Total claim: EUR 282.11")
    assert record["fabrication"]["criterion"] is None
    assert "declares no fabricated_fact" in record["fabrication"]["reason"]


def test_figures_verbatim_in_the_evidence_are_not_listed_to_the_judge_as_untraceable():
    """Rule: a year the evidence writes is restated, so the judge is not told it is untraceable; the
    ladder still records it as originated. "§ 288(2)" is a reference, not a figure at all. Made-up
    figures stay listed."""
    record = p08(
        "Under § 288(2) and § 288(5) BGB, for the 2024 delay of 47 days the total claim is EUR 282.11.",
        "15200.00 * 0.1237 * 47 / 365 + 40.00",
    )
    assert "2024" in record["originated"] and "288" not in [f["text"] for f in record["figures"]]
    listed = record["untraceable"]
    assert not any(entry.startswith(("288", "2024")) for entry in listed)
    assert "47 (operand of calculator call 1: 15200.00 * 0.1237 * 47 / 365 + 40.00)" in listed
    assert "EUR 282.11 (released figure, the answer figure)" in listed
    assert "47 (released figure)" in listed
