"""How strong the evidence is that a computation was actually invoked (EV-0 .. EV-3).

- EV-0: no signal (no tool-call records and no claim in the prose).
- EV-1: the system's own report: prose claiming it calculated / used a calculator, or an attestation we
  cannot verify. The party being measured is the one speaking, so this ranks below EV-2.
- EV-2: tool-call records returned by the serving layer (a third party to the model).
- EV-3: verified attestation. Defined so reports can name it, never emitted: constructing an
  EvidenceVerdict with EV-3 raises, whatever code path attempts it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class EvidenceClass(StrEnum):
    EV0 = "EV-0"
    EV1 = "EV-1"
    EV2 = "EV-2"
    EV3 = "EV-3"


class EvidenceClassError(RuntimeError):
    """An attempt to emit an evidence class this implementation cannot support (EV-3)."""


@dataclass(frozen=True)
class EvidenceVerdict:
    evidence_class: EvidenceClass
    reason: str

    def __post_init__(self) -> None:
        # Module guard: nothing here can verify an attestation against a sealed key and ledger.
        if EvidenceClass(self.evidence_class) is EvidenceClass.EV3:
            raise EvidenceClassError("EV-3 (verified attestation) is defined but never emitted by afpbench")


# Past-tense first-person claims of having computed, or mentions of the calculator's output. Intentions
# ("let me calculate") and method descriptions ("interest is calculated as ...") are not claims.
_SELF_REPORT = [
    re.compile(
        r"\b(?:i|we)(?:'ve|\s+have)?\s+(?:just\s+|already\s+|now\s+)?"
        r"(?:calculated|computed|recalculated|recomputed|double-checked|verified)\b",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?:i|we)(?:'ve|\s+have)?\s+(?:used|ran|run|called|invoked|performed)\b[^.\n]{0,40}?"
        r"\b(?:calculator|calculation|computation|tool)s?\b",
        re.IGNORECASE,
    ),
    re.compile(r"\b(?:using|with|via)\s+(?:the\s+|a\s+|my\s+)?calculator\b", re.IGNORECASE),
    re.compile(
        r"\bcalculator\s+(?:returned|returns|gave|gives|shows|showed|output|outputs|confirms|confirmed)\b",
        re.IGNORECASE,
    ),
]
# An attestation the response carries about its own execution (not a document that "attests" something).
_ATTESTATION = re.compile(
    r"\b(?:(?:i|we)\s+attest|(?:execution|computation|signed)\s+attestation)\b", re.IGNORECASE
)


def classify_evidence(serving_layer_tool_records: bool, text: str) -> tuple[EvidenceClass, str]:
    """EV-2 if the serving layer returned tool-call records; EV-1 if the prose claims a computation
    (or carries an unverified attestation); EV-0 otherwise. Never EV-3."""
    if serving_layer_tool_records:
        verdict = EvidenceVerdict(EvidenceClass.EV2, "tool-call records returned by the serving layer")
    elif _ATTESTATION.search(text or ""):
        verdict = EvidenceVerdict(
            EvidenceClass.EV1, "attestation encountered; attestations are not verified, classified EV-1"
        )
    else:
        claim = next((m for p in _SELF_REPORT if (m := p.search(text or ""))), None)
        if claim is not None:
            verdict = EvidenceVerdict(
                EvidenceClass.EV1, f"self-report without tool records: {claim.group(0).strip()!r}"
            )
        else:
            verdict = EvidenceVerdict(EvidenceClass.EV0, "no tool records and no claim of computation")
    return verdict.evidence_class, verdict.reason
