"""Execute one cell: claim it, respect the pool's limits, call the model (with calculator rounds for
numeric fixtures), store the attempt, and say what happens next as a typed decision.

The Celery task (workers/tasks.py) only maps the decision onto the queue: score next, retry after a
delay (the worker slot is given back), or nothing more to do.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import Connection, bindparam, insert, or_, select, update

from afpbench.scoring.calculator import CalculatorError, evaluate
from afpbench.scoring.render import render
from afpbench.scoring.states import ResultState
from afpbench.workers.cells.completion import any_open
from afpbench.workers.cells.dispatch import top_up
from afpbench.workers.cells.retry import RetryPolicy, Verdict
from afpbench.workers.grading.scorer import decide_without_judges, done_values, gather_evidence, result_row
from afpbench.workers.limits.limiter import get_limiter, pool_key
from afpbench.workers.providers.base import AdapterResult, ChatRequest, OutcomeClass, failure_result, key_for_quiet
from afpbench.workers.providers.endpoints import endpoint_for
from afpbench.workers.providers.registry import adapter_for
from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import get_engine, transaction
from afpbench.workers.store.models import Attempt, Cell, Phase, Result, Sweep, SweepStatus, as_utc, cell_key, utcnow
from afpbench.workers.sweeps.inputs import SweepInputs, inputs_for, validity_for
from afpbench.workers.sweeps.spec import ModelSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoreNext:
    cell_id: int


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


def _model_of(inputs: SweepInputs, cell: Cell) -> ModelSpec:
    for m in inputs.spec.models:
        if m.model_hash == cell.model_hash:
            return m
    raise LookupError(f"cell {cell.id}: no model with hash {cell.model_hash} in sweep {cell.sweep_id}")


# Outcomes of an attempt row that has no provider answer recorded (not OutcomeClass values).
ATTEMPT_STARTED = "started"  # claimed, the call under way (or its worker died: see below)
ATTEMPT_INTERRUPTED = "interrupted"  # its worker was lost mid-try; a later claim took the cell over


@dataclass(frozen=True)
class _Claimed:
    attempt_id: int
    number: int  # the cell's attempt count after this claim: the fence checked when recording


CELL, ATTEMPT, RESULT, SWEEP = Cell.__table__, Attempt.__table__, Result.__table__, Sweep.__table__

# The hot path's statements are built once (compiled once, cache key memoised) and run on a Core
# connection: per cell that is a read, a claim and a record transaction, a few hundred microseconds each.
_CLAIM = (
    update(CELL)
    .where(
        CELL.c.id == bindparam("b_cell"),
        or_(
            CELL.c.phase.in_([Phase.pending.value, Phase.queued.value]),
            (CELL.c.phase == Phase.executing.value) & (CELL.c.lease_until < bindparam("b_now")),
        ),
    )
    .values(
        phase=Phase.executing.value,
        lease_owner=bindparam("b_worker"),
        lease_until=bindparam("b_lease_until"),
        attempts=CELL.c.attempts + 1,
        updated_at=bindparam("b_now"),
    )
    .returning(CELL.c.attempts)
)
_INTERRUPT = (
    update(ATTEMPT)
    .where(ATTEMPT.c.cell_id == bindparam("b_cell"), ATTEMPT.c.outcome == ATTEMPT_STARTED)
    .values(outcome=ATTEMPT_INTERRUPTED, finished_at=bindparam("b_now"), error=bindparam("b_error"))
)
_NEW_ATTEMPT = insert(ATTEMPT).returning(ATTEMPT.c.id)
_FILL_ATTEMPT = update(ATTEMPT).where(ATTEMPT.c.id == bindparam("b_attempt"))  # SET: the params' columns
_MOVE_CELL = update(CELL).where(  # the fence: still ours, still executing
    CELL.c.id == bindparam("b_cell"),
    CELL.c.phase == Phase.executing.value,
    CELL.c.attempts == bindparam("b_number"),
)
_LOAD = (
    select(
        CELL.c.id, CELL.c.sweep_id, CELL.c.model_hash, CELL.c.model_label, CELL.c.condition, CELL.c.fixture_id,
        CELL.c.fixture_version, CELL.c.repeat, CELL.c.phase, CELL.c.state, CELL.c.lease_until, CELL.c.not_before,
        SWEEP.c.status.label("sweep_status"),
    )
    .join(SWEEP, SWEEP.c.id == CELL.c.sweep_id)
    .where(CELL.c.id == bindparam("b_cell"))
)


@dataclass(frozen=True)
class CellRow:
    """The cell's columns the hot path reads, and its sweep's status (one statement, no ORM object)."""

    id: int
    sweep_id: str
    model_hash: str
    model_label: str
    condition: str
    fixture_id: str
    fixture_version: str
    repeat: int
    phase: str
    state: str | None
    lease_until: datetime | None
    not_before: datetime | None
    sweep_status: str

    @property
    def key(self) -> str:
        return cell_key(self)


def _claim(conn: Connection, cell_id: int, worker: str, lease_s: float) -> _Claimed | None:
    """Atomically move a cell into `executing` under our lease; None if someone else holds it.

    Reliability fix: the Attempt row is written with the claim, in the same transaction, so a try whose
    worker is killed mid-call stays on record (outcome "started", then "interrupted" once the next
    claim takes over) instead of leaving only a bumped counter.
    """
    now = utcnow()
    number = conn.execute(
        _CLAIM, {"b_cell": cell_id, "b_now": now, "b_worker": worker,
                 "b_lease_until": now + timedelta(seconds=lease_s)}
    ).scalar_one_or_none()
    if number is None:
        return None
    if number > 1:
        conn.execute(_INTERRUPT, {
            "b_cell": cell_id, "b_now": now,
            "b_error": f"worker lost before the attempt finished; attempt {number} took over after its lease",
        })
    attempt_id = conn.execute(_NEW_ATTEMPT, {
        "cell_id": cell_id, "number": number, "worker": worker, "started_at": now, "outcome": ATTEMPT_STARTED,
        "tool_calls": [], "reasoning_params": {}, "rounds": [], "simulated": False,
    }).scalar_one()
    return _Claimed(attempt_id, number)


def _estimate_tokens(messages: list[dict], params: dict) -> int:
    chars = sum(len(m.get("content") or "") for m in messages)
    return chars // 4 + int(params.get("max_tokens") or params.get("max_completion_tokens") or 1024)


def _run_calculator(result: AdapterResult, round_no: int) -> tuple[list[dict], list[dict]]:
    """Evaluate every calculator call exactly; return (records for the attempt, tool messages)."""
    records, messages = [], []
    for call in result.tool_calls:
        record = {"round": round_no, "id": call.id, "name": call.name, "arguments_raw": call.arguments_raw}
        expression = (call.arguments or {}).get("expression") if call.name == "calculator" else None
        if not isinstance(expression, str):
            output = f"error: unknown tool {call.name!r} or missing 'expression' argument"
            record["error"] = output
        else:
            record["expression"] = expression
            try:
                value = evaluate(expression)
                output = str(value)
                record["result"] = output
            except CalculatorError as exc:
                output = f"error: {exc}"
                record["error"] = str(exc)
        records.append(record)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    return records, messages


def _round_record(result: AdapterResult) -> dict:
    return {
        "request": result.request_sent,
        "http_status": result.http_status,
        "outcome": result.outcome.value,
        "headers": result.headers,
        "raw_body": result.raw_body,
        "latency_ms": round(result.latency_ms, 3),
        "error": result.error,
    }


def _converse(
    model: ModelSpec, inputs: SweepInputs, cell: Cell
) -> tuple[AdapterResult, list[dict], list[dict], dict]:
    """All rounds of one try. Returns the last result, round records, tool-call records, token sums."""
    settings = get_settings()
    fixture = inputs.fixtures[cell.fixture_id]
    prompt = render(cell.condition, fixture, inputs.instructions.text(cell.condition))
    endpoint = endpoint_for(model)
    adapter = adapter_for(model.provider)
    limiter = get_limiter()
    pool = pool_key(model.provider, endpoint.base_url, key_for_quiet(endpoint))
    messages = prompt.messages()
    rounds: list[dict] = []
    tool_records: list[dict] = []
    tokens = {"input": 0, "output": 0, "cached": 0, "reasoning": 0, "latency_ms": 0.0}
    result: AdapterResult | None = None
    started = time.monotonic()
    for round_no in range(1, settings.max_tool_rounds + 1):
        estimate = _estimate_tokens(messages, model.params)
        # The thread pool does not enforce Celery's hard time limit, so the conversation does: a round
        # that could overrun it is not started (the try ends as an infra error and is retried).
        worst_case = time.monotonic() - started + endpoint.connect_timeout_s + endpoint.timeout_s
        if round_no > 1 and worst_case > settings.task_hard_time_limit_s:
            result = failure_result(
                OutcomeClass.infra_error,
                f"tool conversation stopped after {round_no - 1} rounds: another round could exceed "
                f"the hard time limit of {settings.task_hard_time_limit_s} s",
            )
            rounds.append(_round_record(result))
            break
        if round_no > 1:  # the first round's slot was granted before the claim
            grant = limiter.acquire(pool, model.limits, estimate)
            waited = 0.0
            while not grant.granted and waited < 30:  # short, bounded waits inside one conversation
                time.sleep(min(grant.wait_s, 2.0))
                waited += min(grant.wait_s, 2.0)
                grant = limiter.acquire(pool, model.limits, estimate)
            if not grant.granted:
                break
            lease = grant.lease
        else:
            lease = None
        result = adapter.call(endpoint, ChatRequest(messages, prompt.tools, {"X-Afpbench-Cell": cell.key}))
        if lease or model.limits.tokens_per_min:  # round 1's lease is released by the caller
            used = (result.usage.input_tokens or 0) + (result.usage.output_tokens or 0)
            limiter.release(pool, lease, estimate, used if result.usage.input_tokens is not None else None)
        if result.outcome in (OutcomeClass.rate_limited, OutcomeClass.overloaded):
            limiter.cool_down(pool, result.retry_after_s or 1.0)
        rounds.append(_round_record(result))
        for key, value in (
            ("input", result.usage.input_tokens),
            ("output", result.usage.output_tokens),
            ("cached", result.usage.cached_tokens),
            ("reasoning", result.usage.reasoning_tokens),
        ):
            tokens[key] += value or 0
        tokens["latency_ms"] += result.latency_ms
        if result.outcome != OutcomeClass.tool_call or not prompt.tools:
            break
        records, tool_messages = _run_calculator(result, round_no)
        tool_records.extend(records)
        messages = messages + [
            {
                "role": "assistant",
                "content": result.text,
                "tool_calls": [c.to_message_dict() for c in result.tool_calls],
            },
            *tool_messages,
        ]
    assert result is not None
    return result, rounds, tool_records, tokens


def _load(cell_id: int) -> tuple[CellRow, SweepInputs, dict] | None:
    """The cell, its sweep's status, inputs and validity reports: one statement when the caches are warm."""
    with transaction() as conn:
        row = conn.execute(_LOAD, {"b_cell": cell_id}).first()
        if row is None:
            return None
        cell = CellRow(**row._mapping)
        return cell, inputs_for(conn, cell.sweep_id), validity_for(conn, cell.sweep_id)


