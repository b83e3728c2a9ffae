"""Evidence of invocation (PROVENANCE.md): EV-0..EV-2 emitted, EV-3 defined but never constructed."""

from __future__ import annotations

import pytest

from afpbench.scoring.evidence_class import EvidenceClass, EvidenceClassError, EvidenceVerdict, classify_evidence


def test_ev3_construction_raises():
    """Rule: EV-3 (verified attestation) is defined and never emitted: constructing one raises."""
    with pytest.raises(EvidenceClassError):
        EvidenceVerdict(EvidenceClass.EV3, "signed attestation")
    with pytest.raises(EvidenceClassError):
        EvidenceVerdict("EV-3", "by value")  # type: ignore[arg-type]


def test_ev3_is_defined_with_its_label():
    assert EvidenceClass.EV3.value == "EV-3"
    assert [c.value for c in EvidenceClass] == ["EV-0", "EV-1", "EV-2", "EV-3"]


def test_ev2_when_serving_layer_returned_tool_records():
    """Rule: tool-call records from the serving layer (a third party to the model) are EV-2."""
    cls, reason = classify_evidence(True, "The answer is 760.")
    assert cls is EvidenceClass.EV2
    assert "serving layer" in reason


@pytest.mark.parametrize(
    "text",
    [
        "I calculated the interest as 760.",
        "We have computed the total below.",
        "I used the calculator to get 760.",
        "Using the calculator, 15,200 x 0.05 = 760.",
        "The calculator returned 760.",
        "I've verified the figure twice.",
    ],
)
def test_ev1_when_prose_claims_computation_without_records(text):
    """Rule: the system's own report of computing, without records, is EV-1 (self-report)."""
    cls, reason = classify_evidence(False, text)
    assert cls is EvidenceClass.EV1
    assert "self-report" in reason


def test_attestation_without_records_is_ev1_not_ev3():
    """Rule: an attestation encountered is classified EV-1 with the reason recorded."""
    cls, reason = classify_evidence(False, "Signed attestation: this result was computed by tool X.")
    assert cls is EvidenceClass.EV1
    assert "attestation" in reason


@pytest.mark.parametrize(
    "text",
    [
        "The interest is 760.",
        "Let me calculate the interest.",
        "Interest is calculated as principal x rate.",
        "",
    ],
)
def test_ev0_without_records_or_claims(text):
    """Rule: no tool records and no claim of having computed is EV-0 (no signal)."""
    assert classify_evidence(False, text)[0] is EvidenceClass.EV0


def test_classify_never_returns_ev3():
    for records in (True, False):
        for text in ("I attest this was computed.", "verified attestation", "nothing"):
            assert classify_evidence(records, text)[0] is not EvidenceClass.EV3
