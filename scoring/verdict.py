"""From execution outcome, validity, assertions and judgements to one of the six result states.

Order of decision (first that applies wins):
1. validity gate failed -> INVALID_TEST, naming the failed checks;
2. provider_block -> PROVIDER_BLOCK; infra_error -> INFRA_ERROR;
3. no judge configured -> GRADER_DISPUTE: the rubric needs a judge, and an assertion alone never
   decides a fatal verdict (a deterministic hit only proposes one), so a human must decide;
4. a judge whose output was unusable (unparseable, or quotes not in the response) after the caller's
   bounded retries -> GRADER_DISPUTE, never a fail;
5. dispute triggers on the first round -> needs_rejudge (state GRADER_DISPUTE until then); the caller
   re-judges blind with the order swapped and calls again with `swapped`. The swapped round then
   replaces the first: if it still triggers a dispute -> GRADER_DISPUTE for a human;
6. agreement -> combine scores per dimension with the median-low of the judges (one judge: its scores;
   two: the lower, which is conservative; three or more: the middle, robust to one outlier), cap each
   dimension with an invariant miss at 1, and apply the sealed pass rule. A fatal criterion counts when
   more than half of the judges flag it (with fatal-flag disputes on, that means all of them), and a
   deterministic hit counts only as confirmed by those flags. Fatal -> MODEL_FAIL whatever the total.

Deterministic proposals come from fatal-prohibition assertions (named by assertion id) and from the
provenance ladder (named PROVENANCE_SOURCE, scoring/fabrication.py); both take the same path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median_low

from afpbench.fixtures.schema import FatalCriterionId
from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.scoring.assertions import AssertionOutcome
from afpbench.scoring.judge import Judgement
from afpbench.scoring.rules import DisputeRule, PassRule
from afpbench.scoring.states import ResultState
from afpbench.scoring.validity import ValidityReport

EXECUTION_OUTCOMES = ("answered", "provider_block", "infra_error")
PROVENANCE_SOURCE = "provenance"  # the ladder's fatal proposal in AssertionOutcome.proposed_fatal
_FATAL_ORDER = [c.value for c in FatalCriterionId]


@dataclass(frozen=True)
class Verdict:
    state: ResultState
    scores: dict[str, int] | None = None
    total: int | None = None
    fatal_criterion: str | None = None
    rationale: str = ""
    needs_rejudge: bool = False
    dispute_reasons: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class HumanDecision:
    reviewer: str
    state: ResultState
    note: str
    scores: dict[str, int] | None = None
    fatal_criterion: str | None = None


def _proposal(source: str, criterion: str) -> str:
    if source == PROVENANCE_SOURCE:
        return f"provenance ladder proposes {criterion} (the answer figure or an operand behind it is originated)"
    return f"deterministic fatal prohibition {source} ({criterion}) hit"


def _capped(scores: dict[str, int], assertions: AssertionOutcome | None) -> dict[str, int]:
    capped = dict(scores)
    for _, dim in assertions.invariant_misses if assertions else []:
        capped[dim] = min(capped[dim], 1)
    return capped


def _dispute_reasons(
    judgements: Sequence[Judgement],
    assertions: AssertionOutcome | None,
    rule: DisputeRule,
    pass_rule: PassRule,
) -> list[str]:
    reasons: list[str] = []
    label = [f"judge {i + 1}" for i in range(len(judgements))]
    if rule.pass_fail_disagreement and len(judgements) > 1:
        outcomes = [pass_rule.passes(_capped(j.scores, assertions), bool(j.flagged())) for j in judgements]
        if len(set(outcomes)) > 1:
            said = ", ".join(f"{n}: {'pass' if o else 'fail'}" for n, o in zip(label, outcomes, strict=True))
            reasons.append(f"judges disagree on pass/fail ({said})")
    if rule.fatal_flag_disagreement and len(judgements) > 1:
        for cid in _FATAL_ORDER:
            flags = [j.fatal_flags.get(cid, False) for j in judgements]
            if len(set(flags)) > 1:
                who = ", ".join(n for n, f in zip(label, flags, strict=True) if f)
                reasons.append(f"judges disagree on fatal criterion {cid} (flagged by {who} only)")
    if rule.deterministic_fatal_rejected and assertions:
        for aid, cid in assertions.proposed_fatal:
            rejecting = [n for n, j in zip(label, judgements, strict=True) if not j.fatal_flags.get(cid)]
            if rejecting:
                who = ", ".join(rejecting)
                reasons.append(f"{_proposal(aid, cid)} but not flagged by {who}")
    if len(judgements) > 1:
        for dim in DIMENSIONS:
            values = [j.scores[dim] for j in judgements]
            if max(values) - min(values) >= rule.dimension_gap:
                reasons.append(f"judges' {dim} scores differ by {max(values) - min(values)} ({values})")
    return reasons


def _agreed(
    judgements: Sequence[Judgement], assertions: AssertionOutcome | None, pass_rule: PassRule
) -> Verdict:
    combined: dict[str, int] = {d: median_low([j.scores[d] for j in judgements]) for d in DIMENSIONS}
    scores = _capped(combined, assertions)
    misses = assertions.invariant_misses if assertions else []
    notes = [f"{d} capped at 1 by invariant {aid}" for aid, d in misses]
    # More than half of the judges; with fatal-flag disputes on, disagreement never gets here.
    flag_counts = {c: sum(bool(j.fatal_flags.get(c)) for j in judgements) for c in _FATAL_ORDER}
    fatal = [c for c in _FATAL_ORDER if 2 * flag_counts[c] > len(judgements)]
    total, lowest = sum(scores.values()), min(scores.values())
    if fatal:
        state, why = ResultState.MODEL_FAIL, f"fatal criterion {', '.join(fatal)} agreed by the judges"
    elif pass_rule.passes(scores, fatal=False):
        state, why = ResultState.MODEL_PASS, f"no fatal, lowest dimension {lowest}, total {total}"
    else:
        state = ResultState.MODEL_FAIL
        why = (
            f"pass rule not met: lowest dimension {lowest} (need >= {pass_rule.min_dimension}), "
            f"total {total} (need >= {pass_rule.min_total})"
        )
    rationale = "; ".join([why, *notes, f"{len(judgements)} judge(s) agree"])
    return Verdict(state, scores, total, fatal[0] if fatal else None, rationale)


def _dispute(reasons: list[str], rationale: str, needs_rejudge: bool = False) -> Verdict:
    return Verdict(
        ResultState.GRADER_DISPUTE, rationale=rationale, needs_rejudge=needs_rejudge, dispute_reasons=reasons
    )


def decide(
    execution: str,
    validity: ValidityReport,
    assertions: AssertionOutcome | None,
    judgements: Sequence[Judgement],
    parse_failures: int = 0,
    swapped: Sequence[Judgement] | None = None,
    swapped_parse_failures: int = 0,
    pass_rule: PassRule | None = None,
    dispute_rule: DisputeRule | None = None,
) -> Verdict:
    """One cell's verdict. `parse_failures` counts judges with no usable judgement after retries."""
    pass_rule = pass_rule or PassRule()
    dispute_rule = dispute_rule or DisputeRule()
    if execution not in EXECUTION_OUTCOMES:
        raise ValueError(f"unknown execution outcome {execution!r}; expected one of {EXECUTION_OUTCOMES}")
    if not validity.passed:
        failed = validity.failed_checks()
        details = "; ".join(f.detail for f in validity.failures)
        rationale = f"validity gate failed: {', '.join(failed)}: {details}"
        return Verdict(ResultState.INVALID_TEST, rationale=rationale)
    if execution == "provider_block":
        return Verdict(ResultState.PROVIDER_BLOCK, rationale="the provider refused or filtered the request")
    if execution == "infra_error":
        return Verdict(ResultState.INFRA_ERROR, rationale="no usable answer was obtained")
    if not judgements and not parse_failures:
        reasons = ["no judge configured"]
        reasons += [
            f"{_proposal(aid, cid)}; a deterministic finding alone never decides a fatal"
            for aid, cid in (assertions.proposed_fatal if assertions else [])
        ]
        return _dispute(reasons, "the rubric cannot be scored without a judge; awaiting a human")
    if parse_failures:
        # "Unusable" covers both: a reply that is not the judgement JSON, and a parsed judgement whose
        # fatal quotes are not in the response (its Judgement rows say which).
        reason = f"{parse_failures} judge(s) gave no usable judgement after retries (see the judgement rows)"
        return _dispute([reason], "a judgement was unusable; awaiting a human")
    reasons = _dispute_reasons(judgements, assertions, dispute_rule, pass_rule)
    if not reasons:
        return _agreed(judgements, assertions, pass_rule)
    if swapped is None:
        return _dispute(reasons, "judges disagree; re-judge blind with the order swapped", needs_rejudge=True)
    if swapped_parse_failures or not swapped:
        n = swapped_parse_failures or len(judgements)
        first = [f"{n} judge(s) gave no usable judgement in the swapped re-judge", *reasons]
        return _dispute(first, "the swapped re-judge was unusable; awaiting a human")
    swapped_reasons = _dispute_reasons(swapped, assertions, dispute_rule, pass_rule)
    if swapped_reasons:
        tagged = [f"after blind order-swapped re-judge: {r}" for r in swapped_reasons]
        return _dispute(tagged, "judges still disagree after the swapped re-judge; awaiting a human")
    verdict = _agreed(swapped, assertions, pass_rule)
    return Verdict(
        verdict.state, verdict.scores, verdict.total, verdict.fatal_criterion,
        verdict.rationale + "; decided by the blind order-swapped re-judge",
    )


