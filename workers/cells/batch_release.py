"""Release on the batch lane: a batch-lane model's pending one-round cells claimed into provider batches.

One transaction a batch: the batch row, its cells moved pending -> batched with their attempt counted
(the claim's budget rule: never attempt max_attempts + 1 since the cell's latest rerun), an attempt row
each (outcome `started`, worker `batch:<id>`), and the entries tying them together. The batch is sent
to the provider by the poller (batch_poll.py), which a `batches` message wakes; the beat polls it from
then on. A cell that is
`batched` is claimable by nobody else, and the reconciler leaves it to the poller.

A batch carries at most AFP_BATCH_MAX_ENTRIES cells and never more than the provider allows
(`BatchLimits.max_entries`); its bytes stay far below the provider's cap at that count (a pilot prompt is
a few kilobytes; OpenAI allows 200 MB for 50,000). A pool with a batch quota (`limits.batch_queue_tokens`:
the provider's cap on tokens enqueued in pending batches) takes no more than fits beside its open
batches: the limiter's capacity rule, workers/limits/batch_quota.py.
"""

from __future__ import annotations

from sqlalchemy import delete, insert, select, update

from afpbench.scoring.render import render
from afpbench.workers.celery_app import BATCHES, send
from afpbench.workers.cells.claim import ATTEMPT, ATTEMPT_STARTED, CELL, SWEEP_CANCELLED
from afpbench.workers.limits.batch_quota import cells_within_quota
from afpbench.workers.providers.batch import BatchAPI
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.settings import get_settings
from afpbench.workers.store.batch_models import OPEN_BATCH, Batch, BatchEntry
from afpbench.workers.store.db import session_scope, transaction
from afpbench.workers.store.models import Phase, table_of, utcnow
from afpbench.workers.sweeps.endpoints import endpoint_for
from afpbench.workers.sweeps.inputs import SweepInputs
from afpbench.workers.sweeps.lanes import batch_models, tool_fixture_ids
from afpbench.workers.sweeps.pools import pool_limits, pool_of
from afpbench.workers.sweeps.spec import ModelSpec

BATCH, ENTRY = table_of(Batch), table_of(BatchEntry)


def custom_id(cell_id: int, number: int) -> str:
    """An entry's id at the provider: the cell and the attempt (within every provider's charset and 64 chars)."""
    return f"c{cell_id}-a{number}"


def batch_size(model: ModelSpec) -> int:
    adapter = adapter_for(model.provider)
    assert isinstance(adapter, BatchAPI), f"provider {model.provider!r} has no batch API"
    return min(get_settings().batch_max_entries, adapter.batch_limits.max_entries)


def form_batches(sweep_id: str, inputs: SweepInputs) -> int:
    """Claim every pending batch-lane cell of the sweep into batches; how many batches were made."""
    made = 0
    tools = tool_fixture_ids(sweep_id, inputs)
    for model in batch_models(inputs):
        size = batch_size(model)
        while True:
            count = _one_batch(sweep_id, inputs, model, tools, size)
            made += count > 0
            if count < size:
                break
    return made


def input_tokens(inputs: SweepInputs, condition: str, fixture_id: str) -> int:
    """A cell's input tokens as the limiter estimates a prompt: its characters / 4."""
    prompt = render(condition, inputs.fixtures[fixture_id], inputs.instructions.text(condition))
    return sum(len(m.get("content") or "") for m in prompt.messages()) // 4


def _one_batch(sweep_id: str, inputs: SweepInputs, model: ModelSpec, tools: frozenset[str], size: int) -> int:
    """One batch of up to `size` pending cells in one transaction, within the pool's batch quota
    (`limits.batch_queue_tokens`); how many cells it took (0: none left, or no room in the quota)."""
    settings = get_settings()
    now = utcnow()
    pool = pool_of(endpoint_for(model))
    quota = pool_limits(inputs.spec, model).batch_queue_tokens
    with transaction() as conn:
        wanted = select(CELL.c.id, CELL.c.condition, CELL.c.fixture_id).where(
            CELL.c.sweep_id == sweep_id, CELL.c.model_hash == model.model_hash, CELL.c.phase == Phase.pending.value)
        if tools:
            wanted = wanted.where(CELL.c.fixture_id.not_in(tools))
        rows = conn.execute(wanted.order_by(CELL.c.id).limit(size)).all()
        costs = [input_tokens(inputs, r.condition, r.fixture_id) for r in rows] if quota else [0] * len(rows)
        fits = cells_within_quota(conn, pool, quota, costs)
        ids, tokens = [r.id for r in rows[:fits]], sum(costs[:fits])
        if not ids:
            return 0
        batch_id = conn.execute(insert(BATCH).returning(BATCH.c.id), [Batch(
            sweep_id=sweep_id, model_hash=model.model_hash, model_label=model.display, provider=model.provider,
            pool=pool[:300], tokens=tokens, simulated=model.simulated, created_at=now, next_poll_at=now,
        ).model_dump(exclude={"id"})]).scalar_one()
        owner = f"batch:{batch_id}"
        claimed = conn.execute(
            update(CELL)
            .where(CELL.c.id.in_(ids), CELL.c.phase == Phase.pending.value,
                   CELL.c.attempts - CELL.c.attempt_base < settings.max_attempts, ~SWEEP_CANCELLED)
            .values(phase=Phase.batched.value, attempts=CELL.c.attempts + 1, lease_owner=owner, lease_until=None,
                    updated_at=now)
            .returning(CELL.c.id, CELL.c.attempts)
        ).all()
        if not claimed:  # another releaser took these cells first: no batch of ours
            conn.execute(delete(BATCH).where(BATCH.c.id == batch_id))
            return 0
        attempts = conn.execute(insert(ATTEMPT).returning(ATTEMPT.c.id, ATTEMPT.c.cell_id, ATTEMPT.c.number), [
            {"cell_id": cell_id, "number": number, "worker": owner, "started_at": now, "outcome": ATTEMPT_STARTED,
             "tool_calls": [], "reasoning_params": {}, "rounds": [], "simulated": model.simulated}
            for cell_id, number in claimed
        ]).all()
        conn.execute(insert(ENTRY), [
            {"batch_id": batch_id, "custom_id": custom_id(cell_id, number), "cell_id": cell_id,
             "attempt_id": attempt_id, "number": number, "outcome": None}
            for attempt_id, cell_id, number in attempts
        ])
        conn.execute(update(BATCH).where(BATCH.c.id == batch_id).values(entries=len(attempts)))
    return len(claimed)


def kick_due(sweep_id: str | None = None) -> bool:
    """Send a `batches` message when one of the sweep's open batches is due for a look (its poll time
    passed and no poller holds it); the message's task finds which (batch_poll.py)."""
    now = utcnow()
    with session_scope() as session:
        query = select(BATCH.c.id).where(BATCH.c.status.in_(OPEN_BATCH), BATCH.c.next_poll_at <= now,
                                         (BATCH.c.lease_until.is_(None)) | (BATCH.c.lease_until < now))
        if sweep_id is not None:
            query = query.where(BATCH.c.sweep_id == sweep_id)
        due = session.execute(query.limit(1)).first() is not None
    if due:
        send(BATCHES, [sweep_id], "control")
    return due
