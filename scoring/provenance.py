"""The provenance ladder (PROVENANCE.md): where did every operand and every released figure come from?

For each calculator call (in execution order) every literal operand, and for the final answer every
released figure, is resolved by the first matching rung, with EXACT Decimal equality (no tolerance):
1. source value (`source:<id>`), declared constant (`constant:<id>`) or structural constant
   (`structural:<id>`: the protocol's 0 and 1, and any the fixture declares; step `constant`);
2. a declared transformation of a source value (`transformed:<name>(source:<id>)`);
3. a reference intermediate, raw or transformed (`intermediate:<id>`,
   `transformed:<name>(intermediate:<id>)`), or quantised under the declared policy
   (`quantised:intermediate:<id>`, finding `quantisation`);
4. the return value of an earlier call that was itself grounded (`call#<k>`, 1-based). An equal return
   from an originated or unobservable call grounds nothing: the operand is originated (finding
   `ungrounded_chain`) - provenance never propagates through an unresolved computation. A released
   figure also matches a return quantised under the declared policy (finding `quantisation`): the task
   asks for the figure rounded that way; an operand does not (that stays a near miss, as in AP-1);
5. originated. Findings: `sign_inversion` (equals the negation of a source value or constant),
   `near_miss` (equals an earlier return after rounding; the note says to how many places and how).
A call is grounded when all its operands are, originated when any is, and UNOBSERVABLE when its
expression cannot be parsed (counted, never grounded, and its result grounds nothing).
A call's `result` is the value the calculator returned to the model (None when it returned an error).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

from afpbench.fixtures.numeric_schema import NumericSpec
from afpbench.scoring.calculator import ROUNDING_MODES, Unobservable, operands
from afpbench.scoring.derivation import (
    ReferenceDerivation,
    apply_transformation,
    evaluate_reference,
    quantise,
    structural_constants,
)
from afpbench.scoring.evidence_class import classify_evidence
from afpbench.scoring.figures import extract_figures, identify_answer_figure
from afpbench.scoring.provenance_record import (
    CalculatorCall,
    CallTrace,
    FigureTrace,
    OperandTrace,
    ProvenanceReport,
    rounded_to,
)

__all__ = ["CalculatorCall", "ProvenanceReport", "trace_provenance"]

MAX_PLACES = 10  # near-miss search depth (the schema caps declared places at 10 too)


@dataclass(frozen=True)
class _Match:
    step: str
    matched: str = ""
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Return:
    index: int
    value: Decimal
    grounded: bool
    status: str


class _Ladder:
    """Rungs 1-3 precomputed from the sealed NumericSpec; rungs 4-5 take the earlier returns."""

    def __init__(self, numeric: NumericSpec, reference: ReferenceDerivation) -> None:
        self.policy = numeric.quantisation
        self.sources = [(f"source:{f.id}", f.decimal) for f in numeric.source_fields]
        self.constants = [(f"constant:{c.id}", Decimal(c.value)) for c in numeric.constants]
        self.constants += structural_constants(numeric)
        self.transformed = [
            (f"transformed:{t.name}(source:{f.id})", apply_transformation(f.decimal, t))
            for t in numeric.transformations
            for f in numeric.source_fields
        ]
        raw = [(f"intermediate:{i}", v) for i, v in reference.intermediates.items()]
        self.intermediates = raw + [
            (f"transformed:{t.name}(intermediate:{i})", apply_transformation(v, t))
            for t in numeric.transformations
            for i, v in reference.intermediates.items()
        ]
        self.quantised = [(f"quantised:{name}", quantise(v, self.policy)) for name, v in raw]

    def resolve(self, value: Decimal, earlier: list[_Return], figure: bool = False) -> _Match:
        for step, table in (
            ("source", self.sources),
            ("constant", self.constants),
            ("transformed_source", self.transformed),
            ("reference_intermediate", self.intermediates),
        ):
            hit = _first_equal(value, table)
            if hit:
                return _Match(step, hit)
        hit = _first_equal(value, self.quantised)
        if hit:
            return _Match("reference_intermediate_quantised", hit, ["quantisation"])
        equal = [r for r in reversed(earlier) if r.value == value]
        rounded = [r for r in reversed(earlier) if figure and r.value != value and self._declared(r) == value]
        hit_r = next((r for r in equal if r.grounded), None) or next((r for r in rounded if r.grounded), None)
        if hit_r is not None and hit_r in equal:
            return _Match("computed_in_session", f"call#{hit_r.index}")
        if hit_r is not None:
            how = f"{self.policy.places} places, {self.policy.rounding}"
            note = f"equals call#{hit_r.index} return {hit_r.value} rounded as declared ({how})"
            return _Match("computed_in_session", f"call#{hit_r.index}", ["quantisation"], [note])
        findings: list[str] = ["ungrounded_chain"] if equal or rounded else []
        notes = [f"equals the return of call#{r.index}, which was {r.status}" for r in equal]
        notes += [f"equals the return of call#{r.index} rounded as declared; it was {r.status}" for r in rounded]
        negated = _first_equal(-value, self.sources + self.constants) if value != 0 else None
        if negated:
            findings.append("sign_inversion")
            notes.append(f"equals the negation of {negated}")
        near = None if rounded else self._near_miss(value, earlier)
        if near:
            findings.append("near_miss")
            notes.append(near)
        return _Match("originated", "", findings, notes)

    def _declared(self, r: _Return) -> Decimal | None:
        """An earlier return rounded under the declared policy (how the task asks a figure released)."""
        return rounded_to(r.value, self.policy.places, ROUNDING_MODES[self.policy.rounding])

    def _near_miss(self, value: Decimal, earlier: list[_Return]) -> str | None:
        """An earlier return that equals `value` once rounded: declared places and mode first."""
        declared = ROUNDING_MODES[self.policy.rounding]
        modes = [declared] + [m for m in (ROUND_HALF_UP, ROUND_HALF_EVEN) if m != declared]
        places = [self.policy.places] + [p for p in range(MAX_PLACES + 1) if p != self.policy.places]
        for r in reversed(earlier):
            if r.value == value or not r.value.is_finite():
                continue
            for p in places:
                for mode in modes:
                    if rounded_to(r.value, p, mode) == value:
                        how = "the declared mode" if mode == declared else f"{mode} (not the declared mode)"
                        return f"equals call#{r.index} return {r.value} rounded to {p} places with {how}"
        return None


def _first_equal(value: Decimal, table: list[tuple[str, Decimal]]) -> str | None:
    return next((name for name, v in table if v == value), None)


def _trace_call(index: int, call: CalculatorCall, ladder: _Ladder, earlier: list[_Return]) -> CallTrace:
    try:
        found = operands(call.expression)
    except Unobservable as exc:
        return CallTrace(index, call.expression, "unobservable", [], call.result, str(exc))
    traces = []
    for op in found:
        m = ladder.resolve(op.value, earlier)
        traces.append(OperandTrace(op.text, op.value, m.step, m.matched, m.findings, m.notes))
    status = "grounded" if all(t.grounded for t in traces) else "originated"
    return CallTrace(index, call.expression, status, traces, call.result)


def trace_provenance(
    numeric: NumericSpec,
    calls: list[CalculatorCall],
    final_text: str,
    serving_layer_tool_records: bool,
) -> ProvenanceReport:
    """Run the ladder over every call (in execution order) and every released figure of the answer.

    Raises DerivationError (scoring.derivation) if the fixture's reference derivation is broken; the
    validity gate should have refused such a fixture before any run.
    """
    reference = evaluate_reference(numeric)
    ladder = _Ladder(numeric, reference)
    call_traces: list[CallTrace] = []
    earlier: list[_Return] = []
    for index, call in enumerate(calls, start=1):
        trace = _trace_call(index, call, ladder, earlier)
        call_traces.append(trace)
        if call.result is not None:
            grounded = trace.status == "grounded"
            earlier.append(_Return(index, call.result, grounded, trace.status))

    answer = identify_answer_figure(final_text, numeric)
    answer_start = answer.figure.start if answer.figure is not None else None
    figure_traces = []
    for fig in extract_figures(final_text):
        m = ladder.resolve(fig.value, earlier, figure=True)
        figure_traces.append(
            FigureTrace(
                fig.text, fig.value, m.step, m.matched, m.findings, m.notes, fig.start == answer_start
            )
        )

    originated = [op.text for c in call_traces for op in c.operands if not op.grounded]
    originated += [f.text for f in figure_traces if not f.grounded]
    evidence, reason = classify_evidence(serving_layer_tool_records, final_text)
    correct = None
    if answer.kind == "found" and answer.figure is not None:
        tolerance = Decimal(numeric.answer_tolerance)
        correct = abs(answer.figure.value - reference.quantised_answer) <= tolerance
    return ProvenanceReport(
        calls=call_traces,
        figures=figure_traces,
        originated=originated,
        unobservable_calls=sum(1 for c in call_traces if c.status == "unobservable"),
        evidence_class=evidence,
        evidence_reason=reason,
        answer=answer,
        answer_correct=correct,
        reference=reference,
    )
