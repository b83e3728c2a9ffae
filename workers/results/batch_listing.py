"""The batch lane's batches of a sweep as `afpbench status`, `run` and the viewer show them: one typed
row per batch (workers/store/batch_models.py), read live (the summary holds results, not transport).
The table itself is workers/results/tables.py:BATCHES."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from afpbench.scoring.rates import Contract
from afpbench.workers.store.batch_models import Batch
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import as_utc, table_of

BATCH = table_of(Batch)


class BatchState(Contract):
    id: int
    model: str
    provider: str
    status: str  # ours: created, submitting, submitted, ended, failed
    provider_status: str | None  # the provider's own word
    provider_batch_id: str | None
    entries: int
    recorded: int
    answered: int
    submitted_at: datetime | None
    expires_at: datetime | None
    error: str | None
    simulated: bool


def batch_states(sweep_id: str) -> list[BatchState]:
    with session_scope() as session:
        rows = session.execute(select(
            BATCH.c.id, BATCH.c.model_label, BATCH.c.provider, BATCH.c.status, BATCH.c.provider_status,
            BATCH.c.provider_batch_id, BATCH.c.entries, BATCH.c.recorded, BATCH.c.answered, BATCH.c.submitted_at,
            BATCH.c.expires_at, BATCH.c.error, BATCH.c.simulated,
        ).where(BATCH.c.sweep_id == sweep_id).order_by(BATCH.c.id)).all()
    return [BatchState(id=r.id, model=r.model_label, provider=r.provider, status=r.status,
                       provider_status=r.provider_status, provider_batch_id=r.provider_batch_id, entries=r.entries,
                       recorded=r.recorded, answered=r.answered,
                       submitted_at=as_utc(r.submitted_at) if r.submitted_at else None,
                       expires_at=as_utc(r.expires_at) if r.expires_at else None, error=r.error, simulated=r.simulated)
            for r in rows]
