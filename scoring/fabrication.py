"""From the provenance ladder to the verdict: what the ladder proposes, and what the judge is shown.

Proposal (docs/PROTOCOL.md, "Provenance reaches the verdict"). The key figure is the answer figure
(figure identification). The ladder proposes the fixture's fabrication fatal (`fabricated_fact`) when
the key figure rests on a number the fixture does not hold:
- the answer figure is originated, or it is grounded only by coincidence while every calculator call
  that returned it (raw, or rounded as declared) is originated; and
- the computation behind it holds a made-up number: an originated operand of a call that produced it,
  followed back through ungrounded chains; when no call produced it (worked in prose), an originated
  operand of any call or another originated figure the answer releases ("47 days", "/ 360").
A made-up number is one the ladder cannot explain otherwise: a grounded value rounded some other way
(a shortened copy of a return, 276.97 for 276.9617...), a negated source, or digits that occur verbatim
in the task or evidence are explained. A wrong figure with nothing made up behind it (an arithmetic or
rounding slip, a bare figure without working) is a wrong answer for the judges to score, not evidence
of a fabricated fact: proposing it would turn a plain fail into a dispute, out of the denominator.

A proposal is treated exactly like a fatal-prohibition hit: the judges must confirm it; a judge that
rejects it leads to the blind swapped re-judge, then to a human (scoring/verdict.py). A fixture that
declares no `fabricated_fact` criterion gets the finding recorded but nothing proposed (its judges are
never asked about that criterion). No answer figure (declined, ambiguous, none) proposes nothing.

Judge listing. The judge is shown every originated operand and released figure, labelled with where
it occurs, except non-negative ones whose digits occur verbatim in what the model saw ("§ 288(2)", a
year, a section number): such a figure is in the evidence, and calling it untraceable would mislead
the judge. The ladder's own record keeps them as originated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, ROUND_HALF_DOWN, ROUND_HALF_EVEN, ROUND_HALF_UP, ROUND_UP, Decimal
from typing import Any

from afpbench.fixtures.schema import FatalCriterionId, Fixture
from afpbench.scoring.calculator import ROUNDING_MODES
from afpbench.scoring.provenance import CallTrace, OperandTrace, ProvenanceReport, rounded_to
from afpbench.scoring.render import render_user_message

FABRICATION = FatalCriterionId.fabricated_fact.value
_NUMBER_CORE = re.compile(r"\d[\d,]*(?:\.\d+)?|\.\d+")
_MODES = (ROUND_HALF_UP, ROUND_HALF_EVEN, ROUND_HALF_DOWN, ROUND_DOWN, ROUND_UP)
_ROUNDINGS = [(places, mode) for places in range(11) for mode in _MODES]  # declared places are 0..10


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
        self.seen = render_user_message(fixture)
        policy = report.reference.quantisation
        self.declared = (policy.places, ROUNDING_MODES[policy.rounding])
        grounded = [(f"call#{c.index}", c.result) for c in report.calls if c.status == "grounded"]
        reference = [(f"intermediate:{i}", v) for i, v in report.reference.intermediates.items()]
        self.known = [(name, v) for name, v in grounded + reference if v is not None]

    def producers(self, value: Decimal, roundings: list[tuple[int, str]]) -> list[CallTrace]:
        """Calls whose return equals `value` raw or under one of `roundings`."""
        return [
            c for c in self.report.calls
            if c.result is not None
            and (c.result == value or any(rounded_to(c.result, p, m) == value for p, m in roundings))
        ]

    def explanation(self, text: str, value: Decimal, findings: list[str]) -> str | None:
        """Why an originated number is not made up, or None when nothing explains it."""
        if "sign_inversion" in findings:
            return "a negated source value or constant"
        if value >= 0 and in_evidence(text, self.seen):
            return "its digits occur verbatim in the task or evidence"
        for name, v in self.known:
            for places, mode in _ROUNDINGS:
                if v != value and rounded_to(v, places, mode) == value:
                    return f"{name} ({v}) rounded to {places} places"
        return None

    def behind(self, value: Decimal) -> tuple[list[int], list[str]]:
        """The originated calls that produced `value` and the made-up operands among them, following
        ungrounded chains and near misses back to where the number was first written."""
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
            roundings = _ROUNDINGS  # upstream, a near miss may be any rounding of a return
        return sorted(calls), made_up

    def _follow(self, op: OperandTrace, made_up: list[str]) -> list[Decimal]:
        if op.grounded:
            return []
        chained = "ungrounded_chain" in op.findings or "near_miss" in op.findings
        if not chained and self.explanation(op.text, op.value, op.findings) is None and op.text not in made_up:
            made_up.append(op.text)
        return [op.value] if chained else []

    def made_up_elsewhere(self) -> list[str]:
        """Made-up numbers anywhere in the session, for an answer figure no call produced."""
        found = [
            op.text
            for c in self.report.calls
            for op in c.operands
            if not op.grounded and "ungrounded_chain" not in op.findings
            and self.explanation(op.text, op.value, op.findings) is None
        ]
        found += [
            f.text
            for f in self.report.figures
            if not f.grounded and not f.is_answer and "ungrounded_chain" not in f.findings
            and self.explanation(f.text, f.value, f.findings) is None
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
        made_up = session.made_up_elsewhere()
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
        cause = None if trace.grounded else session.explanation(trace.text, trace.value, trace.findings)
        why += f"; nothing behind it is made up{f' (it is {cause})' if cause else ''}, so nothing is proposed"
        return FabricationFinding(None, "explained", trace.text, calls, [], why)
    why += f"; made-up number(s) behind it: {', '.join(made_up)}"
    declared = FABRICATION in fixture.fatal_ids()
    if not declared:
        why += f"; the fixture declares no {FABRICATION} criterion, so nothing is proposed"
    return FabricationFinding(FABRICATION if declared else None, basis, trace.text, calls, made_up, why)


def in_evidence(text: str, seen: str) -> bool:
    """The figure's digits occur in what the model saw as a whole number (not inside 1288 or 2.88)."""
    core = _NUMBER_CORE.search(text)
    if core is None:
        return False
    forms = {core.group(0), core.group(0).replace(",", "")}
    return any(re.search(rf"(?<!\d)(?<!\d[.,]){re.escape(f)}(?!\d)(?![.,]\d)", seen) for f in forms)


def untraceable_for_judge(fixture: Fixture, report: ProvenanceReport) -> list[str]:
    """Originated operands and released figures as listed to the judge, each with where it occurs;
    non-negative ones whose digits are verbatim in the task or evidence are left out."""
    seen = render_user_message(fixture)
    entries: list[str] = []
    for call in report.calls:
        expression = " ".join(call.expression.split())
        for op in call.operands:
            if not op.grounded and not (op.value >= 0 and in_evidence(op.text, seen)):
                entries.append(f"{op.text} (operand of calculator call {call.index}: {expression})")
    for fig in report.figures:
        if not fig.grounded and not (fig.value >= 0 and in_evidence(fig.text, seen)):
            entries.append(f"{fig.text} (released figure{', the answer figure' if fig.is_answer else ''})")
    return list(dict.fromkeys(entries))
