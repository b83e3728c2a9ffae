"""What deterministic scoring reads off one stored answer before any judge is asked: the fixture's
validity-gate report, the provenance ladder over its numbers, and the assertions. Pure: the executing
worker scores a judge-less sweep with it inline, the scorer does the same before calling judges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from afpbench.fixtures.schema import Fixture
from afpbench.scoring.assertions import AssertionOutcome, run_assertions
from afpbench.scoring.provenance import CalculatorCall, trace_provenance
from afpbench.scoring.validity import ValidityFailure, ValidityReport
from afpbench.scoring.verdict import DisputeRule, PassRule, Verdict, decide


def validity_of(reports: dict[str, Any], fixture_key: str, fixture_id: str) -> ValidityReport:
    stored = reports.get(fixture_id, {"passed": True, "failures": []})
    return ValidityReport(
        fixture_key, stored["passed"], [ValidityFailure(f["check"], f["detail"]) for f in stored["failures"]]
    )


def provenance_for(fixture: Fixture, tool_calls: list[dict[str, Any]], output_text: str | None) -> dict[str, Any]:
    """`tool_calls` are the attempt's calculator records as executed; `output_text` its final answer.
    Only numeric fixtures have a ladder."""
    if fixture.numeric is None:
        raise ValueError(f"{fixture.key}: provenance needs a numeric fixture")
    calls = [
        CalculatorCall(expression=r.get("expression") or r.get("arguments_raw") or "", result=r.get("result"))
        for r in tool_calls
    ]
    # Tool-call records came from the serving layer (the provider's response), not the model's prose.
    report = trace_provenance(fixture.numeric, calls, output_text or "", bool(tool_calls))
    record = report.as_record()
    record["originated"] = list(report.originated)
    record["evidence_class"] = report.evidence_class.value
    return record


@dataclass(frozen=True)
class Evidence:
    """What deterministic scoring reads off one stored answer, before any judge is asked."""

    validity: ValidityReport
    response: str
    provenance: dict[str, Any] | None
    assertions: AssertionOutcome
    pass_rule: PassRule
    dispute_rule: DisputeRule
    attempt_id: int | None
    truncated: bool

    def details(self, verdict: Verdict, judges: list[str]) -> dict[str, Any]:
        return {
            "attempt_id": self.attempt_id,
            "assertions": [r.__dict__ for r in self.assertions.results],
            "proposed_fatal": self.assertions.proposed_fatal,
            "provenance": self.provenance,
            "dispute_reasons": verdict.dispute_reasons,
            "judges": judges,
            "truncated": self.truncated,
        }


def gather_evidence(
    fixture: Fixture, reports: dict[str, Any], pass_rule: PassRule, dispute_rule: DisputeRule,
    attempt_id: int | None, output_text: str | None, tool_calls: list[dict[str, Any]], truncated: bool,
) -> Evidence:
    """Validity, provenance and assertions for one answer: pure, so the executing worker can score a
    judge-less sweep inline and the scorer can do the same before calling judges."""
    response = output_text or ""
    provenance = provenance_for(fixture, tool_calls, response) if fixture.numeric is not None else None
    return Evidence(
        validity=validity_of(reports, fixture.key, fixture.id),
        response=response,
        provenance=provenance,
        assertions=run_assertions(fixture, response),
        pass_rule=pass_rule,
        dispute_rule=dispute_rule,
        attempt_id=attempt_id,
        truncated=truncated,
    )


def decide_without_judges(evidence: Evidence) -> Verdict:
    return decide("answered", evidence.validity, evidence.assertions, [], 0,
                  pass_rule=evidence.pass_rule, dispute_rule=evidence.dispute_rule)

