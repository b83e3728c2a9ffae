"""Score one executed cell: provenance, assertions, judges (with the blind swapped re-judge), verdict.

The logic lives in scoring/ (pure); this module only loads rows, calls judges through the same
adapters and limiter as the tested models, and writes Judgement and Result rows. Nothing is
overwritten: a re-score adds a new scoring run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import func, or_, update
from sqlmodel import Session, select

from afpbench.reference.hashing import text_sha256
from afpbench.scoring.assertions import AssertionOutcome, run_assertions
from afpbench.scoring.judge import Judgement, JudgementError, build_judge_messages, read_judgement
from afpbench.scoring.validity import ValidityFailure, ValidityReport
from afpbench.scoring.verdict import DisputeRule, PassRule, Verdict, decide
from afpbench.workers.grading.provenance import provenance_for
from afpbench.workers.limits.limiter import get_limiter, pool_key
from afpbench.workers.providers.base import ChatRequest, OutcomeClass, key_for_quiet
from afpbench.workers.providers.endpoints import endpoint_for
from afpbench.workers.providers.registry import adapter_for
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Attempt, Cell, Phase, Result, utcnow
from afpbench.workers.store.models import Judgement as JudgementRow
from afpbench.workers.sweeps.inputs import SweepInputs, inputs_for, validity_for
from afpbench.workers.sweeps.seal import afpbench_version
from afpbench.workers.sweeps.spec import ModelSpec

SCORER_VERSION = "1"


@dataclass(frozen=True)
class Scored:
    state: str


@dataclass(frozen=True)
class RejudgeLater:
    delay_s: float
    reason: str


class JudgeUnavailable(RuntimeError):
    pass


def validity_of(reports: dict, fixture_key: str, fixture_id: str) -> ValidityReport:
    stored = reports.get(fixture_id, {"passed": True, "failures": []})
    return ValidityReport(
        fixture_key, stored["passed"], [ValidityFailure(f["check"], f["detail"]) for f in stored["failures"]]
    )


def _claim(session: Session, cell_id: int, worker: str) -> bool:
    now = utcnow()
    res = session.execute(
        update(Cell)
        .where(
            Cell.id == cell_id,
            or_(Cell.phase == Phase.awaiting_score, (Cell.phase == Phase.scoring) & (Cell.lease_until < now)),
        )
        .values(
            phase=Phase.scoring, lease_owner=worker, lease_until=now + timedelta(minutes=15), updated_at=now
        )
    )
    return res.rowcount == 1


def _call_judge(judge: ModelSpec, messages: list[dict], cell_key: str) -> tuple[str | None, str | None]:
    """One judge call through the shared limiter; returns (raw text, error)."""
    endpoint = endpoint_for(judge)
    pool = pool_key(judge.provider, endpoint.base_url, key_for_quiet(endpoint))
    limiter = get_limiter()
    deadline = time.monotonic() + 60
    grant = limiter.acquire(pool, judge.limits, sum(len(m["content"]) for m in messages) // 4 + 1024)
    while not grant.granted:
        if time.monotonic() > deadline:
            raise JudgeUnavailable(f"judge {judge.display}: rate limit wait exceeded 60 s")
        time.sleep(min(grant.wait_s, 2.0))
        grant = limiter.acquire(pool, judge.limits, 0)
    try:
        result = adapter_for(judge.provider).call(
            endpoint, ChatRequest(messages, [], {"X-Afpbench-Cell": cell_key})
        )
    finally:
        limiter.release(pool, grant.lease)
    if result.outcome in (OutcomeClass.rate_limited, OutcomeClass.overloaded):
        limiter.cool_down(pool, result.retry_after_s or 1.0)
    if result.outcome not in (OutcomeClass.answer, OutcomeClass.truncated):
        return None, f"{result.outcome.value}: {result.error or ''}".strip()
    return result.text or "", None


def _judge_round(
    session: Session,
    cell: Cell,
    inputs: SweepInputs,
    judges: list[ModelSpec],
    response: str,
    originated: list[str],
    scoring_run: int,
    judge_round: int,
) -> tuple[list[Judgement], int]:
    """Every configured judge once (with bounded parse retries); rows stored; returns (usable, failures)."""
    fixture = inputs.fixtures[cell.fixture_id]
    fatal_ids = fixture.fatal_ids()
    messages = build_judge_messages(
        fixture, response, inputs.judge_prompt, originated, swapped=judge_round == 2
    )
    prompt_hash = text_sha256(inputs.judge_prompt)

    def row(judge: ModelSpec, raw: str | None, parsed: dict | None, parse_error: str | None) -> JudgementRow:
        """Every try is kept: the raw text, and either the parsed judgement or why it is unusable."""
        return JudgementRow(
            cell_id=cell.id, scoring_run=scoring_run, judge_label=judge.display, judge_round=judge_round,
            prompt_sha256=prompt_hash, raw_text=raw, parsed=parsed, parse_error=parse_error,
            simulated=judge.simulated,
        )

    usable: list[Judgement] = []
    failures = 0
    for judge in judges:
        parsed: Judgement | JudgementError | None = None
        infra_errors = 0
        for _ in range(inputs.spec.dispute_rule.max_parse_retries + 1):
            raw, error = _call_judge(judge, messages, f"{cell.key}|judge{judge_round}")
            if error:
                infra_errors += 1
                session.add(row(judge, None, None, f"judge call failed: {error}"))
                continue
            parsed = read_judgement(raw, fatal_ids, response)
            if isinstance(parsed, Judgement):
                session.add(row(judge, raw, _judgement_json(parsed), None))
                break
            session.add(row(judge, raw, None, parsed.reason))
        if infra_errors and parsed is None:
            raise JudgeUnavailable(f"judge {judge.display} unavailable: {infra_errors} failed calls")
        if isinstance(parsed, Judgement):
            usable.append(parsed)
        else:
            failures += 1
    return usable, failures


def _judgement_json(j: Judgement) -> dict:
    return {
        "scores": j.scores,
        "rationales": j.rationales,
        "fatal_flags": j.fatal_flags,
        "quotes": j.quotes,
        "total": j.total,
    }


def next_scoring_run(session: Session, cell_id: int) -> int:
    current = session.exec(select(func.max(Result.scoring_run)).where(Result.cell_id == cell_id)).one()
    return (current or 0) + 1


def score_cell(cell_id: int, worker: str) -> Scored | RejudgeLater:
    with session_scope() as session:
        cell = session.get(Cell, cell_id)
        if cell.phase == Phase.done:
            return Scored(cell.state)
        if not _claim(session, cell_id, worker):
            return RejudgeLater(10.0, f"cell {cell_id} is in phase {cell.phase}")
    try:
        with session_scope() as session:
            verdict, details, run = _score(session, cell_id)
            write_result(session, cell_id, run, verdict, details)
            return Scored(verdict.state.value)
    except JudgeUnavailable as exc:
        with session_scope() as session:
            session.execute(
                update(Cell)
                .where(Cell.id == cell_id)
                .values(phase=Phase.awaiting_score, lease_owner=None, lease_until=None)
            )
        return RejudgeLater(30.0, str(exc))


@dataclass(frozen=True)
class Evidence:
    """What deterministic scoring reads off one stored answer, before any judge is asked."""

    validity: ValidityReport
    response: str
    provenance: dict | None
    assertions: AssertionOutcome
    pass_rule: PassRule
    dispute_rule: DisputeRule
    attempt_id: int | None
    truncated: bool

    def details(self, verdict: Verdict, judges: list[ModelSpec]) -> dict:
        return {
            "attempt_id": self.attempt_id,
            "assertions": [r.__dict__ for r in self.assertions.results],
            "proposed_fatal": self.assertions.proposed_fatal,
            "provenance": self.provenance,
            "dispute_reasons": verdict.dispute_reasons,
            "judges": [j.display for j in judges],
            "truncated": self.truncated,
        }


def gather_evidence(
    inputs: SweepInputs, reports: dict, fixture_id: str, attempt_id: int | None, output_text: str | None,
    tool_calls: list[dict], outcome: str,
) -> Evidence:
    """Validity, provenance and assertions for one answer: pure, so the executing worker can score a
    judge-less sweep inline and the scorer can do the same before calling judges."""
    fixture = inputs.fixtures[fixture_id]
    response = output_text or ""
    provenance = provenance_for(fixture, tool_calls, response) if fixture.numeric is not None else None
    return Evidence(
        validity=validity_of(reports, fixture.key, fixture.id),
        response=response,
        provenance=provenance,
        assertions=run_assertions(fixture, response),
        pass_rule=PassRule(**inputs.spec.pass_rule.model_dump()),
        dispute_rule=DisputeRule(**inputs.spec.dispute_rule.model_dump(exclude={"max_parse_retries"})),
        attempt_id=attempt_id,
        truncated=outcome == OutcomeClass.truncated.value,
    )


def decide_without_judges(evidence: Evidence) -> Verdict:
    return decide("answered", evidence.validity, evidence.assertions, [], 0,
                  pass_rule=evidence.pass_rule, dispute_rule=evidence.dispute_rule)


def _score(
    session: Session, cell_id: int, judges: list[ModelSpec] | None = None
) -> tuple[Verdict, dict, int]:
    cell = session.get(Cell, cell_id)
    inputs = inputs_for(session, cell.sweep_id)
    judges = inputs.spec.judges if judges is None else judges
    attempt = session.exec(
        select(Attempt).where(Attempt.cell_id == cell_id).order_by(Attempt.number.desc(), Attempt.id.desc())
    ).first()
    run = next_scoring_run(session, cell_id)
    ev = gather_evidence(inputs, validity_for(session, cell.sweep_id), cell.fixture_id, attempt.id,
                         attempt.output_text, attempt.tool_calls, attempt.outcome)
    originated = ev.provenance["originated"] if ev.provenance else []
    rules = {"pass_rule": ev.pass_rule, "dispute_rule": ev.dispute_rule}
    judgements, failures = ([], 0)
    if ev.validity.passed:
        judgements, failures = _judge_round(session, cell, inputs, judges, ev.response, originated, run, 1)
    verdict = decide("answered", ev.validity, ev.assertions, judgements, failures, **rules)
    if verdict.needs_rejudge:
        swapped, swapped_failures = _judge_round(session, cell, inputs, judges, ev.response, originated, run, 2)
        verdict = decide(
            "answered", ev.validity, ev.assertions, judgements, failures, swapped, swapped_failures, **rules
        )
    return verdict, ev.details(verdict, judges), run


def result_row(cell_id: int, sweep_id: str, run: int, verdict: Verdict, details: dict) -> Result:
    scores = verdict.scores or {}
    return Result(
        cell_id=cell_id,
        sweep_id=sweep_id,
        scoring_run=run,
        state=verdict.state.value,
        task_correctness=scores.get("task_correctness"),
        evidence_discipline=scores.get("evidence_discipline"),
        uncertainty_handling=scores.get("uncertainty_handling"),
        failure_control=scores.get("failure_control"),
        total=verdict.total,
        fatal_criterion=verdict.fatal_criterion,
        rationale=verdict.rationale,
        details=details,
        scorer_version=f"{SCORER_VERSION}/{afpbench_version()}",
    )


def done_values(verdict: Verdict) -> dict:
    """The cell's columns once a scoring verdict is recorded."""
    return {
        "phase": Phase.done,
        "state": verdict.state.value,
        "state_reason": "; ".join([verdict.rationale, *verdict.dispute_reasons])[:2000],
        "lease_owner": None,
        "lease_until": None,
        "updated_at": utcnow(),
    }


def write_result(session: Session, cell_id: int, run: int, verdict: Verdict, details: dict) -> Result:
    cell = session.get(Cell, cell_id)
    row = result_row(cell_id, cell.sweep_id, run, verdict, details)
    session.add(row)
    for column, value in done_values(verdict).items():
        setattr(cell, column, value)
    session.add(cell)
    return row
