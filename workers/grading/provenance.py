"""Feed a stored attempt (calculator calls as executed, final answer) to the provenance ladder."""

from __future__ import annotations

from afpbench.fixtures.schema import Fixture
from afpbench.scoring.provenance import CalculatorCall, trace_provenance


def provenance_for(fixture: Fixture, tool_calls: list[dict], output_text: str | None) -> dict:
    """`tool_calls` are the attempt's calculator records as executed; `output_text` its final answer."""
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
