"""Score one executed cell: provenance, assertions, judges (with the blind swapped re-judge), verdict.

The logic lives in scoring/ (pure); this module loads rows, has the judges asked (judging.py, the
routine `afpbench fixtures check --judge` calls too) and writes Result rows. Nothing is
overwritten: a re-score adds a new scoring run.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, or_, update
from sqlmodel import Session, col, select

from afpbench.scoring.evidence import Evidence, gather_evidence
from afpbench.scoring.verdict import Verdict
from afpbench.workers.errors import JudgeUnavailable, RecordNotFound
from afpbench.workers.grading.judges import JudgeSlotWait
from afpbench.workers.grading.judging import JUDGE_UNAVAILABLE, JudgingInputs, judged_verdict, unjudged
from afpbench.workers.grading.sweep_seat import JudgingCancelled, SweepSeat
from afpbench.workers.providers.types import OutcomeClass
from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.lease import hold_scoring
from afpbench.workers.store.models import (
    SLOT_WAIT,
    Attempt,
    Cell,
    JudgementRow,
    Phase,
    Result,
    Sweep,
    SweepStatus,
    utcnow,
)
from afpbench.workers.sweeps.inputs import SweepInputs, inputs_for, validity_for
from afpbench.workers.sweeps.seal import afpbench_version
from afpbench.workers.sweeps.spec import ModelSpec

SCORER_VERSION = "1"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Scored:
    state: str | None  # None: this scorer was superseded and the cell's current holder has not finished


@dataclass(frozen=True)
class RejudgeLater:
    delay_s: float
    reason: str


@dataclass(frozen=True)
class NotScored:
    """Nothing to do for this message (the sweep was cancelled); `afpbench resume` sends it again."""

    reason: str


def _claim(session: Session, cell_id: int, worker: str) -> str | None:
    """Move the cell into `scoring` under a lease of AFP_LEASE_EXPIRY_S (renewed while the judges run,
    store/lease.py). Returns the claim's owner token, the fence of the result write; None if someone else
    holds the cell."""
    now = utcnow()
    owner = f"{worker}#{uuid.uuid4().hex[:12]}"  # unique per claim: two scorers in one process differ
    res = session.exec(
        update(Cell)
        .where(
            col(Cell.id) == cell_id,
            or_(col(Cell.phase) == Phase.awaiting_score,
                (col(Cell.phase) == Phase.scoring) & (col(Cell.lease_until) < now)),
        )
        .values(
            phase=Phase.scoring, lease_owner=owner,
            lease_until=now + timedelta(seconds=get_settings().lease_expiry_s), updated_at=now,
        )
    )
    return owner if res.rowcount == 1 else None


def _still_ours(cell_id: int, owner: str) -> ColumnElement[bool]:
    """The fence of every write a scorer makes after its claim: the cell is still `scoring` under it."""
    return (col(Cell.id) == cell_id) & (col(Cell.phase) == Phase.scoring) & (col(Cell.lease_owner) == owner)


def _cell(session: Session, cell_id: int) -> Cell:
    cell = session.get(Cell, cell_id)
    if cell is None:
        raise RecordNotFound(f"no cell with id {cell_id}")
    return cell


def next_scoring_run(session: Session, cell_id: int) -> int:
    current = session.exec(select(func.max(Result.scoring_run)).where(Result.cell_id == cell_id)).one()
    return (current or 0) + 1


def score_cell(cell_id: int, worker: str) -> Scored | RejudgeLater | NotScored:
    with session_scope() as session:
        cell = _cell(session, cell_id)
        if cell.phase == Phase.done:
            assert cell.state is not None, f"cell {cell_id} is done, so it has a result state"
            return Scored(cell.state)
        # As execute does: after a cancel no judge is paid for; the cell keeps its phase for resume.
        status = session.exec(select(Sweep.status).where(Sweep.id == cell.sweep_id)).one()
        if status == SweepStatus.cancelled:
            return NotScored("sweep cancelled")
        owner = _claim(session, cell_id, worker)
        if owner is None:
            return RejudgeLater(10.0, f"cell {cell_id} is in phase {cell.phase}")
    with hold_scoring(cell_id, owner):
        try:
            with session_scope() as session:
                try:
                    verdict, details, run = score_answer(session, cell_id)
                except JudgingCancelled as exc:
                    # The judge calls already made are real requests: their rows are kept (each was
                    # committed as its call ended, sweep_seat.py). The cell
                    # goes back to awaiting_score with no result, for `afpbench resume`.
                    session.execute(update(Cell).where(_still_ours(cell_id, owner))
                                    .values(phase=Phase.awaiting_score, lease_owner=None, lease_until=None))
                    return NotScored(str(exc))
                # The fence: only the claim that still holds the cell writes its result. A scorer that
                # lost its lease (stalled past it while another scorer claimed the cell) writes no result;
                # the rows of the judge calls it made stay, as every call's row does (sweep_seat.py).
                done = session.exec(
                    update(Cell).where(_still_ours(cell_id, owner)).values(**done_values(verdict))
                ).rowcount
                if not done:
                    session.rollback()
                    return Scored(_current_state(session, cell_id))
                session.add(result_row(cell_id, cell.sweep_id, run, verdict, details))
                return Scored(verdict.state.value)
        except JudgeSlotWait as exc:
            return _wait_for_slot(cell_id, owner, exc)
        except JudgeUnavailable as exc:
            return _judge_unavailable(cell_id, cell.sweep_id, owner, str(exc))


def _wait_for_slot(cell_id: int, owner: str, wait: JudgeSlotWait) -> RejudgeLater:
    """A judge call that got no slot in its pool within AFP_SLOT_WAIT_S: a wait, not a failed try (no
    call was made for it). The cell goes back to awaiting_score with no row counted against the attempt
    budget, its state_reason saying it waits (counted by `status` and progress), and the message waits
    again as a retried one, its worker thread given back. The try's judge calls already made, if any,
    roll back with it (a slot wait after a first judge call is rare: the calls of a try are in a row)."""
    with session_scope() as session:
        session.execute(update(Cell).where(_still_ours(cell_id, owner)).values(
            phase=Phase.awaiting_score, lease_owner=None, lease_until=None,
            state_reason=f"{SLOT_WAIT}: {wait}"[:2000], updated_at=utcnow()))
    log.info("cell %s: %s; scoring waits again (not a failed try)", cell_id, wait)
    return RejudgeLater(max(1.0, wait.wait_s), str(wait))


def _judge_unavailable(cell_id: int, sweep_id: str, owner: str, reason: str) -> Scored | RejudgeLater:
    """A scoring try that could not reach a judge: kept on record, and bounded by the one attempt
    budget (AFP_MAX_ATTEMPTS) like every other retry path. Within it, the cell goes back to
    awaiting_score and is judged again later; once it is spent, the cell ends INFRA_ERROR naming why
    (not the model's output: the run exits 3)."""
    budget = get_settings().max_attempts
    with session_scope() as session:
        run = next_scoring_run(session, cell_id)
        session.add(JudgementRow(cell_id=cell_id, scoring_run=run, judge_label="-", judge_round=0,
                                 prompt_sha256="-", parse_error=f"{JUDGE_UNAVAILABLE}: {reason}"[:2000]))
        lost = session.exec(select(func.count()).select_from(JudgementRow).where(
            JudgementRow.cell_id == cell_id, col(JudgementRow.parse_error).startswith(JUDGE_UNAVAILABLE),
            # since the cell's latest rerun (workers/cells/rerun.py): its earlier tries are superseded
            col(JudgementRow.scoring_run) >= select(Cell.result_base).where(Cell.id == cell_id).scalar_subquery(),
        )).one()
        if lost < budget:
            session.execute(update(Cell).where(_still_ours(cell_id, owner))
                            .values(phase=Phase.awaiting_score, lease_owner=None, lease_until=None,
                                    state_reason=None))
            return RejudgeLater(30.0, reason)
        verdict = unjudged(f"{reason} (after {lost} scoring tries, AFP_MAX_ATTEMPTS={budget})")
        verdict = replace(verdict, rationale=verdict.rationale[:2000])
        done = session.exec(update(Cell).where(_still_ours(cell_id, owner)).values(**done_values(verdict))).rowcount
        if done:
            details = {"decided_at": "scoring", "judge_unavailable": lost}
            session.add(result_row(cell_id, sweep_id, run, verdict, details))
        return Scored(verdict.state.value)


def _current_state(session: Session, cell_id: int) -> str | None:
    return session.exec(select(Cell.state).where(Cell.id == cell_id)).one()


def evidence_for(
    inputs: SweepInputs, reports: dict, fixture_id: str, attempt_id: int | None, output_text: str | None,
    tool_calls: list[dict], outcome: str,
) -> Evidence:
    """The sweep's sealed rules and the fixture, fed to the pure evidence gathering."""
    return gather_evidence(
        inputs.fixtures[fixture_id], reports, inputs.spec.pass_rule, inputs.spec.dispute_rule,
        attempt_id, output_text, tool_calls, outcome == OutcomeClass.truncated.value,
    )


def score_answer(
    session: Session, cell_id: int, judges: list[ModelSpec] | None = None
) -> tuple[Verdict, dict, int]:
    """The verdict on the cell's last attempt (judging.py:judged_verdict, every try a Judgement row of a
    new scoring run). Raises JudgeUnavailable when a judge got no reply, JudgingCancelled on a cancel."""
    cell = _cell(session, cell_id)
    inputs = inputs_for(session, cell.sweep_id)
    judges = inputs.spec.judges if judges is None else judges
    attempt = session.exec(
        select(Attempt).where(Attempt.cell_id == cell_id).order_by(col(Attempt.number).desc(), col(Attempt.id).desc())
    ).first()
    if attempt is None:
        raise RecordNotFound(f"cell {cell_id} has no attempt to score")
    run = next_scoring_run(session, cell_id)
    ev = evidence_for(inputs, validity_for(session, cell.sweep_id), cell.fixture_id, attempt.id,
                      attempt.output_text, attempt.tool_calls, attempt.outcome)
    job = JudgingInputs(inputs.fixtures[cell.fixture_id], judges, inputs.judge_prompt)
    verdict = judged_verdict(SweepSeat(cell, inputs, run), job, ev)
    return verdict, ev.details(verdict, [j.display for j in judges]), run


def result_row(cell_id: int, sweep_id: str, run: int, verdict: Verdict, details: dict) -> Result:
    return Result(**result_values(cell_id, sweep_id, run, verdict, details))


def result_values(cell_id: int, sweep_id: str, run: int, verdict: Verdict, details: dict) -> dict[str, Any]:
    """A Result row's columns (no id), for a Core insert on the hot path: building the SQLModel object
    and dumping it again cost more than the insert itself."""
    scores = verdict.scores or {}
    return {
        "cell_id": cell_id,
        "sweep_id": sweep_id,
        "scoring_run": run,
        "state": verdict.state.value,
        "task_correctness": scores.get("task_correctness"),
        "evidence_discipline": scores.get("evidence_discipline"),
        "uncertainty_handling": scores.get("uncertainty_handling"),
        "failure_control": scores.get("failure_control"),
        "total": verdict.total,
        "fatal_criterion": verdict.fatal_criterion,
        "rationale": verdict.rationale,
        "details": details,
        "scorer_version": f"{SCORER_VERSION}/{afpbench_version()}",
        "created_at": utcnow(),
    }


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
    cell = _cell(session, cell_id)
    row = result_row(cell_id, cell.sweep_id, run, verdict, details)
    session.add(row)
    for column, value in done_values(verdict).items():
        setattr(cell, column, value)
    session.add(cell)
    return row
