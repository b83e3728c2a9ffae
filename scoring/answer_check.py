"""One answer through the deterministic layer, without a sweep: what `afpbench fixtures check` reports.

Everything a scorer reads off an answer before any judge is asked, laid out for a fixture author:
each assertion (fired or not, and the span of the answer it found), the invariant misses, the figures
the answer releases after number normalisation, the provenance ladder for numeric fixtures (the
calculator calls evaluated exactly as in a sweep), and the fatal the deterministic layer proposes:
a fatal-prohibition hit, or the ladder's own proposal when the provenance record carries one
(`provenance["fabrication"]`, scoring/fabrication.py). Pure: the CLI adds the judge, if asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from afpbench.fixtures.numeric_schema import NumericSpec
from afpbench.fixtures.schema import Fixture
from afpbench.scoring.assertions import AssertionOutcome, run_assertions
from afpbench.scoring.calculator import CalculatorError, evaluate, shown_result
from afpbench.scoring.evidence import provenance_for, with_provenance_proposal
from afpbench.scoring.numbers import figures_in


def calculator_records(expressions: list[str], numeric: NumericSpec | None = None) -> list[dict[str, Any]]:
    """The attempt's tool-call records as the sweep's conversation writes them: the expression, and
    the result as shown to the model (quantised under the fixture's policy) or the error."""
    records: list[dict[str, Any]] = []
    for expression in expressions:
        try:
            records.append({"expression": expression, "result": shown_result(evaluate(expression), numeric)})
        except CalculatorError as exc:
            records.append({"expression": expression, "error": str(exc)})
    return records


@dataclass(frozen=True)
class AnswerCheck:
    fixture: Fixture
    answer: str
    outcome: AssertionOutcome
    provenance: dict[str, Any] | None
    tool_calls: list[dict[str, Any]]

    @property
    def proposals(self) -> list[tuple[str, str]]:
        """(source, criterion): assertion ids for prohibition hits, "provenance" for the ladder (as a sweep's
        evidence names them: scoring/evidence.py:with_provenance_proposal)."""
        return list(with_provenance_proposal(self.outcome, self.provenance).proposed_fatal)

    @property
    def proposed_fatal(self) -> str | None:
        criteria = [c for _, c in self.proposals]
        return criteria[0] if criteria else None

    def as_record(self) -> dict[str, Any]:
        by_id = {a.id: a for a in self.fixture.assertions}
        assertions = []
        for r in self.outcome.results:
            a = by_id[r.id]
            assertions.append({
                "id": r.id, "kind": r.kind, "check": a.check.value, "scope": a.scope, "fired": r.fired,
                "span": r.span, "matched": self.answer[r.span[0] : r.span[1]] if r.span else None,
                "detail": r.detail,
                **({"fatal_criterion": str(a.fatal_criterion)} if a.kind == "fatal_prohibition"
                   else {"dimension": a.dimension}),
            })  # fmt: skip
        return {
            "fixture": self.fixture.key,
            "proposed_fatal": self.proposed_fatal,
            "proposals": [{"source": s, "criterion": c} for s, c in self.proposals],
            "assertions": assertions,
            "invariant_misses": [{"id": i, "dimension": d} for i, d in self.outcome.invariant_misses],
            "figures": [
                {"text": f.text, "value": str(f.value), "span": [f.start, f.end], "currency": f.currency_code,
                 "percent": f.percent, "unit": f.unit}
                for f in figures_in(self.answer)
            ],  # fmt: skip
            "tool_calls": self.tool_calls,
            "provenance": self.provenance,
        }


def check_answer(fixture: Fixture, answer: str, expressions: list[str] | None = None) -> AnswerCheck:
    """The deterministic layer on one answer; `expressions` are the calculator calls the model made."""
    if expressions and fixture.numeric is None:
        raise ValueError(f"{fixture.key} is not a numeric fixture: it offers no calculator, so no tool calls")
    records = calculator_records(expressions or [], fixture.numeric)
    provenance = provenance_for(fixture, records, answer) if fixture.numeric is not None else None
    return AnswerCheck(fixture, answer, run_assertions(fixture, answer), provenance, records)
