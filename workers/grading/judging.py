"""The one judging routine: the judges asked about one answer, the blind order-swapped re-judge when
they dispute, and the verdict. A sweep's scorer (scorer.py:score_answer) and `afpbench fixtures check
--judge` (answer_judging.py) both call `judged_verdict`; they differ only in their `JudgeSeat`:
how a call is made (the sweep's pool limits and cancel check, or the judge's own limits) and where each
try is kept (a Judgement row, or the command's report).

A round asks every configured judge once with the blind judge messages (scoring/judge.py). A reply that
cannot be used (not the judgement JSON, cut at max_tokens, a flagged fatal whose quote is not in the
answer) is asked again with its reason fed back (scoring/judge_reply.py), up to the dispute rule's
`max_parse_retries`; a call that got no reply at all is tried again within the same tries. A judge none
of whose calls got a reply cannot judge: `JudgeUnavailable`, and the answer is not judged
(docs/PROTOCOL.md "A judge that cannot be reached": never a pass, fail or dispute; INFRA_ERROR, see
`unjudged`). A judge whose replies were all unusable gave no usable judgement: GRADER_DISPUTE
(scoring/verdict.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from afpbench.fixtures.schema import Fixture
from afpbench.scoring.evidence import Evidence
from afpbench.scoring.judge import Judgement, JudgementError, build_judge_messages
from afpbench.scoring.judge_reply import retry_messages
from afpbench.scoring.states import ResultState
from afpbench.scoring.verdict import Verdict, decide
from afpbench.workers.errors import JudgeUnavailable
from afpbench.workers.grading.judges import JudgeCall, judgement_response, read_call
from afpbench.workers.providers.types import ResponseSchema
from afpbench.workers.store.models import CALL_FAILED
from afpbench.workers.sweeps.spec import ModelSpec

# What a verdict's rationale (and the sweep's marker rows) say when no judge call got a reply.
JUDGE_UNAVAILABLE = "judge unavailable"


@dataclass(frozen=True)
class JudgeTry:
    """One call of one judge: what it gave, and whether it can be used."""

    judge: ModelSpec
    judge_round: int  # 1, or 2: the blind re-judge with the order of presentation swapped
    call: JudgeCall
    judgement: Judgement | None  # the usable judgement, else None
    error: str | None  # f"{CALL_FAILED}: ..." when the call got no reply; else why the reply is unusable
    retry_change: str | None  # what this try's request changed from the first one (None: the first)


class JudgeSeat(Protocol):
    """How the caller's judge calls are made and where each try is kept."""

    def call(self, judge: ModelSpec, messages: list[dict], wanted: ResponseSchema, judge_round: int) -> JudgeCall:
        ...

    def keep(self, attempt: JudgeTry) -> None:
        ...


@dataclass(frozen=True)
class JudgingInputs:
    """The fixture, the judges and their prompt (what they are shown besides the answer: `Evidence`)."""

    fixture: Fixture
    judges: list[ModelSpec]
    judge_prompt: str


def _ask(judge: ModelSpec, seat: JudgeSeat, job: JudgingInputs, evidence: Evidence, judge_round: int,
         messages: list[dict], wanted: ResponseSchema) -> Judgement | JudgementError:
    """One judge, with bounded retries: its usable judgement, or why the last reply was unusable."""
    parsed: Judgement | JudgementError | None = None
    sent, change = messages, None  # a retry after an unusable reply feeds its reason back
    for number in range(1, evidence.dispute_rule.max_parse_retries + 2):
        call = seat.call(judge, sent, wanted, judge_round)
        read = read_call(call, job.fixture, evidence.response)
        if read is None:
            seat.keep(JudgeTry(judge, judge_round, call, None, f"{CALL_FAILED}: {call.error}", change))
            continue
        parsed = read  # the last reply read; a later call that gets none does not undo it
        if isinstance(parsed, Judgement):
            seat.keep(JudgeTry(judge, judge_round, call, parsed, None, change))
            return parsed
        seat.keep(JudgeTry(judge, judge_round, call, None, parsed.reason, change))
        sent, change = retry_messages(messages, parsed, number + 1)
    if parsed is None:
        tries = evidence.dispute_rule.max_parse_retries + 1
        raise JudgeUnavailable(f"judge {judge.display}: no reply to any of its {tries} call(s) in round {judge_round}")
    return parsed


def judging_round(
    seat: JudgeSeat, job: JudgingInputs, evidence: Evidence, judge_round: int
) -> tuple[list[Judgement], int]:
    """Every configured judge once (round 2: the presentation order swapped); (usable, unusable count)."""
    swapped = judge_round == 2
    messages = build_judge_messages(job.fixture, evidence.response, job.judge_prompt, evidence.untraceable,
                                    swapped=swapped)
    wanted = judgement_response(job.fixture, swapped=swapped)
    usable: list[Judgement] = []
    failures = 0
    for judge in job.judges:
        parsed = _ask(judge, seat, job, evidence, judge_round, messages, wanted)
        if isinstance(parsed, Judgement):
            usable.append(parsed)
        else:
            failures += 1
    return usable, failures


def judged_verdict(seat: JudgeSeat, job: JudgingInputs, evidence: Evidence) -> Verdict:
    """The verdict on one answer: the judges' round, the blind swapped re-judge when they dispute, the
    evidence's sealed pass and dispute rules, the answer's shape named in the rationale. Raises
    JudgeUnavailable when a judge got no reply at all (the caller decides when to try again)."""
    ev = evidence
    judgements: list[Judgement]
    judgements, failures = ([], 0)
    if evidence.validity.passed:
        judgements, failures = judging_round(seat, job, evidence, 1)
    verdict = decide("answered", ev.validity, ev.assertions, judgements, failures,
                     pass_rule=ev.pass_rule, dispute_rule=ev.dispute_rule)
    if verdict.needs_rejudge:
        swapped, swapped_failures = judging_round(seat, job, evidence, 2)
        verdict = decide("answered", ev.validity, ev.assertions, judgements, failures, swapped, swapped_failures,
                         pass_rule=ev.pass_rule, dispute_rule=ev.dispute_rule)
    return evidence.annotate(verdict)


def unjudged(reason: str) -> Verdict:
    """The verdict on an answer no judge could judge: INFRA_ERROR naming why (not the model's output)."""
    return Verdict(ResultState.INFRA_ERROR, rationale=f"{JUDGE_UNAVAILABLE}: {reason}")
