"""Completion is a database fact: the task that finishes the last cell claims the sweep's aggregate
row (primary key = sweep id, so exactly one claim can succeed) and enqueues the aggregation.
The reconciler calls the same function as a backstop."""

from __future__ import annotations

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from workers.db import session_scope
from workers.models import Aggregate, Cell, Phase, Sweep, SweepStatus, utcnow


def open_cells(session, sweep_id: str) -> int:
    return session.exec(
        select(func.count()).select_from(Cell).where(Cell.sweep_id == sweep_id, Cell.phase != Phase.done)
    ).one()


def any_open(session, sweep_id: str) -> bool:
    """Cheap on the per-task path: stops at the first unfinished cell (index on sweep_id, phase)."""
    q = select(Cell.id).where(Cell.sweep_id == sweep_id, Cell.phase != Phase.done).limit(1)
    return session.exec(q).first() is not None


def claim_aggregate(sweep_id: str, worker: str) -> bool:
    """True for exactly one caller once every cell of the sweep is done."""
    with session_scope() as session:
        if any_open(session, sweep_id):
            return False
    try:
        with session_scope() as session:
            session.add(Aggregate(sweep_id=sweep_id, claimed_by=worker))
            sweep = session.get(Sweep, sweep_id)
            if sweep.status == SweepStatus.running:
                sweep.status = SweepStatus.complete
                sweep.finished_at = utcnow()
                session.add(sweep)
    except IntegrityError:
        return False
    return True
