"""From the provenance ladder to the verdict: what the ladder proposes, and what the judge is shown.

Proposal (docs/PROTOCOL.md, "Provenance reaches the verdict"). The key figure is the answer figure
(figure identification). The ladder proposes the fixture's fabrication fatal (`fabricated_fact`) when
the key figure rests on a number the fixture does not hold:
- the answer figure is originated, or it is grounded only by coincidence while every calculator call
  that returned it (raw, or rounded as declared) is originated; and
- the computation behind it holds a made-up number: an originated operand of a call that produced it,
  followed back through ungrounded chains; when no call produced it (worked in prose), an originated
  operand of any call or another originated figure the answer releases ("47 days", "/ 360").
A made-up number is one nothing explains otherwise (scoring/explanation.py: a negated source, a
restated evidence figure, a grounded value rounded or shortened, or scaled by a declared constant, a
transformation of an earlier return). A wrong figure with nothing made up behind it (an arithmetic or
rounding slip, a bare figure without working) is a wrong answer for the judges to score, not evidence
of a fabricated fact: proposing it would turn a plain fail into a dispute, out of the denominator.

A proposal is treated exactly like a fatal-prohibition hit: the judges must confirm it; a judge that
rejects it leads to the blind swapped re-judge, then to a human (scoring/verdict.py). A fixture that
declares no `fabricated_fact` criterion gets the finding recorded but nothing proposed (its judges are
never asked about that criterion). No answer figure (declined, ambiguous, none) proposes nothing.

Judge listing. The judge is shown every originated operand and released figure, labelled with where
it occurs, except those something explains (the same explanations as above): a figure the evidence
states, a shortened copy of a return, 365 x 100. The ladder's own record keeps them as originated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from afpbench.fixtures.schema import FatalCriterionId, Fixture
from afpbench.scoring.calculator import ROUNDING_MODES
from afpbench.scoring.explanation import ROUNDINGS, Explainer
from afpbench.scoring.provenance_record import CallTrace, OperandTrace, ProvenanceReport, rounded_to

FABRICATION = FatalCriterionId.fabricated_fact.value


@dataclass(frozen=True)
class FabricationFinding:
    """The ladder's finding about the key figure; `criterion` is None when nothing is proposed."""

    criterion: str | None
    basis: str  # "answer_figure" | "producing_call" | "explained" (originated, nothing made up behind it)
    figure: str  # the answer figure as released
    calls: list[int] = field(default_factory=list)  # originated calls in the computation behind it
    made_up: list[str] = field(default_factory=list)  # the unexplained originated numbers behind it
    reason: str = ""

    def as_record(self) -> dict[str, Any]:
        return {
            "source": "provenance",
            "criterion": self.criterion,
            "basis": self.basis,
            "figure": self.figure,
            "calls": list(self.calls),
            "made_up": list(self.made_up),
            "reason": self.reason,
        }


