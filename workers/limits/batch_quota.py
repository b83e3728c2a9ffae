"""The provider's batch quota, the limiter's one capacity (not rate) rule: the most input tokens a pool's
pending batches may hold at once (`limits.batch_queue_tokens`, OpenAI's enqueued-token limit).

Counted in SQL over the pool's open batches, not in Redis like the rate buckets (in_redis.py): the quota
is held for as long as a batch is open (up to the provider's 24 h window), so the count must outlive a
Redis flush and a worker restart, and it is exact because a batch's tokens are written in the same
transaction that forms it. On PostgreSQL the pool is locked for that transaction (an advisory lock), so
two workers forming batches at once never both take the same room; SQLite serialises writers anyway.
A batch that ends (or fails) gives its room back by leaving the open statuses.
"""

from __future__ import annotations

from sqlalchemy import Connection, func, select, text

from afpbench.workers.store.batch_models import OPEN_BATCH, Batch
from afpbench.workers.store.models import table_of

BATCH = table_of(Batch)


def cells_within_quota(conn: Connection, pool: str, quota: int | None, costs: list[int]) -> int:
    """How many of the cells (their token estimates, in order) fit the pool's batch quota beside its open
    batches: all without a quota; at least one when nothing is queued (a cell bigger than the quota is
    still sent, alone). Call inside the transaction that writes the batch."""
    if quota is None:
        return len(costs)
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:pool))"), {"pool": pool})
    queued = conn.execute(select(func.coalesce(func.sum(BATCH.c.tokens), 0))
                          .where(BATCH.c.pool == pool, BATCH.c.status.in_(OPEN_BATCH))).scalar_one()
    room, taken = quota - queued, 0
    for cost in costs:
        if cost > room and (taken or queued):
            break
        room -= cost
        taken += 1
    return taken
