"""P08 with the calculator offered, against a real llama.cpp server (the `local_model_server` fixture).

Whatever the model does is recorded and classified as it is, never repaired:
- a real `tool_calls` round: the serving layer's record, evidence class EV-2 once the harness ran it;
- a tool call written as text (bare JSON or a ```json fence in `content`, what these Qwen models do
  through llama.cpp): flagged as a written call, no calculator result exists for it, and its evidence
  class is not EV-2 (nothing came from the serving layer);
- no call: neither.
The released figures' provenance is the ladder's on the text as answered (scoring/evidence.py).
"""

from __future__ import annotations

import pytest

from afpbench.fixtures.loader import load_fixture
from afpbench.reference.loader import load_instructions
from afpbench.scoring.evidence import decide_without_judges, gather_evidence
from afpbench.scoring.render import render
from afpbench.scoring.rules import DisputeRule, PassRule
from afpbench.scoring.validity import ValidityReport
from afpbench.scoring.written_tool_call import written_tool_calls
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.types import ChatRequest, OutcomeClass
from afpbench.workers.sweeps.endpoints import endpoint_for
from afpbench.workers.sweeps.spec import ModelSpec

pytestmark = pytest.mark.realmodel


@pytest.mark.parametrize("condition", ["A", "D"])
def test_p08_with_the_calculator_is_classified_as_the_model_answered(local_model_server, condition):
    fixture = load_fixture("P08")
    prompt = render(condition, fixture, load_instructions().text(condition))
    messages = ([{"role": "system", "content": prompt.system}] if prompt.system else []) + [
        {"role": "user", "content": prompt.user}]
    model = ModelSpec(provider="openai-compatible", model=local_model_server.model_name,
                      base_url=local_model_server.base_url, params={"temperature": 0, "max_tokens": 400},
                      timeout_s=600)
    result = adapter_for(model.provider).call(endpoint_for(model), ChatRequest(messages, prompt.tools))
    assert result.outcome in (OutcomeClass.answer, OutcomeClass.tool_call, OutcomeClass.truncated), result.error
    assert result.request_sent["json"]["tools"][0]["function"]["name"] == "calculator"
    written = written_tool_calls(result.text, ["calculator"])
    # The harness never turns written text into a call: what the serving layer returned is all there is.
    served = [{"expression": (c.arguments or {}).get("expression"), "arguments_raw": c.arguments_raw}
              for c in result.tool_calls]
    evidence = gather_evidence(fixture, {}, PassRule(), DisputeRule(), None, result.text, served,
                               result.outcome == OutcomeClass.truncated)
    assert isinstance(evidence.validity, ValidityReport)
    provenance = evidence.provenance or {}
    verdict = decide_without_judges(evidence)  # no judge here: GRADER_DISPUTE, with the answer's shape named
    record = evidence.details(verdict, [])
    if result.tool_calls:
        kind = "tool_calls round"
        assert provenance["evidence_class"] == "EV-2"
    elif written:
        kind = "tool call written as text"
        assert record["written_tool_call"] == written.as_record()
        assert written.describe() in verdict.rationale
        assert provenance["evidence_class"] != "EV-2"
    else:
        kind = "no call"
        assert record["written_tool_call"] is None and provenance["evidence_class"] != "EV-2"
    print(f"P08 {condition}: {kind}; evidence class {provenance['evidence_class']}; "
          f"originated {provenance.get('originated')}; finish {result.finish_reason}")