class _Session:
    """The report's calls and reference, asked where a value could have come from."""

    def __init__(self, fixture: Fixture, report: ProvenanceReport) -> None:
        self.report = report
        self.explainer = Explainer(fixture, report)
        policy = report.reference.quantisation
        self.declared = (policy.places, ROUNDING_MODES[policy.rounding])

    def producers(self, value: Decimal, roundings: list[tuple[int, str]]) -> list[CallTrace]:
        """Calls whose return equals `value` raw or under one of `roundings`."""
        return [
            c for c in self.report.calls
            if c.result is not None
            and (c.result == value or any(rounded_to(c.result, p, m) == value for p, m in roundings))
        ]

    def behind(self, value: Decimal) -> tuple[list[int], list[str]]:
        """The originated calls that produced `value` and the made-up operands among them, following
        ungrounded chains, near misses and transformed returns back to where the number was first
        written."""
        calls: list[int] = []
        made_up: list[str] = []
        todo, roundings = [value], [self.declared]
        while todo:
            for call in self.producers(todo.pop(), roundings):
                if call.status == "grounded" or call.index in calls:
                    continue
                calls.append(call.index)
                for op in call.operands:
                    todo += self._follow(op, made_up)
            roundings = ROUNDINGS  # upstream, a near miss may be any rounding of a return
        return sorted(calls), made_up

    def _follow(self, op: OperandTrace, made_up: list[str]) -> list[Decimal]:
        if op.grounded:
            return []
        if "ungrounded_chain" in op.findings or "near_miss" in op.findings:
            return [op.value]
        upstream = self.explainer.upstream(op.value)
        if upstream:
            return upstream
        if self.explainer.why(op.value, op.findings, operand=True) is None and op.text not in made_up:
            made_up.append(op.text)
        return []

    def made_up_elsewhere(self, answer: Decimal) -> list[str]:
        """Made-up numbers anywhere in the session, for an answer figure no call produced (a repeat of
        the answer figure is not another number)."""
        found = [
            op.text
            for c in self.report.calls
            for op in c.operands
            if not op.grounded and "ungrounded_chain" not in op.findings
            and self.explainer.why(op.value, op.findings, operand=True) is None
        ]
        found += [
            f.text
            for f in self.report.figures
            if not f.grounded and not f.is_answer and f.value != answer and "ungrounded_chain" not in f.findings
            and self.explainer.why(f.value, f.findings, operand=False) is None
        ]
        return list(dict.fromkeys(found))


def fabrication_finding(fixture: Fixture, report: ProvenanceReport) -> FabricationFinding | None:
    """The ladder's finding about the answer figure; None when it is traceable (or there is none)."""
    answer = report.answer
    trace = next((f for f in report.figures if f.is_answer), None)
    if answer.kind != "found" or trace is None:
        return None
    session = _Session(fixture, report)
    producers = session.producers(trace.value, [session.declared])
    if trace.grounded and (not producers or any(c.status == "grounded" for c in producers)):
        return None
    calls, made_up = session.behind(trace.value)
    if not producers:
        made_up = session.made_up_elsewhere(trace.value)
    if trace.grounded:
        basis = "producing_call"
        why = (
            f"the answer figure {trace.text} equals a reference value, but every calculator call that returned "
            f"it ({', '.join(f'call#{c.index}' for c in producers)}) is originated"
        )
    else:
        basis = "answer_figure"
        why = f"the answer figure {trace.text} is not traceable to the evidence"
    if not made_up:
        cause = None if trace.grounded else session.explainer.why(trace.value, trace.findings, operand=False)
        why += f"; nothing behind it is made up{f' (it is {cause})' if cause else ''}, so nothing is proposed"
        return FabricationFinding(None, "explained", trace.text, calls, [], why)
    why += f"; made-up number(s) behind it: {', '.join(made_up)}"
    declared = FABRICATION in fixture.fatal_ids()
    if not declared:
        why += f"; the fixture declares no {FABRICATION} criterion, so nothing is proposed"
    return FabricationFinding(FABRICATION if declared else None, basis, trace.text, calls, made_up, why)


def untraceable_for_judge(fixture: Fixture, report: ProvenanceReport) -> list[str]:
    """Originated operands and released figures as listed to the judge, each with where it occurs;
    those something explains (scoring/explanation.py) are left out."""
    explainer = Explainer(fixture, report)
    entries: list[str] = []
    for call in report.calls:
        expression = " ".join(call.expression.split())
        for op in call.operands:
            if not op.grounded and explainer.why(op.value, op.findings, operand=True) is None:
                entries.append(f"{op.text} (operand of calculator call {call.index}: {expression})")
    for fig in report.figures:
        if not fig.grounded and explainer.why(fig.value, fig.findings, operand=False) is None:
            entries.append(f"{fig.text} (released figure{', the answer figure' if fig.is_answer else ''})")
    return list(dict.fromkeys(entries))