def execute_cell(
    cell_id: int, worker: str, policy: RetryPolicy | None = None, prepaid: bool = False
) -> ExecutionDecision:
    settings = get_settings()
    policy = policy or RetryPolicy(max_attempts=settings.max_attempts)
    loaded = _load(cell_id)
    if loaded is None:
        return Finished(None, f"cell {cell_id} does not exist")
    cell, inputs, validity = loaded
    if cell.phase in (Phase.awaiting_score, Phase.scoring):
        return ScoreNext(cell_id)  # a redelivery after the attempt was stored: carry on to scoring
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
    pool = pool_key(model.provider, endpoint.base_url, key_for_quiet(endpoint))
    limiter = get_limiter()
    # Reserve a slot up to a quarter of the visibility timeout ahead, so a countdown never nears it.
    reserve_s = min(30.0, settings.visibility_timeout_s / 4)
    estimate = _estimate_tokens([], model.params)
    grant = limiter.acquire(pool, model.limits, estimate, reserve_s=reserve_s, prepaid=prepaid)
    if not grant.granted:
        return RetryLater(grant.wait_s, f"limiter: {grant.reason}", prepaid=grant.prepaid)
    with transaction() as conn:
        # Reliability fix: the lease was hard limit + 60 s. It must outlive the visibility timeout
        # (AFP_LEASE_EXPIRY_S), or a message redelivered from a slow but live worker steals the cell.
        claimed = _claim(conn, cell_id, worker, settings.lease_expiry_s)
    if claimed is None:
        limiter.release(pool, grant.lease)
        limiter.refund(pool, model.limits, estimate)
        return RetryLater(5.0, "claimed by another worker")
    try:
        result, rounds, tool_records, tokens = _converse(model, inputs, cell)
    finally:
        limiter.release(pool, grant.lease)
    decision = _record(cell, claimed, model, inputs, validity, result, rounds, tool_records, tokens, policy)
    top_up(cell.sweep_id)  # a slot in this model's release window just freed
    return decision


