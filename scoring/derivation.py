"""Evaluate a fixture's reference derivation in Decimal, and the declared transformations of its values.

The fixture declares the derivation as data (ordered steps with typed inputs: a source field, an earlier
intermediate or a declared constant); the harness computes every intermediate here, so no expected value
is ever typed in by hand. The last step is the answer; it is quantised under the declared policy
(places and rounding mode exactly as declared: HALF_UP is never silently HALF_EVEN).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, DecimalException, localcontext

from afpbench.fixtures.numeric_schema import Constant, DerivationStep, NumericSpec, Quantisation, Transformation
from afpbench.reference.loader import protocol
from afpbench.scoring.calculator import DECIMAL_CONTEXT, ROUNDING_MODES

# Binary-style operations read their inputs left to right (subtract: first minus the rest;
# divide: first divided by each of the rest) and need at least two inputs.
_AT_LEAST_TWO = {"add", "subtract", "multiply", "divide"}


class DerivationError(ValueError):
    """The reference derivation cannot be evaluated; the message names the step."""


@dataclass(frozen=True)
class ReferenceDerivation:
    intermediates: dict[str, Decimal]  # step id -> value, in declared order; the last is the answer
    answer_id: str
    answer: Decimal
    quantised_answer: Decimal
    quantisation: Quantisation


def quantise(value: Decimal, policy: Quantisation) -> Decimal:
    """Round to the declared number of places with the declared mode (HALF_UP or HALF_EVEN)."""
    with localcontext(DECIMAL_CONTEXT):
        return value.quantize(Decimal(1).scaleb(-policy.places), rounding=ROUNDING_MODES[policy.rounding])


def apply_transformation(value: Decimal, transformation: Transformation) -> Decimal:
    """A declared transformation (multiply or divide by a declared number) applied exactly."""
    by = Decimal(transformation.by)
    with localcontext(DECIMAL_CONTEXT):
        return value * by if transformation.op == "multiply" else value / by


def transformed_sources(numeric: NumericSpec) -> list[tuple[str, str, Decimal]]:
    """Every declared transformation of every source value: (transformation name, source id, value)."""
    return [
        (t.name, field.id, apply_transformation(field.decimal, t))
        for t in numeric.transformations
        for field in numeric.source_fields
    ]


def _sum(values: list[Decimal]) -> Decimal:
    total = Decimal(0)
    for v in values:
        total += v
    return total


def _subtract(values: list[Decimal]) -> Decimal:
    result = values[0]
    for v in values[1:]:
        result -= v
    return result


def _multiply(values: list[Decimal]) -> Decimal:
    result = Decimal(1)
    for v in values:
        result *= v
    return result


def _divide(values: list[Decimal]) -> Decimal:
    result = values[0]
    for v in values[1:]:
        if v == 0:
            raise ZeroDivisionError
        result /= v
    return result


_OPERATIONS: dict[str, Callable[[list[Decimal]], Decimal]] = {
    "add": _sum,
    "sum": _sum,
    "subtract": _subtract,
    "multiply": _multiply,
    "divide": _divide,
    "min": min,
    "max": max,
}


def _inputs(
    step: DerivationStep,
    sources: dict[str, Decimal],
    constants: dict[str, Decimal],
    intermediates: dict[str, Decimal],
) -> list[Decimal]:
    tables = {"source": sources, "constant": constants, "intermediate": intermediates}
    values = []
    for item in step.inputs:
        kind, ref = item.ref
        if ref not in tables[kind]:
            later = " (intermediates may only refer to earlier steps)" if kind == "intermediate" else ""
            raise DerivationError(f"step {step.id!r}: unknown {kind} {ref!r}{later}")
        values.append(tables[kind][ref])
    return values


def evaluate_reference(numeric: NumericSpec) -> ReferenceDerivation:
    """Evaluate the declared steps in order. Raises DerivationError naming the step on any fault."""
    sources = {f.id: f.decimal for f in numeric.source_fields}
    constants = {c.id: Decimal(c.value) for c in numeric.constants}
    intermediates: dict[str, Decimal] = {}
    for step in numeric.derivation:
        if step.id in intermediates:
            raise DerivationError(f"step {step.id!r}: duplicate step id")
        values = _inputs(step, sources, constants, intermediates)
        if step.op in _AT_LEAST_TWO and len(values) < 2:
            raise DerivationError(f"step {step.id!r}: '{step.op}' needs at least two inputs")
        try:
            with localcontext(DECIMAL_CONTEXT):
                intermediates[step.id] = _OPERATIONS[step.op](values)
        except ZeroDivisionError as exc:
            raise DerivationError(f"step {step.id!r}: division by zero") from exc
        except DecimalException as exc:
            raise DerivationError(f"step {step.id!r}: {exc.__class__.__name__}") from exc
    answer_id = numeric.derivation[-1].id
    answer = intermediates[answer_id]
    return ReferenceDerivation(
        intermediates=intermediates,
        answer_id=answer_id,
        answer=answer,
        quantised_answer=quantise(answer, numeric.quantisation),
        quantisation=numeric.quantisation,
    )


def unused_constants(numeric: NumericSpec) -> list[str]:
    """Declared constants no derivation step uses: each one widens grounding for nothing (AP-1 trap)."""
    used = {item.ref[1] for step in numeric.derivation for item in step.inputs if item.ref[0] == "constant"}
    return [c.id for c in numeric.constants if c.id not in used]


def protocol_structural_constants() -> list[Constant]:
    """The structural constants every numeric fixture grounds (reference/protocol.yaml, sealed)."""
    return [Constant(**c) for c in protocol().get("structural_constants") or []]


def structural_constants(numeric: NumericSpec) -> list[tuple[str, Decimal]]:
    """(name, value) of the protocol's structural constants, then the fixture's own: constants of the
    arithmetic of any route (the 1 of `1 + r * t`, an added 0), which ground an operand at rung 1
    without being part of the reference derivation. Both lists are sealed with the sweep."""
    declared = protocol_structural_constants() + list(numeric.structural_constants)
    return [(f"structural:{c.id}", Decimal(c.value)) for c in declared]
