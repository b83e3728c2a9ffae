"""The human decisions of a sweep, read back as its trail: for the summary (and so the report), the
export bundle and `afpbench verify`.

A decision is an Adjudication row plus the Result row it added; the result's details say the state it
changed from, whether it was an override and why (workers/grading/adjudication.py writes them).
"""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import Session, col, select

from afpbench.workers.results.summary import HumanDecisionEntry
from afpbench.workers.store.models import Adjudication, Cell, Result, as_utc, saved_id


def decision_count(session: Session, sweep_id: str) -> int:
    q = select(func.count(col(Adjudication.id))).join(Cell, col(Cell.id) == Adjudication.cell_id).where(
        Cell.sweep_id == sweep_id)
    return int(session.exec(q).one())


def human_decisions(session: Session, sweep_id: str) -> list[HumanDecisionEntry]:
    """Every human decision on the sweep's cells, oldest first."""
    rows = session.exec(
        select(Adjudication, Cell).join(Cell, col(Cell.id) == Adjudication.cell_id)
        .where(Cell.sweep_id == sweep_id).order_by(col(Adjudication.id))
    ).all()
    details = _result_details(session, sweep_id)
    out = []
    for adjudication, cell in rows:
        d = details.get(saved_id(adjudication.id), {})
        out.append(HumanDecisionEntry(
            adjudication_id=saved_id(adjudication.id), cell_id=saved_id(cell.id), model=cell.model_label,
            condition=cell.condition,
            fixture=f"{cell.fixture_id}@{cell.fixture_version}", repeat=cell.repeat,
            from_state=d.get("from_state"), to_state=adjudication.state, override=bool(d.get("override")),
            reviewer=adjudication.reviewer, reason=d.get("reason") or adjudication.note,
            decided_at=as_utc(adjudication.created_at).isoformat(timespec="seconds")
            if adjudication.created_at else None,
        ))
    return out


def _result_details(session: Session, sweep_id: str) -> dict[int, dict]:
    """adjudication id -> the details of the Result row the decision added."""
    q = select(Result.details).where(Result.sweep_id == sweep_id, Result.details["source"].as_string() == "human")
    out = {}
    for (d,) in session.execute(q).all():
        if isinstance(d, dict) and isinstance(d.get("adjudication_id"), int):
            out[d["adjudication_id"]] = d
    return out
