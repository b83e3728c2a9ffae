"""The reconciler: the backstop that makes SQL, not the broker, the source of truth.

For each running sweep it re-sends messages for cells stuck in a non-terminal phase (after a crash,
a broker restart without persistence, a resume), tops up the release window, and claims the
aggregate when every cell is done. Re-sending is safe because every task is idempotent.
"""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import select

from workers.completion import claim_aggregate
from workers.db import session_scope
from workers.dispatch import release, resend
from workers.models import Cell, Phase, Sweep, SweepStatus, utcnow


def stuck_cells(sweep_id: str, older_than: timedelta) -> list[tuple[int, str, str]]:
    cutoff = utcnow() - older_than
    now = utcnow()
    with session_scope() as session:
        rows = session.exec(
            select(Cell).where(
                Cell.sweep_id == sweep_id,
                Cell.phase.in_([Phase.queued, Phase.executing, Phase.awaiting_score, Phase.scoring]),
                Cell.updated_at < cutoff,
            )
        ).all()
        return [
            (c.id, c.provider, c.phase)
            for c in rows
            if (c.lease_until is None or c.lease_until < now) and (c.not_before is None or c.not_before < now)
        ]


def reconcile_sweep(sweep_id: str, older_than: timedelta = timedelta(minutes=10)) -> int:
    sent = resend(stuck_cells(sweep_id, older_than))
    sent += release(sweep_id)
    if claim_aggregate(sweep_id, "reconciler"):
        from workers.tasks import aggregate

        aggregate.apply_async(args=[sweep_id], queue="aggregate")
    return sent


def reconcile_sweeps(sweep_id: str | None = None, older_than: timedelta = timedelta(minutes=10)) -> int:
    with session_scope() as session:
        q = select(Sweep.id).where(Sweep.status == SweepStatus.running)
        if sweep_id:
            q = select(Sweep.id).where(Sweep.id == sweep_id)
        ids = list(session.exec(q))
    return sum(reconcile_sweep(s, older_than) for s in ids)
