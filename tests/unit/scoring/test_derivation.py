"""The reference derivation (PROVENANCE.md "Inputs"): typed steps evaluated in Decimal by the harness."""

from __future__ import annotations

from decimal import Decimal

import pytest

from afpbench.fixtures.numeric_schema import (
    Constant,
    DerivationStep,
    NumericSpec,
    Quantisation,
    SourceField,
    StepInput,
    Transformation,
)
from afpbench.scoring.derivation import (
    DerivationError,
    evaluate_reference,
    quantise,
    structural_constants,
    transformed_sources,
    unused_constants,
)


def src(ref: str) -> StepInput:
    return StepInput(source=ref)


def mid(ref: str) -> StepInput:
    return StepInput(intermediate=ref)


def const(ref: str) -> StepInput:
    return StepInput(constant=ref)


def loan_spec(rounding: str = "HALF_UP", places: int = 2, steps: list[DerivationStep] | None = None):
    """Principal 15200.00 at 5% a year, for 6 months."""
    return NumericSpec(
        source_fields=[
            SourceField(id="principal", value="15200.00", unit="USD", evidence_id="E1"),
            SourceField(id="rate", value="5", unit="%", evidence_id="E1"),
            SourceField(id="months", value="6", evidence_id="E2"),
            SourceField(id="zero", value="0", evidence_id="E2"),
        ],
        constants=[
            Constant(id="percent", value="100", justification="percent to fraction"),
            Constant(id="months_per_year", value="12", justification="months in a year"),
        ],
        transformations=[Transformation(name="percent_to_fraction", op="divide", by="100")],
        derivation=steps
        or [
            DerivationStep(id="rate_fraction", op="divide", inputs=[src("rate"), const("percent")]),
            DerivationStep(
                id="annual_interest", op="multiply", inputs=[src("principal"), mid("rate_fraction")]
            ),
            DerivationStep(
                id="monthly", op="divide", inputs=[mid("annual_interest"), const("months_per_year")]
            ),
            DerivationStep(id="period_interest", op="multiply", inputs=[mid("monthly"), src("months")]),
        ],
        quantisation=Quantisation(places=places, rounding=rounding),
    )


def test_intermediates_are_ordered_and_exact():
    """Rule: intermediates are evaluated in Decimal in declared order; the last is the answer."""
    ref = evaluate_reference(loan_spec())
    assert list(ref.intermediates) == ["rate_fraction", "annual_interest", "monthly", "period_interest"]
    assert ref.intermediates["rate_fraction"] == Decimal("0.05")
    assert str(ref.intermediates["annual_interest"]) == "760.0000"
    assert ref.answer_id == "period_interest"
    assert ref.answer == ref.intermediates["period_interest"]
    assert ref.quantised_answer == Decimal("380.00")
    assert str(ref.quantised_answer) == "380.00"


def _halves_spec(value: str, places: int, rounding: str) -> NumericSpec:
    steps = [
        DerivationStep(id="a", op="sum", inputs=[src("x")]),
        DerivationStep(id="b", op="sum", inputs=[mid("a")]),
        DerivationStep(id="c", op="sum", inputs=[mid("b")]),
    ]
    return NumericSpec(
        source_fields=[SourceField(id="x", value=value, evidence_id="E1")],
        derivation=steps,
        quantisation=Quantisation(places=places, rounding=rounding),
    )


@pytest.mark.parametrize(
    ("value", "places", "half_up", "half_even"),
    [
        ("2.5", 0, "3", "2"),
        ("0.125", 2, "0.13", "0.12"),
        ("3.5", 0, "4", "4"),
        ("760.125", 2, "760.13", "760.12"),
    ],
)
def test_half_up_and_half_even_exactly_as_declared(value, places, half_up, half_even):
    """Rule: the declared rounding mode is used as declared; HALF_EVEN never replaces HALF_UP."""
    assert evaluate_reference(_halves_spec(value, places, "HALF_UP")).quantised_answer == Decimal(half_up)
    assert evaluate_reference(_halves_spec(value, places, "HALF_EVEN")).quantised_answer == Decimal(half_even)
    assert quantise(Decimal(value), Quantisation(places=places, rounding="HALF_UP")) == Decimal(half_up)


def test_unknown_reference_names_the_step():
    steps = [
        DerivationStep(id="a", op="multiply", inputs=[src("principal"), src("nope")]),
        DerivationStep(id="b", op="sum", inputs=[mid("a")]),
        DerivationStep(id="c", op="sum", inputs=[mid("b")]),
    ]
    with pytest.raises(DerivationError, match="step 'a': unknown source 'nope'"):
        evaluate_reference(loan_spec(steps=steps))


