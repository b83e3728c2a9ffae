"""Execute one cell: claim it, respect the pool's limits, call the model (with calculator rounds for
numeric fixtures), store the attempt, and say what happens next as a typed decision.

The Celery task (workers/tasks.py) only maps the decision onto the queue: score next, retry after a
delay (the worker slot is given back), or nothing more to do.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import or_, update
from sqlmodel import Session, select

from scoring.calculator import CalculatorError, evaluate
from scoring.render import render
from scoring.states import ResultState
from workers.db import session_scope
from workers.dispatch import top_up
from workers.endpoints import endpoint_for
from workers.inputs import SweepInputs, inputs_for
from workers.limiter import get_limiter, pool_key
from workers.models import Attempt, Cell, Phase, Result, Sweep, SweepStatus, utcnow
from workers.providers.base import AdapterResult, ChatRequest, OutcomeClass, failure_result, key_for_quiet
from workers.providers.registry import adapter_for
from workers.retry import RetryPolicy, Verdict
from workers.settings import get_settings
from workers.spec import ModelSpec

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


def _claim(session: Session, cell_id: int, worker: str, lease_s: float) -> _Claimed | None:
    """Atomically move a cell into `executing` under our lease; None if someone else holds it.

    Reliability fix: the Attempt row is written with the claim, in the same transaction, so a try whose
    worker is killed mid-call stays on record (outcome "started", then "interrupted" once the next
    claim takes over) instead of leaving only a bumped counter.
    """
    now = utcnow()
    result = session.execute(
        update(Cell)
        .where(
            Cell.id == cell_id,
            or_(
                Cell.phase.in_([Phase.pending, Phase.queued]),
                (Cell.phase == Phase.executing) & (Cell.lease_until < now),
            ),
        )
        .values(
            phase=Phase.executing,
            lease_owner=worker,
            lease_until=now + timedelta(seconds=lease_s),
            attempts=Cell.attempts + 1,
            updated_at=now,
        )
        .returning(Cell.attempts)
    )
    number = result.scalar_one_or_none()
    if number is None:
        return None
    if number > 1:
        session.execute(
            update(Attempt)
            .where(Attempt.cell_id == cell_id, Attempt.outcome == ATTEMPT_STARTED)
            .values(outcome=ATTEMPT_INTERRUPTED, finished_at=now,
                    error=f"worker lost before the attempt finished; attempt {number} took over after its lease")
        )
    attempt = Attempt(cell_id=cell_id, number=number, worker=worker, started_at=now, outcome=ATTEMPT_STARTED)
    session.add(attempt)
    session.flush()
    return _Claimed(attempt.id, number)


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


def execute_cell(
    cell_id: int, worker: str, policy: RetryPolicy | None = None, prepaid: bool = False
) -> ExecutionDecision:
    settings = get_settings()
    policy = policy or RetryPolicy(max_attempts=settings.max_attempts)
    with session_scope() as session:
        cell = session.get(Cell, cell_id)
        if cell is None:
            return Finished(None, f"cell {cell_id} does not exist")
        status = session.exec(select(Sweep.status).where(Sweep.id == cell.sweep_id)).one()
        if cell.phase in (Phase.awaiting_score, Phase.scoring):
            return ScoreNext(cell_id)  # a redelivery after the attempt was stored: carry on to scoring
        if cell.phase == Phase.done:
            return Finished(cell.state, "already done")
        if status == SweepStatus.cancelled:
            return Finished(None, "sweep cancelled")
        if cell.phase == Phase.executing and cell.lease_until and cell.lease_until > utcnow():
            return RetryLater((cell.lease_until - utcnow()).total_seconds() + 1, "held by another worker")
        if cell.not_before and cell.not_before > utcnow():
            return RetryLater((cell.not_before - utcnow()).total_seconds(), "backoff")
        inputs = inputs_for(session, cell.sweep_id)
        model = _model_of(inputs, cell)
    endpoint = endpoint_for(model)
    pool = pool_key(model.provider, endpoint.base_url, key_for_quiet(endpoint))
    limiter = get_limiter()
    # Reserve a slot up to a quarter of the visibility timeout ahead, so a countdown never nears it.
    reserve_s = min(30.0, settings.visibility_timeout_s / 4)
    grant = limiter.acquire(
        pool, model.limits, _estimate_tokens([], model.params), reserve_s=reserve_s, prepaid=prepaid
    )
    if not grant.granted:
        return RetryLater(grant.wait_s, f"limiter: {grant.reason}", prepaid=grant.prepaid)
    with session_scope() as session:
        # Reliability fix: the lease was hard limit + 60 s. It must outlive the visibility timeout
        # (AFP_LEASE_EXPIRY_S), or a message redelivered from a slow but live worker steals the cell.
        claimed = _claim(session, cell_id, worker, settings.lease_expiry_s)
    if claimed is None:
        limiter.release(pool, grant.lease)
        return RetryLater(5.0, "claimed by another worker")
    try:
        result, rounds, tool_records, tokens = _converse(model, inputs, cell)
    finally:
        limiter.release(pool, grant.lease)
    decision = _record(cell_id, claimed, model, result, rounds, tool_records, tokens, policy)
    top_up(cell.sweep_id)  # a slot in this model's release window just freed
    return decision


def _record(
    cell_id, claimed: _Claimed, model, result, rounds, tool_records, tokens, policy
) -> ExecutionDecision:
    """Fill in the claim's attempt row and move the cell on, in one transaction."""
    with session_scope() as session:
        cell = session.get(Cell, cell_id, with_for_update=True)
        attempt = session.get(Attempt, claimed.attempt_id)
        attempt.finished_at = utcnow()
        attempt.outcome = result.outcome.value
        attempt.http_status = result.http_status
        attempt.error = result.error
        attempt.output_text = result.text
        attempt.finish_reason = result.finish_reason
        attempt.tool_calls = tool_records
        attempt.input_tokens = tokens["input"] or None
        attempt.output_tokens = tokens["output"] or None
        attempt.cached_tokens = tokens["cached"] or None
        attempt.reasoning_tokens = tokens["reasoning"] or None
        attempt.latency_ms = round(tokens["latency_ms"], 3)
        attempt.served_model = result.served_model
        attempt.provider_request_id = result.request_id
        attempt.reasoning_params = result.reasoning_params
        attempt.rounds = rounds
        attempt.simulated = model.simulated
        session.add(attempt)
        if cell.phase != Phase.executing or cell.attempts != claimed.number:
            # Reliability fix (fence): our lease expired and a later claim took the cell over (or it is
            # already past execution). Keep this attempt on record, but leave the cell to the current
            # holder: moving it on from here could give the cell a second result.
            note = f"superseded by attempt {cell.attempts}"
            attempt.error = f"{attempt.error}; {note}" if attempt.error else note
            return Finished(cell.state, f"attempt {claimed.number} superseded")
        verdict: Verdict = policy.decide(result.outcome, cell.attempts, result.retry_after_s)
        cell.lease_owner = None
        cell.lease_until = None
        cell.updated_at = utcnow()
        decision: ExecutionDecision
        if verdict.kind == "score":
            cell.phase = Phase.awaiting_score
            decision = ScoreNext(cell_id)
        elif verdict.kind == "retry":
            cell.phase = Phase.queued
            cell.not_before = utcnow() + timedelta(seconds=verdict.delay_s)
            decision = RetryLater(verdict.delay_s, verdict.reason)
        else:
            cell.phase = Phase.done
            cell.state = verdict.state
            cell.state_reason = _reason(verdict.reason, result)
            decision = Finished(verdict.state, cell.state_reason)
            session.flush()
            session.add(
                Result(
                    cell_id=cell_id,
                    sweep_id=cell.sweep_id,
                    scoring_run=0,
                    state=verdict.state,
                    rationale=cell.state_reason,
                    details={"attempt_id": attempt.id, "decided_at": "execution"},
                    scorer_version="execution",
                )
            )
        session.add(cell)
        if verdict.kind == "stop_model":
            stop_model(session, cell, cell.state_reason)
    return decision


def _reason(reason: str, result: AdapterResult) -> str:
    return f"{reason}: {result.error}" if result.error else reason


def stop_model(session: Session, cell: Cell, reason: str) -> int:
    """An auth/config error stops the model's remaining cells with one clear reason, not N failures."""
    res = session.execute(
        update(Cell)
        .where(
            Cell.sweep_id == cell.sweep_id,
            Cell.model_hash == cell.model_hash,
            Cell.phase.in_([Phase.pending, Phase.queued]),
        )
        .values(
            phase=Phase.done, state=ResultState.INFRA_ERROR.value, state_reason=f"model stopped: {reason}"
        )
    )
    sweep = session.get(Sweep, cell.sweep_id)
    notice = f"model {cell.model_label} stopped: {reason}"
    if notice not in sweep.notices:
        sweep.notices = [*sweep.notices, notice]
        session.add(sweep)
    log.warning(json.dumps({"event": "model_stopped", "sweep": cell.sweep_id, "model": cell.model_label}))
    return res.rowcount
