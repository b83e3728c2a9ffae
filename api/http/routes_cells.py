"""Cells: a sweep's cells with filters and paging, and one cell's full run record."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import func
from sqlmodel import col, select

from afpbench.api.http.deps import Authorized, CellId, Limit, Offset, not_found
from afpbench.api.http.schemas import CellPage, CellSummary, RunRecord
from afpbench.reference.protocol_facts import Condition
from afpbench.scoring.states import ResultState
from afpbench.workers.results.listing import CellFilter
from afpbench.workers.results.records import run_record
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Phase, Sweep, saved_id

router = APIRouter(tags=["cells"], dependencies=Authorized)


def _summary(c: Cell) -> CellSummary:
    return CellSummary(
        id=saved_id(c.id), sweep_id=c.sweep_id, model=c.model_label, model_hash=c.model_hash, provider=c.provider,
        condition=c.condition, fixture_id=c.fixture_id, fixture_version=c.fixture_version, repeat=c.repeat,
        high_risk=c.high_risk, phase=c.phase, state=c.state, state_reason=c.state_reason, attempts=c.attempts,
        updated_at=c.updated_at,
    )


@router.get("/sweeps/{sweep_id}/cells", response_model=CellPage,
            responses={404: {"description": "unknown sweep"}})
def list_cells(
    sweep_id: str,
    state: Annotated[ResultState | None, Query(description="result state")] = None,
    phase: Annotated[Phase | None, Query(description="pipeline phase")] = None,
    condition: Annotated[Condition | None, Query()] = None,
    fixture: Annotated[str | None, Query(max_length=80, description="fixture id, or id@version")] = None,
    model: Annotated[str | None, Query(max_length=200, description="model label or model hash")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> CellPage:
    """Ordered by cell id (stable across pages)."""
    where = CellFilter(state=state.value if state else None, phase=phase.value if phase else None,
                       condition=condition, fixture=fixture, model=model).clauses(sweep_id)
    with session_scope() as session:
        if session.exec(select(Sweep.id).where(Sweep.id == sweep_id)).first() is None:  # not its JSON inputs
            raise not_found(f"no sweep with id {sweep_id!r}")
        total = session.exec(select(func.count()).select_from(Cell).where(*where)).one()
        rows = session.exec(select(Cell).where(*where).order_by(col(Cell.id)).offset(offset).limit(limit)).all()
        return CellPage(total=total, limit=limit, offset=offset, items=[_summary(c) for c in rows])


@router.get("/cells/{cell_id}", response_model=RunRecord, responses={404: {"description": "unknown cell"}})
def get_cell(cell_id: CellId) -> RunRecord:
    """The full run record: every attempt with its HTTP rounds (no secrets), judgements, results,
    adjudications and provenance; simulated output is labelled simulated."""
    with session_scope() as session:
        if session.get(Cell, cell_id) is None:
            raise not_found(f"no cell with id {cell_id}")
        return run_record(session, cell_id)
