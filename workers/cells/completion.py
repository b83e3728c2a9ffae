"""Completion is a database fact: whoever sees the last cell done claims the sweep's aggregate row
(primary key = sweep id, so exactly one claim can succeed). finish.py turns the claim into a summary."""

from __future__ import annotations

from sqlalchemy import bindparam, func
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from afpbench.workers.store.db import session_scope, transaction
from afpbench.workers.store.models import Aggregate, Cell, Phase, Sweep, SweepStatus, phase_in, utcnow

OPEN_PHASES = [p.value for p in Phase if p != Phase.done]


def open_cells(session, sweep_id: str) -> int:
    return session.exec(
        select(func.count()).select_from(Cell).where(Cell.sweep_id == sweep_id, Cell.phase != Phase.done)
    ).one()


def any_open(session, sweep_id: str) -> bool:
    """Cheap on the per-task path: index seeks on (sweep_id, phase) for each open phase, first row only.
    (`phase != done` would walk every done cell of the sweep first: quadratic over a big sweep.)"""
    return session.execute(_ANY_OPEN, {"b_sweep": sweep_id}).first() is not None  # ORM session or Core connection


# Built once: it runs after every cell's record (a statement built per call was a tenth of the record's CPU).
_ANY_OPEN = (
    select(Cell.id).where(Cell.sweep_id == bindparam("b_sweep"), phase_in(col(Cell.phase), OPEN_PHASES)).limit(1)
)


def sweep_of_cell(cell_id: int) -> str:
    with session_scope() as session:
        return session.exec(select(Cell.sweep_id).where(Cell.id == cell_id)).one()


def claim_aggregate(sweep_id: str, worker: str) -> bool:
    """True for exactly one caller once every cell of the sweep is done."""
    with transaction() as conn:
        if any_open(conn, sweep_id):
            return False
    try:
        with session_scope() as session:
            session.add(Aggregate(sweep_id=sweep_id, claimed_by=worker))
            sweep = session.get(Sweep, sweep_id)
            # The flush before this read inserted the Aggregate row, whose foreign key needs the sweep.
            assert sweep is not None, f"the aggregate row of {sweep_id!r} references an existing sweep"
            if sweep.status == SweepStatus.running:
                sweep.status = SweepStatus.complete
                sweep.finished_at = utcnow()
                session.add(sweep)
    except IntegrityError:
        return False
    return True

