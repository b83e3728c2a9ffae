"""The sweep's reruns read back for the summary (and so the report, the export and the viewer): each
rerun with its note, and how many attempts and results they superseded (workers/cells/rerun.py: a
cell's attempts up to attempt_base and its results below result_base)."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import Session, col, select

from afpbench.workers.results.summary import RerunEntry, Superseded
from afpbench.workers.store.models import Attempt, Cell, Rerun, Result, as_utc


def reruns(session: Session, sweep_id: str) -> list[RerunEntry]:
    rows = session.exec(select(Rerun).where(Rerun.sweep_id == sweep_id).order_by(col(Rerun.number))).all()
    return [RerunEntry(number=r.number, at=as_utc(r.created_at).isoformat(timespec="seconds"), states=r.states,
                       model=r.model, fixture=r.fixture, cells=r.cells, note=r.note) for r in rows]


def superseded(session: Session, sweep_id: str) -> Superseded:
    reopened = (col(Cell.sweep_id) == sweep_id) & (col(Cell.rerun_id).is_not(None))
    attempts = session.exec(select(func.count()).select_from(Attempt).join(Cell, col(Cell.id) == Attempt.cell_id)
                            .where(reopened, col(Attempt.number) <= Cell.attempt_base)).one()
    results = session.exec(select(func.count()).select_from(Result).join(Cell, col(Cell.id) == Result.cell_id)
                           .where(reopened, col(Result.scoring_run) < Cell.result_base)).one()
    return Superseded(attempts=attempts, results=results)