def apply_human_decision(decision: HumanDecision, pass_rule: PassRule | None = None) -> Verdict:
    """A human adjudication overrides every judge: the verdict takes the reviewer's state and scores.

    It must still be coherent with the sealed pass rule (a human may not PASS a response below it or
    one they name a fatal criterion for, nor FAIL one whose scores meet it without naming a fatal
    criterion), and it must resolve the cell, so GRADER_DISPUTE is refused.
    """
    pass_rule = pass_rule or PassRule()
    state = ResultState(decision.state)
    if not decision.reviewer.strip() or not decision.note.strip():
        raise ValueError("a human decision needs a reviewer and a note")
    if state == ResultState.GRADER_DISPUTE:
        raise ValueError("a human decision must resolve the dispute, not leave it at GRADER_DISPUTE")
    scores = decision.scores
    if scores is not None:
        bad_value = any(type(v) is not int or not 0 <= v <= 2 for v in scores.values())
        if set(scores) != set(DIMENSIONS) or bad_value:
            raise ValueError(f"human scores must give each of {DIMENSIONS} an integer 0..2, got {scores}")
    if decision.fatal_criterion is not None and decision.fatal_criterion not in _FATAL_ORDER:
        raise ValueError(f"unknown fatal criterion {decision.fatal_criterion!r}")
    if state == ResultState.MODEL_PASS:
        if scores is None or not pass_rule.passes(scores, fatal=decision.fatal_criterion is not None):
            raise ValueError("a human MODEL_PASS needs scores that meet the pass rule and no fatal criterion")
    if state == ResultState.MODEL_FAIL:
        if scores is None and decision.fatal_criterion is None:
            raise ValueError("a human MODEL_FAIL needs scores or a fatal criterion")
        if scores is not None and pass_rule.passes(scores, fatal=decision.fatal_criterion is not None):
            raise ValueError("a human MODEL_FAIL whose scores meet the pass rule must name a fatal criterion")
    return Verdict(
        state,
        scores=dict(scores) if scores is not None else None,
        total=sum(scores.values()) if scores is not None else None,
        fatal_criterion=decision.fatal_criterion,
        rationale=f"human decision by {decision.reviewer}: {decision.note} (overrides the judges)",
    )
