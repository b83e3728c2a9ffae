"""Small reads the viewer pages share: the latest result of each cell (the one the report counts)."""

from __future__ import annotations

from sqlmodel import Session, col, select

from afpbench.workers.store.models import Result


def latest_results(session: Session, cell_ids: list[int]) -> dict[int, Result]:
    """cell id -> its newest Result row (highest scoring run), for the given cells."""
    out: dict[int, Result] = {}
    if not cell_ids:
        return out
    q = select(Result).where(col(Result.cell_id).in_(cell_ids)).order_by(col(Result.scoring_run), col(Result.id))
    for r in session.exec(q):
        out[r.cell_id] = r
    return out
