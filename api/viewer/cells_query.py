"""Small reads the viewer pages share: the latest result of each cell (the one the report counts)."""

from __future__ import annotations

from sqlmodel import Session, select

from afpbench.workers.store.models import Result


def latest_results(session: Session, cell_ids: list[int]) -> dict[int, Result]:
    """cell id -> its newest Result row (highest scoring run), for the given cells."""
    out: dict[int, Result] = {}
    if not cell_ids:
        return out
    for r in session.exec(select(Result).where(Result.cell_id.in_(cell_ids)).order_by(Result.scoring_run, Result.id)):
        out[r.cell_id] = r
    return out
