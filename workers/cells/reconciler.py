"""The reconciler: the backstop that makes SQL, not the broker, the source of truth.

For each running sweep it re-sends messages for cells stuck in a non-terminal phase (after a crash,
a broker restart without persistence, a resume), tops up the release window, and claims the
aggregate when every cell is done. Re-sending is safe because every task is idempotent.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, or_, update
from sqlmodel import col, select

from afpbench.workers.cells.dispatch import release, resend
from afpbench.workers.cells.finish import finish_if_done, resend_aggregate
from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Aggregate, Cell, Phase, Sweep, SweepStatus, saved_id, utcnow


def _stale_threshold() -> timedelta:
    # How long a cell may sit in a non-terminal phase before it counts as lost (AFP_RECONCILE_STALE_S).
    return timedelta(seconds=get_settings().reconcile_stale_s)


def stuck_cells(sweep_id: str, older_than: timedelta) -> list[tuple[int, str, str]]:
    cutoff = utcnow() - older_than
    now = utcnow()
    with session_scope() as session:
        rows = session.exec(
            select(Cell).where(
                Cell.sweep_id == sweep_id,
                col(Cell.phase).in_([Phase.queued, Phase.executing, Phase.awaiting_score, Phase.scoring]),
                Cell.updated_at < cutoff,
            )
        ).all()
        return [
            (saved_id(c.id), c.provider, c.phase)
            for c in rows
            if (c.lease_until is None or c.lease_until < now) and (c.not_before is None or c.not_before < now)
        ]


def _lease_expired(now: datetime) -> ColumnElement[bool]:
    return or_(col(Cell.lease_until).is_(None), col(Cell.lease_until) < now)


def expire_overlong_leases(sweep_id: str) -> int:
    """No lease reaches further ahead than AFP_LEASE_EXPIRY_S, whatever its holder asked for (a scorer
    of an older version claimed for 15 minutes, or the setting was lowered since): such a lease is cut
    back to now + AFP_LEASE_EXPIRY_S. A live holder renews its lease to exactly that (store/lease.py), so this
    never shortens a live lease below what its holder keeps renewing, and the reconciler never takes a
    live lease over: only a lease that runs out (its holder stopped renewing) frees the cell."""
    now = utcnow()
    horizon = now + timedelta(seconds=get_settings().lease_expiry_s)
    with session_scope() as session:
        res = session.exec(
            update(Cell)
            .where(
                col(Cell.sweep_id) == sweep_id,
                col(Cell.phase).in_([Phase.executing, Phase.scoring]),
                col(Cell.lease_until) > horizon,
            )
            .values(lease_until=horizon)
        )
        return res.rowcount


def _mark_resent(cells: list[tuple[int, str, str]], older_than: timedelta) -> list[tuple[int, str, str]]:
    """Stamp the cells being re-sent (updated_at = now) so the next pass does not send
    them again before another stale period. Without it every beat re-sent every cell still waiting in a
    long queue, and the copies piled up faster than the workers could drain them. A cell claimed since
    it was found stuck (its lease now live) is neither stamped nor re-sent."""
    if not cells:
        return []
    now = utcnow()
    with session_scope() as session:
        stamped = set(session.execute(
            update(Cell)
            .where(col(Cell.id).in_([c[0] for c in cells]), col(Cell.updated_at) < now - older_than,
                   _lease_expired(now))
            .values(updated_at=now)
            .returning(col(Cell.id))
        ).scalars())
    return [c for c in cells if c[0] in stamped]


def reconcile_sweep(sweep_id: str, older_than: timedelta | None = None) -> int:
    older_than = older_than or _stale_threshold()
    expire_overlong_leases(sweep_id)
    sent = resend(_mark_resent(stuck_cells(sweep_id, older_than), older_than), sweep_id)
    sent += release(sweep_id)
    finish_if_done(sweep_id, "reconciler")
    return sent


def unfinished_aggregates(older_than: timedelta) -> list[str]:
    """Sweeps whose aggregate was claimed but never stored (its message was lost with the broker)."""
    cutoff = utcnow() - older_than
    with session_scope() as session:
        return list(session.exec(
            select(Aggregate.sweep_id).where(col(Aggregate.finished_at).is_(None), Aggregate.claimed_at < cutoff)
        ))


def reconcile_sweeps(sweep_id: str | None = None, older_than: timedelta | None = None) -> int:
    older_than = older_than or _stale_threshold()
    with session_scope() as session:
        q = select(Sweep.id).where(Sweep.status == SweepStatus.running)
        if sweep_id:
            q = select(Sweep.id).where(Sweep.id == sweep_id)
        ids = list(session.exec(q))
    sent = sum(reconcile_sweep(s, older_than) for s in ids)
    # A claimed aggregate whose message was lost was never computed; send it again (aggregation
    # overwrites the sweep's one row, so a duplicate is harmless).
    for s in unfinished_aggregates(older_than):
        if sweep_id in (None, s):
            resend_aggregate(s)
            sent += 1
    return sent
