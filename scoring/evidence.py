"""What deterministic scoring reads off one stored answer before any judge is asked: the fixture's
validity-gate report, the provenance ladder over its numbers, and the assertions. Pure: the executing
worker scores a judge-less sweep with it inline, the scorer does the same before calling judges.

The deterministic layer's fatal proposals are the assertions' and the ladder's together: the ladder's
(scoring/fabrication.py) joins `proposed_fatal` under the source name "provenance", so the verdict
treats it exactly like a fatal-prohibition hit (judges confirm it, or the swapped re-judge, or a human).

Two facts about the answer's shape are named, never repaired: a tool call written as text instead of
made through the serving layer (scoring/written_tool_call.py), and a repetition loop at its end
(scoring/repetition.py). Both go into the details and the verdict's rationale (`annotate`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from afpbench.fixtures.schema import Fixture
from afpbench.scoring.assertions import AssertionOutcome, run_assertions
from afpbench.scoring.fabrication import fabrication_finding, untraceable_for_judge
from afpbench.scoring.provenance import CalculatorCall, trace_provenance
from afpbench.scoring.render import tools_for
from afpbench.scoring.repetition import RepetitionLoop, repetition_loop
from afpbench.scoring.rules import DisputeRule, PassRule
from afpbench.scoring.validity import ValidityFailure, ValidityReport
from afpbench.scoring.verdict import PROVENANCE_SOURCE, Verdict, decide
from afpbench.scoring.written_tool_call import WrittenToolCalls, written_tool_calls


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
    record["untraceable"] = untraceable_for_judge(fixture, report)
    finding = fabrication_finding(fixture, report)
    record["fabrication"] = finding.as_record() if finding else None
    return record


def with_provenance_proposal(assertions: AssertionOutcome, provenance: dict[str, Any] | None) -> AssertionOutcome:
    """The assertions' outcome plus the ladder's proposal, if it makes one, as source "provenance"."""
    criterion = ((provenance or {}).get("fabrication") or {}).get("criterion")
    if not criterion:
        return assertions
    return replace(assertions, proposed_fatal=[*assertions.proposed_fatal, (PROVENANCE_SOURCE, criterion)])


# What a scoring run read off the answer itself (not the verdict): a human decision's Result row carries
# these over from the row it follows, so a decided cell still shows them (workers/grading/adjudication.py).
ANSWER_RECORD = ("attempt_id", "assertions", "proposed_fatal", "provenance", "truncated", "written_tool_call",
                 "repetition_loop")


def answer_record(details: dict[str, Any] | None) -> dict[str, Any]:
    """The ANSWER_RECORD part of a Result's stored details (absent keys left out)."""
    return {k: details[k] for k in ANSWER_RECORD if k in (details or {})} if details else {}


@dataclass(frozen=True)
class Evidence:
    """What deterministic scoring reads off one stored answer, before any judge is asked."""

    validity: ValidityReport
    response: str
    provenance: dict[str, Any] | None
    assertions: AssertionOutcome  # with the ladder's proposal among proposed_fatal (source "provenance")
    pass_rule: PassRule
    dispute_rule: DisputeRule
    attempt_id: int | None
    truncated: bool
    written_tool_call: WrittenToolCalls | None = None
    repetition: RepetitionLoop | None = None

    @property
    def untraceable(self) -> list[str]:
        """What the judge is shown as not traceable to the evidence (figures verbatim in it left out)."""
        return list((self.provenance or {}).get("untraceable") or [])

    def details(self, verdict: Verdict, judges: list[str]) -> dict[str, Any]:
        """The scorer's record in a Result row; the keys of ANSWER_RECORD are about the answer itself."""
        return {
            "attempt_id": self.attempt_id,
            "assertions": [r.__dict__ for r in self.assertions.results],
            "proposed_fatal": self.assertions.proposed_fatal,
            "provenance": self.provenance,
            "dispute_reasons": verdict.dispute_reasons,
            "judges": judges,
            "truncated": self.truncated,
            "written_tool_call": self.written_tool_call.as_record() if self.written_tool_call else None,
            "repetition_loop": self.repetition.as_record() if self.repetition else None,
        }

    def notes(self) -> list[str]:
        """What the answer's shape says, for the verdict's rationale."""
        notes = [self.written_tool_call.describe()] if self.written_tool_call else []
        if self.repetition:
            notes.append(f"the answer ends in a {self.repetition.describe()}")
        return notes

    def annotate(self, verdict: Verdict) -> Verdict:
        """The verdict with the answer's shape named in its rationale (the state is unchanged)."""
        notes = self.notes()
        return replace(verdict, rationale="; ".join([verdict.rationale, *notes])) if notes else verdict


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
        assertions=with_provenance_proposal(run_assertions(fixture, response), provenance),
        pass_rule=pass_rule,
        dispute_rule=dispute_rule,
        attempt_id=attempt_id,
        truncated=truncated,
        written_tool_call=written_tool_calls(response, [t["name"] for t in tools_for(fixture)]),
        repetition=repetition_loop(response),
    )


def decide_without_judges(evidence: Evidence) -> Verdict:
    return evidence.annotate(decide("answered", evidence.validity, evidence.assertions, [], 0,
                                    pass_rule=evidence.pass_rule, dispute_rule=evidence.dispute_rule))