def _record(
    cell: CellRow, claimed: _Claimed, model: ModelSpec, inputs: SweepInputs, validity: dict,
    result: AdapterResult, rounds: list[dict], tool_records: list[dict], tokens: dict, policy: RetryPolicy,
) -> ExecutionDecision:
    """Fill in the claim's attempt row and move the cell on, in one transaction.

    A sweep without judges is scored here, in the same transaction (deterministic scoring needs only
    the answer just received): one queue hop and two transactions fewer per cell. Sweeps with judges
    go on to the `score` queue, where judge calls have their own limits.
    """
    now = utcnow()
    attempt_values = {
        "finished_at": now,
        "outcome": result.outcome.value,
        "http_status": result.http_status,
        "error": result.error,
        "output_text": result.text,
        "finish_reason": result.finish_reason,
        "tool_calls": tool_records,
        "input_tokens": tokens["input"] or None,
        "output_tokens": tokens["output"] or None,
        "cached_tokens": tokens["cached"] or None,
        "reasoning_tokens": tokens["reasoning"] or None,
        "latency_ms": round(tokens["latency_ms"], 3),
        "served_model": result.served_model,
        "provider_request_id": result.request_id,
        "reasoning_params": result.reasoning_params,
        "rounds": rounds,
        "simulated": model.simulated,
    }
    # Under the fence below the cell's attempt count is our claim's number, so decide before writing.
    verdict: Verdict = policy.decide(result.outcome, claimed.number, result.retry_after_s)
    cell_values: dict = {"lease_owner": None, "lease_until": None, "updated_at": now}
    decision: ExecutionDecision
    rows: list = []
    if verdict.kind == "score" and not inputs.spec.judges:
        evidence = gather_evidence(inputs, validity, cell.fixture_id, claimed.attempt_id, result.text,
                                   tool_records, result.outcome.value)
        scored = decide_without_judges(evidence)
        # Scoring run 1: under the fence no scorer has touched this cell, so no run exists yet.
        rows.append(result_row(cell.id, cell.sweep_id, 1, scored, evidence.details(scored, [])).model_dump(
            exclude={"id"}))
        cell_values.update(done_values(scored))
        decision = Finished(scored.state.value, cell_values["state_reason"], cell.sweep_id)
    elif verdict.kind == "score":
        cell_values["phase"] = Phase.awaiting_score
        decision = ScoreNext(cell.id)
    elif verdict.kind == "retry":
        cell_values.update(phase=Phase.queued, not_before=now + timedelta(seconds=verdict.delay_s))
        decision = RetryLater(verdict.delay_s, verdict.reason)
    else:
        reason = _reason(verdict.reason, result)
        cell_values.update(phase=Phase.done, state=verdict.state, state_reason=reason)
        decision = Finished(verdict.state, reason, cell.sweep_id)
        rows.append(Result(
            cell_id=cell.id, sweep_id=cell.sweep_id, scoring_run=0, state=verdict.state, rationale=reason,
            details={"attempt_id": claimed.attempt_id, "decided_at": "execution"}, scorer_version="execution",
        ).model_dump(exclude={"id"}))
    with get_engine().connect() as conn:
        with conn.begin():
            conn.execute(_FILL_ATTEMPT, {"b_attempt": claimed.attempt_id, **attempt_values})
            moved = conn.execute(
                _MOVE_CELL, {"b_cell": cell.id, "b_number": claimed.number, **cell_values}
            ).rowcount
            if not moved:
                # Reliability fix (fence): our lease expired and a later claim took the cell over (or it is
                # already past execution). Keep this attempt on record, but leave the cell to the current
                # holder: moving it on from here could give the cell a second result.
                current = conn.execute(select(CELL.c.attempts).where(CELL.c.id == cell.id)).scalar_one()
                note = f"superseded by attempt {current}"
                error = f"{result.error}; {note}" if result.error else note
                conn.execute(_FILL_ATTEMPT, {"b_attempt": claimed.attempt_id, "error": error})
                return Finished(None, f"attempt {claimed.number} superseded")
            if rows:
                conn.execute(insert(RESULT), rows)
            if verdict.kind == "stop_model":
                stop_model(conn, cell, cell_values["state_reason"])
        if isinstance(decision, Finished):
            # After the commit, on the same connection: does the sweep still have an open cell? Only a
            # task that sees none goes on to claim the aggregate (claim_aggregate checks again).
            decision = replace(decision, sweep_open=any_open(conn, cell.sweep_id))
    return decision


def _reason(reason: str, result: AdapterResult) -> str:
    return f"{reason}: {result.error}" if result.error else reason


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
