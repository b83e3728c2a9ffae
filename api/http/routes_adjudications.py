"""Adjudication: the disputed cells, and a human decision on one (added as rows, nothing overwritten)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from afpbench.api.http.deps import Authorized, CellId, Limit, Offset, SessionDep, not_found, unprocessable
from afpbench.api.http.schemas import DecisionRecorded, DecisionRequest, Dispute, DisputePage
from afpbench.workers.grading import adjudication
from afpbench.workers.store.models import Cell, Sweep

router = APIRouter(prefix="/adjudications", tags=["adjudication"], dependencies=Authorized)


@router.get("", response_model=DisputePage, responses={404: {"description": "unknown sweep"}})
def list_disputes(
    session: SessionDep,
    sweep: Annotated[str | None, Query(max_length=32, description="only this sweep's disputes")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> DisputePage:
    """Cells in GRADER_DISPUTE, waiting for a human decision."""
    if sweep is not None and session.get(Sweep, sweep) is None:
        raise not_found(f"no sweep with id {sweep!r}")
    disputes = adjudication.list_disputes(sweep)
    page = disputes[offset:offset + limit]
    return DisputePage(total=len(disputes), limit=limit, offset=offset, items=[Dispute(**d) for d in page])


@router.post("/{cell_id}", status_code=status.HTTP_201_CREATED, response_model=DecisionRecorded,
             responses={404: {"description": "unknown cell"},
                        422: {"description": "a decision the pass rule or the protocol does not allow, or "
                                             "a cell that is not disputed without override and reason"}})
def decide(cell_id: CellId, body: DecisionRequest, session: SessionDep) -> DecisionRecorded:
    """Record a reviewer's decision on a GRADER_DISPUTE cell; any other finished cell needs
    `override: true` and a non-empty `reason`. It must resolve the cell and agree with the sealed pass
    rule: MODEL_PASS needs scores meeting it and no fatal criterion; MODEL_FAIL needs scores below it or
    a fatal criterion. The cell's reported state follows the newest result; history stays."""
    if session.get(Cell, cell_id) is None:
        raise not_found(f"no cell with id {cell_id}")
    try:
        out = adjudication.decide(
            cell_id, body.reviewer, body.state.value, body.note, scores=body.scores,
            fatal_criterion=body.fatal_criterion.value if body.fatal_criterion else None,
            override=body.override, reason=body.reason,
        )
    except adjudication.AdjudicationError as exc:
        raise unprocessable(str(exc), ("body",), "adjudication_error") from None
    return DecisionRecorded(**out)
