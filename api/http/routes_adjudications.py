"""Adjudication: the disputed cells, and a human decision on one (added as rows, nothing overwritten)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status
from sqlmodel import select

from afpbench.api.http.deps import Authorized, CellId, Limit, Offset, not_found, unprocessable
from afpbench.api.http.door import WRONG_ORIGIN_RESPONSE
from afpbench.api.http.schemas import DecisionRecorded, DecisionRequest, Dispute, DisputePage
from afpbench.workers.grading import adjudication
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Sweep

router = APIRouter(prefix="/adjudications", tags=["adjudication"], dependencies=Authorized)


@router.get("", response_model=DisputePage, responses={404: {"description": "unknown sweep"}})
def list_disputes(
    sweep: Annotated[str | None, Query(max_length=32, description="only this sweep's disputes")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> DisputePage:
    """Cells in GRADER_DISPUTE, waiting for a human decision."""
    if sweep is not None:
        with session_scope() as session:
            if session.exec(select(Sweep.id).where(Sweep.id == sweep)).first() is None:
                raise not_found(f"no sweep with id {sweep!r}")
    disputes = adjudication.list_disputes(sweep)
    page = disputes[offset:offset + limit]
    return DisputePage(total=len(disputes), limit=limit, offset=offset, items=[Dispute(**d) for d in page])


@router.post("/{cell_id}", status_code=status.HTTP_201_CREATED, response_model=DecisionRecorded,
             responses={403: WRONG_ORIGIN_RESPONSE, 404: {"description": "unknown cell"},
                        422: {"description": "a decision the pass rule or the protocol does not allow, or "
                                             "a cell that is not disputed without override and reason"}})
def decide(cell_id: CellId, body: DecisionRequest) -> DecisionRecorded:
    """Record a reviewer's decision on a GRADER_DISPUTE cell; any other finished cell needs
    `override: true` and a non-empty `reason`. It must resolve the cell and agree with the sealed pass
    rule: MODEL_PASS needs scores meeting it and no fatal criterion; MODEL_FAIL needs scores below it or
    a fatal criterion. The cell's reported state follows the newest result; history stays."""
    with session_scope() as session:
        if session.get(Cell, cell_id) is None:
            raise not_found(f"no cell with id {cell_id}")
    try:
        out = adjudication.record_human_decision(
            cell_id, body.reviewer, body.state.value, body.note, scores=body.scores,
            fatal_criterion=body.fatal_criterion.value if body.fatal_criterion else None,
            override=body.override, reason=body.reason,
        )
    except adjudication.AdjudicationError as exc:
        raise unprocessable(str(exc), ("body",), "adjudication_error") from None
    return DecisionRecorded(**out)
