"""What the provenance ladder records (scoring/provenance.py): the calls and figures it traced, each
operand's rung, and the report one execution gets. Decimals stay Decimals; `as_record` turns the report
into JSON-ready data for the result row (exponent kept).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from decimal import Decimal, DecimalException, localcontext
from typing import Any

from pydantic import BaseModel

from afpbench.scoring.calculator import DECIMAL_CONTEXT
from afpbench.scoring.derivation import ReferenceDerivation
from afpbench.scoring.evidence_class import EvidenceClass
from afpbench.scoring.figures import FigureIdentification

STEPS = ("source", "constant", "transformed_source", "reference_intermediate",
         "reference_intermediate_quantised", "computed_in_session", "originated")  # fmt: skip
CALL_STATUSES = ("grounded", "originated", "unobservable")


@dataclass(frozen=True)
class CalculatorCall:
    """One calculator call as executed. `result` is what the calculator returned (Decimal, or its exact
    string form as stored in the attempt record); None when it returned an error."""

    expression: str
    result: Decimal | None = None

    def __post_init__(self) -> None:
        if isinstance(self.result, float):
            raise TypeError("a float result would leak binary tails: pass the calculator's string or Decimal")
        if isinstance(self.result, str | int):
            object.__setattr__(self, "result", Decimal(self.result))


@dataclass(frozen=True)
class OperandTrace:
    text: str
    value: Decimal
    step: str
    matched: str  # e.g. "source:principal", "call#2"; "" when originated
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def grounded(self) -> bool:
        return self.step != "originated"


@dataclass(frozen=True)
class CallTrace:
    index: int  # 1-based, execution order
    expression: str
    status: str  # grounded | originated | unobservable
    operands: list[OperandTrace]
    result: Decimal | None
    reason: str = ""  # why a call is unobservable


@dataclass(frozen=True)
class FigureTrace:
    text: str
    value: Decimal
    step: str
    matched: str
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    is_answer: bool = False

    @property
    def grounded(self) -> bool:
        return self.step != "originated"


@dataclass(frozen=True)
class ProvenanceReport:
    calls: list[CallTrace]
    figures: list[FigureTrace]
    originated: list[str]  # literal texts of originated operands, then originated figures
    unobservable_calls: int
    evidence_class: EvidenceClass
    evidence_reason: str
    answer: FigureIdentification
    answer_correct: bool | None  # None unless an answer figure was found
    reference: ReferenceDerivation

    def call_counts(self) -> dict[str, int]:
        return {s: sum(1 for c in self.calls if c.status == s) for s in CALL_STATUSES}

    def as_record(self) -> dict[str, Any]:
        """JSON-ready dict (Decimals as strings, exponent kept) for the result row."""
        record: dict[str, Any] = _jsonable(asdict(self))  # a dict in, a dict out
        return record


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Decimal):
        return str(obj)
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    return obj


def rounded_to(value: Decimal, places: int, mode: str) -> Decimal | None:
    """`value` rounded to `places` with `mode`; None for a non-finite value or one with more digits than
    the context holds (no released figure is that long)."""
    if not value.is_finite():
        return None
    with localcontext(DECIMAL_CONTEXT):
        try:
            return value.quantize(Decimal(1).scaleb(-places), rounding=mode)
        except DecimalException:
            return None
