"""The record of one try: its attempt row filled in and the cell moved on, in one transaction, under the
claim's fence (a sweep without judges is scored right there); a model whose error stops it has its
remaining cells stopped with one reason.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import datetime, timedelta

from sqlalchemy import Connection, select, update
from sqlalchemy.exc import InterfaceError, OperationalError, StatementError

from afpbench.scoring.evidence import decide_without_judges
from afpbench.scoring.states import ResultState
from afpbench.workers.cells.claim import (
    ATTEMPT_STORAGE_ERROR,
    CELL,
    FILL_ATTEMPT,
    INSERT_RESULT,
    MOVE_CELL,
    SWEEP,
    CellRow,
    Claimed,
    record_in_one,
)
from afpbench.workers.cells.completion import any_open
from afpbench.workers.cells.decisions import ExecutionDecision, Finished, RetryLater, ScoreNext
from afpbench.workers.cells.retry import RetryDecision, RetryPolicy
from afpbench.workers.grading.scorer import done_values, evidence_for, result_values
from afpbench.workers.providers.types import AdapterResult
from afpbench.workers.redact import mask_secrets
from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import autocommitted, for_reads, get_engine
from afpbench.workers.store.lossless import fit, storable, storable_text
from afpbench.workers.store.models import Phase, Result, utcnow
from afpbench.workers.sweeps.inputs import SweepInputs
from afpbench.workers.sweeps.spec import ModelSpec
from afpbench.workers.sweeps.time_limits import scoring_limits

log = logging.getLogger(__name__)


def record_try(
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
    # The budget counts the attempts since the cell's latest rerun (claim.py); the fence is the absolute number.
    verdict = policy.decide(result.outcome, claimed.number - cell.attempt_base, result.retry_after_s,
                            result.should_retry, result.final)
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
        verdict = policy.decide(ATTEMPT_STORAGE_ERROR, claimed.number - cell.attempt_base)
        return _commit(cell, claimed, inputs, validity, fallback, verdict, now)


def _storage_failure(exc: Exception) -> str:
    """One line saying why the write failed: the driver's own message, never the statement's parameters
    (SQLAlchemy's text of the error quotes them, and they hold the provider's response)."""
    cause = getattr(exc, "orig", None) or exc
    first = (str(cause).strip().splitlines() or [""])[0][:160]
    return storable_text(mask_secrets(f"attempt not stored: {type(cause).__name__}: {first}"))


def _commit(
    cell: CellRow, claimed: Claimed, inputs: SweepInputs, validity: dict, attempt_values: dict, verdict: RetryDecision,
    now: datetime,
) -> ExecutionDecision:
    cell_values: dict = {"lease_owner": None, "lease_until": None, "updated_at": now}
    decision: ExecutionDecision
    rows: list = []
    if verdict.kind == "score" and not inputs.spec.judges:
        evidence = evidence_for(inputs, validity, cell.fixture_id, claimed.attempt_id, attempt_values["output_text"],
                                attempt_values["tool_calls"], attempt_values["outcome"])
        scored = decide_without_judges(evidence)
        # Under the fence no scorer has touched this cell since it was (re)opened: the run after its base.
        rows.append(result_values(cell.id, cell.sweep_id, cell.result_base + 1, scored, evidence.details(scored, [])))
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
            cell_id=cell.id, sweep_id=cell.sweep_id, scoring_run=cell.result_base, state=verdict.state,
            rationale=reason,
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