def test_intermediate_must_come_from_an_earlier_step():
    steps = [
        DerivationStep(id="a", op="sum", inputs=[mid("b")]),
        DerivationStep(id="b", op="sum", inputs=[src("months")]),
        DerivationStep(id="c", op="sum", inputs=[mid("b")]),
    ]
    with pytest.raises(DerivationError, match="step 'a': unknown intermediate 'b'"):
        evaluate_reference(loan_spec(steps=steps))


def test_unknown_constant_names_the_step():
    steps = [
        DerivationStep(id="a", op="sum", inputs=[src("months")]),
        DerivationStep(id="b", op="divide", inputs=[mid("a"), const("days_per_year")]),
        DerivationStep(id="c", op="sum", inputs=[mid("b")]),
    ]
    with pytest.raises(DerivationError, match="step 'b': unknown constant 'days_per_year'"):
        evaluate_reference(loan_spec(steps=steps))


def test_division_by_zero_names_the_step():
    steps = [
        DerivationStep(id="a", op="sum", inputs=[src("months")]),
        DerivationStep(id="per_zero", op="divide", inputs=[mid("a"), src("zero")]),
        DerivationStep(id="c", op="sum", inputs=[mid("per_zero")]),
    ]
    with pytest.raises(DerivationError, match="step 'per_zero': division by zero"):
        evaluate_reference(loan_spec(steps=steps))


def test_operations_read_inputs_left_to_right():
    steps = [
        DerivationStep(id="diff", op="subtract", inputs=[src("principal"), src("months"), src("rate")]),
        DerivationStep(id="low", op="min", inputs=[mid("diff"), src("months")]),
        DerivationStep(id="high", op="max", inputs=[mid("low"), src("rate"), src("zero")]),
    ]
    ref = evaluate_reference(loan_spec(steps=steps))
    assert ref.intermediates == {"diff": Decimal("15189.00"), "low": Decimal(6), "high": Decimal(6)}


def test_binary_operation_with_one_input_is_an_error():
    steps = [
        DerivationStep(id="lonely", op="subtract", inputs=[src("months")]),
        DerivationStep(id="b", op="sum", inputs=[mid("lonely")]),
        DerivationStep(id="c", op="sum", inputs=[mid("b")]),
    ]
    with pytest.raises(DerivationError, match="step 'lonely'"):
        evaluate_reference(loan_spec(steps=steps))


def test_transformed_sources_apply_each_declared_transformation_exactly():
    out = transformed_sources(loan_spec())
    assert ("percent_to_fraction", "rate", Decimal("0.05")) in out
    assert ("percent_to_fraction", "principal", Decimal("152.0000")) in out
    assert len(out) == 4  # one transformation x four source fields


def test_unused_constants_are_reported():
    """AP-1 trap: a declared-but-unused constant widens grounding for nothing."""
    steps = [
        DerivationStep(id="a", op="divide", inputs=[src("rate"), const("percent")]),
        DerivationStep(id="b", op="sum", inputs=[mid("a")]),
        DerivationStep(id="c", op="sum", inputs=[mid("b")]),
    ]
    assert unused_constants(loan_spec(steps=steps)) == ["months_per_year"]
    assert unused_constants(loan_spec()) == []


def test_structural_constants_are_the_protocols_then_the_fixtures_and_need_not_be_used():
    """Rule: structural constants (protocol 0 and 1, plus the fixture's own) are declared and sealed;
    they are not derivation inputs, so the unused-constant check (an AP-1 trap) does not apply to them."""
    spec = loan_spec().model_copy(
        update={"structural_constants": [Constant(id="square", value="2", justification="squares a rate")]}
    )
    assert structural_constants(spec) == [
        ("structural:zero", Decimal(0)), ("structural:one", Decimal(1)), ("structural:square", Decimal(2)),
    ]
    assert unused_constants(spec) == unused_constants(loan_spec())
    with pytest.raises(DerivationError, match="unknown constant 'one'"):
        evaluate_reference(loan_spec(steps=[
            DerivationStep(id="a", op="add", inputs=[src("rate"), const("one")]),
            DerivationStep(id="b", op="add", inputs=[mid("a"), src("months")]),
            DerivationStep(id="c", op="add", inputs=[mid("b"), src("months")]),
        ]))
