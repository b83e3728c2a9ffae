"""Execute one cell: claim it, respect the pool's limits, call the model (with calculator rounds for
numeric fixtures), store the attempt, and say what happens next as a typed decision.

The Celery task (afpbench/workers/tasks.py) only maps the decision (decisions.py) onto the queue: score
next, retry after a delay (the worker slot is given back), or nothing more to do. The record of a try that
made a request: recording.py.
"""

from __future__ import annotations

from afpbench.scoring.states import ResultState
from afpbench.workers.cells.claim import (
    ATTEMPT_NOT_SENT,
    FILL_ATTEMPT,
    MOVE_CELL,
    CellRow,
    Claimed,
    Exhausted,
    claim_cell,
    load_cell,
)
from afpbench.workers.cells.conversation import converse, estimate_tokens, sent_rounds
from afpbench.workers.cells.decisions import ExecutionDecision, Finished, RetryLater, ScoreNext
from afpbench.workers.cells.dispatch import top_up
from afpbench.workers.cells.recording import record_try
from afpbench.workers.cells.retry import RetryPolicy
from afpbench.workers.limits.shared import get_limiter
from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import transaction
from afpbench.workers.store.lease import hold_execution
from afpbench.workers.store.models import Phase, SweepStatus, as_utc, utcnow
from afpbench.workers.sweeps.endpoints import endpoint_for
from afpbench.workers.sweeps.inputs import SweepInputs
from afpbench.workers.sweeps.pools import pool_limits, pool_of
from afpbench.workers.sweeps.progress import is_cancelled
from afpbench.workers.sweeps.spec import ModelSpec
from afpbench.workers.sweeps.time_limits import scoring_limits, slot_lease_s


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
        decision = record_try(cell, claimed, model, inputs, validity, result, rounds, tool_records, tokens, policy)
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
