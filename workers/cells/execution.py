"""Execute one cell: claim it, respect the pool's limits, call the model (with calculator rounds for
numeric fixtures), store the attempt, and say what happens next as a typed decision.

The Celery task (afpbench/workers/tasks.py) only maps the decision onto the queue: score next, retry after a
delay (the worker slot is given back), or nothing more to do.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import Connection, select, update
from sqlalchemy.exc import InterfaceError, OperationalError, StatementError

from afpbench.scoring.evidence import decide_without_judges
from afpbench.scoring.states import ResultState
from afpbench.workers.cells.claim import (
    ATTEMPT_NOT_SENT,
    ATTEMPT_STORAGE_ERROR,
    CELL,
    FILL_ATTEMPT,
    INSERT_RESULT,
    MOVE_CELL,
    SWEEP,
    CellRow,
    Claimed,
    Exhausted,
    claim_cell,
    load_cell,
    record_in_one,
)
from afpbench.workers.cells.completion import any_open
from afpbench.workers.cells.conversation import converse, estimate_tokens, sent_rounds
from afpbench.workers.cells.dispatch import top_up
from afpbench.workers.cells.retry import RetryPolicy, Verdict
from afpbench.workers.grading.scorer import done_values, evidence_for, result_values
from afpbench.workers.limits.shared import get_limiter
from afpbench.workers.providers.types import AdapterResult
from afpbench.workers.redact import mask_secrets
from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import autocommitted, for_reads, get_engine, transaction
from afpbench.workers.store.lease import hold_execution
from afpbench.workers.store.lossless import fit, storable, storable_text
from afpbench.workers.store.models import Phase, Result, SweepStatus, as_utc, utcnow
from afpbench.workers.sweeps.endpoints import endpoint_for
from afpbench.workers.sweeps.inputs import SweepInputs
from afpbench.workers.sweeps.pools import pool_limits, pool_of
from afpbench.workers.sweeps.progress import is_cancelled
from afpbench.workers.sweeps.spec import ModelSpec
from afpbench.workers.sweeps.time_limits import TaskLimits, scoring_limits, slot_lease_s

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoreNext:
    cell_id: int
    limits: TaskLimits | None = None  # the score message's time limits, from the sweep's judges


@dataclass(frozen=True)
class RetryLater:
    delay_s: float
    reason: str
    prepaid: bool = False  # the limiter already reserved this cell's request slot for that moment


@dataclass(frozen=True)
class Finished:
    state: str | None
    reason: str
    sweep_id: str | None = None  # known when the cell was loaded: saves the completion check a read
    # Whether the sweep still had an open cell right after this task's commit; None: not checked here
    # (a redelivery, a cancelled sweep...), so the task checks before it could claim the aggregate.
    sweep_open: bool | None = None


ExecutionDecision = ScoreNext | RetryLater | Finished


def _model_of(inputs: SweepInputs, cell: CellRow) -> ModelSpec:
    model = inputs.models_by_hash.get(cell.model_hash)
    if model is not None:
        return model
    raise LookupError(f"cell {cell.id}: no model with hash {cell.model_hash} in sweep {cell.sweep_id}")


def execute_cell(
    cell_id: int, worker: str, policy: RetryPolicy | None = None, prepaid: bool = False
) -> ExecutionDecision:
    settings = get_settings()
    policy = policy or RetryPolicy(max_attempts=settings.max_attempts)
    loaded = load_cell(cell_id)
    if loaded is None:
        return Finished(None, f"cell {cell_id} does not exist")
    cell, inputs, validity = loaded
    if cell.phase in (Phase.awaiting_score, Phase.scoring):
        # A redelivery after the attempt was stored: carry on to scoring.
        return ScoreNext(cell_id, scoring_limits(inputs.spec, settings))
    if cell.phase == Phase.done:
        return Finished(cell.state, "already done")
    if cell.sweep_status == SweepStatus.cancelled:
        return Finished(None, "sweep cancelled")
    if cell.phase == Phase.executing and cell.lease_until and as_utc(cell.lease_until) > utcnow():
        return RetryLater((as_utc(cell.lease_until) - utcnow()).total_seconds() + 1, "held by another worker")
    if cell.not_before and as_utc(cell.not_before) > utcnow():
        return RetryLater((as_utc(cell.not_before) - utcnow()).total_seconds(), "backoff")
    model = _model_of(inputs, cell)
    endpoint = endpoint_for(model)
    pool = pool_of(endpoint)
    limiter = get_limiter()
    # Reserve a slot up to a quarter of the visibility timeout ahead, so a countdown never nears it.
    reserve_s = min(30.0, settings.visibility_timeout_s / 4)
    estimate = estimate_tokens([], model.params)
    limits = pool_limits(inputs.spec, model)  # judges on the same server count against the same cap
    grant = limiter.acquire(pool, limits, estimate, reserve_s=reserve_s, prepaid=prepaid,
                            lease_s=slot_lease_s(model))
    if not grant.granted:
        return RetryLater(grant.wait_s, f"limiter: {grant.reason}", prepaid=grant.prepaid)
    # The lease must outlive the broker's visibility timeout (AFP_LEASE_EXPIRY_S), or a message
    # redelivered from a slow but live worker would steal the cell.
    claimed = claim_cell(cell_id, worker, settings.lease_expiry_s, policy.max_attempts)
    if not isinstance(claimed, Claimed):
        limiter.release(pool, grant.lease)
        limiter.refund(pool, limits, estimate)
        if isinstance(claimed, Exhausted):  # due again with its budget spent: now done, INFRA_ERROR
            return Finished(ResultState.INFRA_ERROR.value, claimed.reason, cell.sweep_id)
        if is_cancelled(cell.sweep_id):  # a read only on this rare path: the claim refused a cancelled sweep
            return Finished(None, "sweep cancelled")
        return RetryLater(5.0, "claimed by another worker")
    # The claim's lease (AFP_LEASE_EXPIRY_S, longer than the broker's visibility timeout) is renewed
    # while the try runs (store/lease.py): a duplicate of this message, or the broker's redelivery of it,
    # finds the cell held however long the call takes on a loaded machine.
    with hold_execution(cell_id, claimed.number) as hold:
        try:
            result, rounds, tool_records, tokens = converse(model, inputs, cell, holding=grant.lease, hold=hold)
        finally:
            limiter.release(pool, grant.lease)
        if not sent_rounds(rounds):
            limiter.refund(pool, limits, estimate)  # round one's slot was never used
            return record_not_sent(cell, claimed, model, rounds)
        decision = _record(cell, claimed, model, inputs, validity, result, rounds, tool_records, tokens, policy)
    top_up(cell.sweep_id)  # a slot in this model's release window just freed
    return decision


def record_not_sent(cell: CellRow, claimed: Claimed, model: ModelSpec, rounds: list[dict]) -> ExecutionDecision:
    """A claim whose try made no request: the attempt says so (outcome `not_sent`, the reason), and
    the cell, if it is still ours, goes back to the queue without a result."""
    reason = rounds[-1]["error"] if rounds else "no round was started"
    with transaction() as conn:
        conn.execute(FILL_ATTEMPT, {
            "b_attempt": claimed.attempt_id, "finished_at": utcnow(), "outcome": ATTEMPT_NOT_SENT, "error": reason,
            "rounds": rounds, "simulated": model.simulated,
        })
        moved = conn.execute(MOVE_CELL, {
            "b_cell": cell.id, "b_number": claimed.number, "phase": Phase.queued.value, "lease_owner": None,
            "lease_until": None, "updated_at": utcnow(),
        }).rowcount
    if not moved:
        return Finished(None, f"attempt {claimed.number} superseded before its request: {reason}")
    return RetryLater(1.0, f"attempt {claimed.number} not sent: {reason}")


def _record(
    cell: CellRow, claimed: Claimed, model: ModelSpec, inputs: SweepInputs, validity: dict,
    result: AdapterResult, rounds: list[dict], tool_records: list[dict], tokens: dict, policy: RetryPolicy,
) -> ExecutionDecision:
    """Fill in the claim's attempt row and move the cell on, in one transaction.

    A sweep without judges is scored here, in the same transaction (deterministic scoring needs only
    the answer just received): one queue hop and two transactions fewer per cell. Sweeps with judges
    go on to the `score` queue, where judge calls have their own limits.

    Whatever the provider sent is made storable first (workers/store/lossless.py). A write that still
    fails on what it carries is recorded as a `storage_error` attempt, which the budget counts like
    any other: writing the same values again would fail again, and re-running the cell without a
    bound is how one poison answer kept a sweep from ever finishing.
    """
    now = utcnow()
    attempt_values = storable({
        "finished_at": now,
        "outcome": result.outcome.value,
        "http_status": result.http_status,
        "error": result.error,
        "output_text": result.text,
        "finish_reason": fit(result.finish_reason, 48),
        "tool_calls": tool_records,
        "input_tokens": tokens["input"] or None,
        "output_tokens": tokens["output"] or None,
        "cached_tokens": tokens["cached"] or None,
        "reasoning_tokens": tokens["reasoning"] or None,
        "latency_ms": round(tokens["latency_ms"], 3),
        "served_model": fit(result.served_model, 200),
        "provider_request_id": fit(result.request_id, 200),
        "reasoning_params": result.reasoning_params,
        "rounds": rounds,
        "simulated": model.simulated,
    })
    # Under the fence below the cell's attempt count is our claim's number, so decide before writing.
    verdict = policy.decide(result.outcome, claimed.number, result.retry_after_s, result.should_retry)
    try:
        return _commit(cell, claimed, inputs, validity, attempt_values, verdict, now)
    except (OperationalError, InterfaceError):
        raise  # the database is away, not the values: the task retries with backoff (workers/tasks.py)
    except (StatementError, ValueError, TypeError) as exc:
        error = _storage_failure(exc)
        log.warning(json.dumps({"event": "storage_error", "cell": cell.id, "attempt": claimed.number,
                                "error": error}))
        fallback = {"finished_at": now, "outcome": ATTEMPT_STORAGE_ERROR, "http_status": result.http_status,
                    "error": error, "latency_ms": attempt_values["latency_ms"], "simulated": model.simulated}
        verdict = policy.decide(ATTEMPT_STORAGE_ERROR, claimed.number)
        return _commit(cell, claimed, inputs, validity, fallback, verdict, now)


def _storage_failure(exc: Exception) -> str:
    """One line saying why the write failed: the driver's own message, never the statement's parameters
    (SQLAlchemy's text of the error quotes them, and they hold the provider's response)."""
    cause = getattr(exc, "orig", None) or exc
    first = (str(cause).strip().splitlines() or [""])[0][:160]
    return storable_text(mask_secrets(f"attempt not stored: {type(cause).__name__}: {first}"))


def _commit(
    cell: CellRow, claimed: Claimed, inputs: SweepInputs, validity: dict, attempt_values: dict, verdict: Verdict,
    now: datetime,
) -> ExecutionDecision:
    cell_values: dict = {"lease_owner": None, "lease_until": None, "updated_at": now}
    decision: ExecutionDecision
    rows: list = []
    if verdict.kind == "score" and not inputs.spec.judges:
        evidence = evidence_for(inputs, validity, cell.fixture_id, claimed.attempt_id, attempt_values["output_text"],
                                attempt_values["tool_calls"], attempt_values["outcome"])
        scored = decide_without_judges(evidence)
        # Scoring run 1: under the fence no scorer has touched this cell, so no run exists yet.
        rows.append(result_values(cell.id, cell.sweep_id, 1, scored, evidence.details(scored, [])))
        cell_values.update(done_values(scored))
        decision = Finished(scored.state.value, cell_values["state_reason"], cell.sweep_id)
    elif verdict.kind == "score":
        cell_values["phase"] = Phase.awaiting_score
        decision = ScoreNext(cell.id, scoring_limits(inputs.spec, get_settings()))
    elif verdict.kind == "retry":
        cell_values.update(phase=Phase.queued, not_before=now + timedelta(seconds=verdict.delay_s))
        decision = RetryLater(verdict.delay_s, verdict.reason)
    else:
        assert verdict.state is not None, f"a {verdict.kind!r} verdict names its result state"
        reason = _reason(verdict.reason, attempt_values["error"])
        cell_values.update(phase=Phase.done, state=verdict.state, state_reason=reason)
        decision = Finished(verdict.state, reason, cell.sweep_id)
        rows.append(Result(
            cell_id=cell.id, sweep_id=cell.sweep_id, scoring_run=0, state=verdict.state, rationale=reason,
            details={"attempt_id": claimed.attempt_id, "decided_at": "execution"}, scorer_version="execution",
        ).model_dump(exclude={"id"}))
    with get_engine().connect() as conn:
        if conn.dialect.name == "postgresql" and verdict.kind != "stop_model":
            conn = autocommitted(conn)  # for the rest of the record too: each statement commits as it ends
            moved = _record_in_one(conn, cell, claimed, attempt_values, cell_values, rows)
        else:
            with conn.begin():
                conn.execute(FILL_ATTEMPT, {"b_attempt": claimed.attempt_id, **attempt_values})
                moved = conn.execute(
                    MOVE_CELL, {"b_cell": cell.id, "b_number": claimed.number, **cell_values}
                ).rowcount > 0
                if moved and rows:
                    conn.execute(INSERT_RESULT, rows)
                if moved and verdict.kind == "stop_model":
                    stop_model(conn, cell, cell_values["state_reason"])
        if not moved:
            # Our lease expired and a later claim took the cell over (or it is already past execution).
            # The attempt stays on record, but the cell is left to the current holder: moving it on from
            # here could give the cell a second result.
            with conn.begin():
                current = conn.execute(select(CELL.c.attempts).where(CELL.c.id == cell.id)).scalar_one()
                note = f"superseded by attempt {current}"
                error = f"{attempt_values['error']}; {note}" if attempt_values["error"] else note
                conn.execute(FILL_ATTEMPT, {"b_attempt": claimed.attempt_id, "error": error})
            return Finished(None, f"attempt {claimed.number} superseded")
        if isinstance(decision, Finished):
            # After the commit, on the same connection: does the sweep still have an open cell? Only a
            # task that sees none goes on to claim the aggregate (claim_aggregate checks again). In
            # autocommit on PostgreSQL: one statement, no transaction (no BEGIN and ROLLBACK round trips).
            decision = replace(decision, sweep_open=any_open(for_reads(conn), cell.sweep_id))
    return decision


def _record_in_one(conn: Connection, cell: CellRow, claimed: Claimed, attempt_values: dict, cell_values: dict,
                   rows: list[dict]) -> bool:
    """The record as one statement on PostgreSQL, `conn` in autocommit (claim.py:record_in_one); whether
    the cell moved. At most one result row is written with a cell's record."""
    assert len(rows) <= 1, "a record writes at most one result row"
    result = rows[0] if rows else {}
    statement = record_in_one(tuple(attempt_values), tuple(cell_values), tuple(result))
    params = {"b_attempt": claimed.attempt_id, "b_cell": cell.id, "b_number": claimed.number,
              **{f"a_{k}": v for k, v in attempt_values.items()}, **{f"c_{k}": v for k, v in cell_values.items()},
              **{f"r_{k}": v for k, v in result.items()}}
    moved = conn.execute(statement, params).first() is not None
    conn.commit()  # ends SQLAlchemy's own transaction object; the statement was committed as it ended
    return moved


def _reason(reason: str, error: str | None) -> str:
    return f"{reason}: {error}" if error else reason


def stop_model(conn: Connection, cell: CellRow, reason: str) -> int:
    """An auth/config error stops the model's remaining cells with one clear reason, not N failures."""
    res = conn.execute(
        update(CELL)
        .where(
            CELL.c.sweep_id == cell.sweep_id,
            CELL.c.model_hash == cell.model_hash,
            CELL.c.phase.in_([Phase.pending.value, Phase.queued.value]),
        )
        .values(
            phase=Phase.done.value, state=ResultState.INFRA_ERROR.value, state_reason=f"model stopped: {reason}"
        )
    )
    notices = conn.execute(select(SWEEP.c.notices).where(SWEEP.c.id == cell.sweep_id)).scalar_one()
    notice = f"model {cell.model_label} stopped: {reason}"
    if notice not in notices:
        conn.execute(update(SWEEP).where(SWEEP.c.id == cell.sweep_id).values(notices=[*notices, notice]))
    log.warning(json.dumps({"event": "model_stopped", "sweep": cell.sweep_id, "model": cell.model_label}))
    return res.rowcount
