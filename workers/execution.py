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
from workers.endpoints import endpoint_for
from workers.inputs import inputs_for_sweep
from workers.limiter import get_limiter, pool_key
from workers.models import Attempt, Cell, Phase, Result, Sweep, SweepStatus, utcnow
from workers.providers.base import AdapterResult, ChatRequest, OutcomeClass, key_for_quiet
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


@dataclass(frozen=True)
class Finished:
    state: str | None
    reason: str


ExecutionDecision = ScoreNext | RetryLater | Finished


def _model_of(sweep: Sweep, cell: Cell) -> ModelSpec:
    for m in inputs_for_sweep(sweep).spec.models:
        if m.model_hash == cell.model_hash:
            return m
    raise LookupError(f"cell {cell.id}: no model with hash {cell.model_hash} in sweep {sweep.id}")


def _claim(session: Session, cell_id: int, worker: str, lease_s: float) -> bool:
    """Atomically move a cell into `executing` under our lease; False if someone else holds it."""
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
    )
    return result.rowcount == 1


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
    model: ModelSpec, sweep: Sweep, cell: Cell
) -> tuple[AdapterResult, list[dict], list[dict], dict]:
    """All rounds of one try. Returns the last result, round records, tool-call records, token sums."""
    settings = get_settings()
    inputs = inputs_for_sweep(sweep)
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
    for round_no in range(1, settings.max_tool_rounds + 1):
        estimate = _estimate_tokens(messages, model.params)
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


def execute_cell(cell_id: int, worker: str, policy: RetryPolicy | None = None) -> ExecutionDecision:
    settings = get_settings()
    policy = policy or RetryPolicy(max_attempts=settings.max_attempts)
    with session_scope() as session:
        cell = session.get(Cell, cell_id)
        if cell is None:
            return Finished(None, f"cell {cell_id} does not exist")
        sweep = session.get(Sweep, cell.sweep_id)
        if cell.phase in (Phase.awaiting_score, Phase.scoring):
            return ScoreNext(cell_id)  # a redelivery after the attempt was stored: carry on to scoring
        if cell.phase == Phase.done:
            return Finished(cell.state, "already done")
        if sweep.status == SweepStatus.cancelled:
            return Finished(None, "sweep cancelled")
        if cell.phase == Phase.executing and cell.lease_until and cell.lease_until > utcnow():
            return RetryLater((cell.lease_until - utcnow()).total_seconds() + 1, "held by another worker")
        if cell.not_before and cell.not_before > utcnow():
            return RetryLater((cell.not_before - utcnow()).total_seconds(), "backoff")
        model = _model_of(sweep, cell)
    endpoint = endpoint_for(model)
    pool = pool_key(model.provider, endpoint.base_url, key_for_quiet(endpoint))
    limiter = get_limiter()
    grant = limiter.acquire(pool, model.limits, _estimate_tokens([], model.params))
    if not grant.granted:
        return RetryLater(grant.wait_s, f"limiter: {grant.reason}")
    with session_scope() as session:
        claimed = _claim(session, cell_id, worker, settings.task_hard_time_limit_s + 60)
    if not claimed:
        limiter.release(pool, grant.lease)
        return RetryLater(5.0, "claimed by another worker")
    started = utcnow()
    try:
        result, rounds, tool_records, tokens = _converse(model, sweep, cell)
    finally:
        limiter.release(pool, grant.lease)
    return _record(cell_id, worker, started, model, result, rounds, tool_records, tokens, policy)


def _record(
    cell_id, worker, started, model, result, rounds, tool_records, tokens, policy
) -> ExecutionDecision:
    """Store the attempt and move the cell on, in one transaction."""
    with session_scope() as session:
        cell = session.get(Cell, cell_id)
        attempt = Attempt(
            cell_id=cell_id,
            number=cell.attempts,
            worker=worker,
            started_at=started,
            finished_at=utcnow(),
            outcome=result.outcome.value,
            http_status=result.http_status,
            error=result.error,
            output_text=result.text,
            finish_reason=result.finish_reason,
            tool_calls=tool_records,
            input_tokens=tokens["input"] or None,
            output_tokens=tokens["output"] or None,
            cached_tokens=tokens["cached"] or None,
            reasoning_tokens=tokens["reasoning"] or None,
            latency_ms=round(tokens["latency_ms"], 3),
            served_model=result.served_model,
            provider_request_id=result.request_id,
            reasoning_params=result.reasoning_params,
            rounds=rounds,
            simulated=model.simulated,
        )
        session.add(attempt)
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


def cells_of_sweep(session: Session, sweep_id: str) -> list[Cell]:
    return list(session.exec(select(Cell).where(Cell.sweep_id == sweep_id)))
