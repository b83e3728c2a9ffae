"""One answer judged without a sweep or a database (`afpbench fixtures check --judge`): the same
routine as a sweep's scorer (judging.py:judged_verdict) with the default pass and dispute rules, each
judge called with its own limits, every try kept in memory for the report; nothing is stored.

When a judge got no reply to any call the answer is not judged: its verdict is INFRA_ERROR naming why
(judging.py:unjudged), the state a sweep records once its attempt budget is spent on the same judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from afpbench.fixtures.schema import Fixture
from afpbench.scoring.evidence import gather_evidence
from afpbench.scoring.rules import DisputeRule, PassRule
from afpbench.scoring.verdict import Verdict
from afpbench.workers.errors import JudgeUnavailable
from afpbench.workers.grading.judges import JudgeCall, judge_call
from afpbench.workers.grading.judging import JudgeTry, JudgingInputs, judged_verdict, unjudged
from afpbench.workers.providers.types import ResponseSchema
from afpbench.workers.sweeps.spec import ModelSpec


@dataclass
class ReportSeat:
    """Judge calls under each judge's own limits; every try kept as a plain record for the report."""

    fixture_key: str
    tries: list[dict[str, Any]] = field(default_factory=list)

    def call(self, judge: ModelSpec, messages: list[dict], wanted: ResponseSchema, judge_round: int) -> JudgeCall:
        return judge_call(judge, messages, f"fixtures-check|{self.fixture_key}|judge{judge_round}", wanted)

    def keep(self, attempt: JudgeTry) -> None:
        call = attempt.call  # the judge's own text is kept: a reader checks the verdict against it
        record: dict[str, Any] = {"judge": attempt.judge.display, "round": attempt.judge_round,
                                  "error": attempt.error, "retry_change": attempt.retry_change, "text": call.text,
                                  "finish_reason": call.finish_reason, "latency_ms": call.latency_ms}
        if attempt.judgement is not None:
            record |= {"scores": attempt.judgement.scores, "flagged": attempt.judgement.flagged()}
        self.tries.append(record)


@dataclass(frozen=True)
class AnswerJudged:
    verdict: Verdict
    tries: list[dict[str, Any]]
    judge_unavailable: str | None  # why the answer could not be judged (verdict INFRA_ERROR); None: judged


def judge_answer(
    fixture: Fixture, answer: str, calculator_records: list[dict[str, Any]], validity: dict[str, Any],
    judges: list[ModelSpec], judge_prompt: str,
) -> AnswerJudged:
    """The verdict on `answer` as a sweep with the default rules would reach it. `calculator_records`:
    the calculator calls as a sweep's conversation records them; `validity`: the fixture's gate report
    as a sweep stores it ({"passed": ..., "failures": [{"check", "detail"}]})."""
    evidence = gather_evidence(fixture, {fixture.id: validity}, PassRule(), DisputeRule(), None, answer,
                               calculator_records, False)
    seat = ReportSeat(fixture.key)
    job = JudgingInputs(fixture, judges, judge_prompt)
    try:
        return AnswerJudged(judged_verdict(seat, job, evidence), seat.tries, None)
    except JudgeUnavailable as exc:
        return AnswerJudged(unjudged(str(exc)), seat.tries, str(exc))
