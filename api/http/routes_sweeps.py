"""Sweeps: create (validate, preflight, seal, enqueue), list, progress, cancel, resume, report."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, cast

from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from sqlalchemy import func
from sqlalchemy.orm import QueryableAttribute, load_only
from sqlmodel import col, select

from afpbench.api.http.deps import Authorized, Limit, Offset, not_found, unprocessable
from afpbench.api.http.door import WRONG_ORIGIN_RESPONSE
from afpbench.api.http.posted_spec import PostedSweepSpec
from afpbench.api.http.report_cache import ReportCache, etag_matches
from afpbench.api.http.schemas import (
    ErrorMessage,
    RerunRequest,
    SweepCancelled,
    SweepCreated,
    SweepDetail,
    SweepPage,
    SweepReport,
    SweepRerun,
    SweepResumed,
    SweepSummary,
)
from afpbench.fixtures.loader import FixtureError
from afpbench.reference.loader import ReferenceFileError
from afpbench.workers import runs
from afpbench.workers.errors import PreflightError
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Sweep, SweepStatus

# Heavy modules (aggregation, reports) are imported here, not on first use: an import in a request
# thread competes for the GIL with the embedded worker's threads and can take many times longer.
router = APIRouter(prefix="/sweeps", tags=["sweeps"], dependencies=Authorized)

class ReportFormat(StrEnum):
    json = "json"
    md = "md"
    html = "html"


REPORT_MEDIA = {
    ReportFormat.json: "application/json",
    ReportFormat.md: "text/markdown; charset=utf-8",
    ReportFormat.html: "text/html; charset=utf-8",
}


# A listing reads the summary columns only: a sweep's spec and inputs hold every fixture text.
_SUMMARY_ONLY = load_only(*(cast(QueryableAttribute, getattr(Sweep, c)) for c in
                            ("id", "name", "status", "simulated", "seal_hash", "created_at", "finished_at")))


def _summary_of(row: Sweep) -> SweepSummary:
    return SweepSummary(id=row.id, name=row.name, status=row.status, simulated=row.simulated,
                        seal=row.seal_hash, created_at=row.created_at, finished_at=row.finished_at)


def _sweep_or_404(session, sweep_id: str) -> Sweep:
    row = session.get(Sweep, sweep_id)
    if row is None:
        raise not_found(f"no sweep with id {sweep_id!r}")
    return row


@router.post("", status_code=status.HTTP_201_CREATED, response_model=SweepCreated,
             responses={422: {"description": "invalid spec, fixtures or instructions (field-level messages)"},
                        403: WRONG_ORIGIN_RESPONSE,
                        424: {"model": ErrorMessage,
                              "description": "a model endpoint is unreachable or refused the key (status code and "
                                             "a one-line summary; never the endpoint's body)"}})
def create_sweep(spec: PostedSweepSpec, request: Request) -> SweepCreated:
    """Body: the sweep spec as JSON (the fields of the YAML spec, with inputs inline or by catalogue
    name instead of server paths). Nothing is written unless every check passes; then the sweep, its seal
    and all its cells are written at once and cells are enqueued. In distributed mode the workers do the
    rest; in embedded mode this server's own worker does."""
    request.app.state.runtime.prepare_for(spec)
    try:
        sweep_id = runs.start_sweep(spec)
    except PreflightError as exc:
        # The summary only: the body of whatever a posted base_url points at stays on the server.
        raise HTTPException(status.HTTP_424_FAILED_DEPENDENCY, exc.summary) from None
    except FixtureError as exc:
        raise unprocessable(str(exc), ("body", "fixtures"), "fixture_error") from None
    except ReferenceFileError as exc:
        raise unprocessable(str(exc), ("body",), "reference_file_error") from None
    except ValueError as exc:  # e.g. a provider that needs a base_url and has none
        raise unprocessable(str(exc)) from None
    with session_scope() as session:
        row = _sweep_or_404(session, sweep_id)
        cells = session.exec(select(func.count()).select_from(Cell).where(Cell.sweep_id == sweep_id)).one()
        return SweepCreated(id=row.id, seal=row.seal_hash, name=row.name, simulated=row.simulated, cells=cells,
                            notices=list(row.notices or []))


@router.get("", response_model=SweepPage)
def list_sweeps(limit: Limit = 50, offset: Offset = 0,
                status_filter: Annotated[SweepStatus | None, Query(alias="status")] = None) -> SweepPage:
    """Newest first."""
    where = [Sweep.status == status_filter] if status_filter else []
    with session_scope() as session:
        total = session.exec(select(func.count()).select_from(Sweep).where(*where)).one()
        rows = session.exec(
            select(Sweep).options(_SUMMARY_ONLY).where(*where)
            .order_by(col(Sweep.created_at).desc(), Sweep.id).offset(offset).limit(limit)
        ).all()
        return SweepPage(total=total, limit=limit, offset=offset, items=[_summary_of(r) for r in rows])


@router.get("/{sweep_id}", response_model=SweepDetail, responses={404: {"description": "unknown sweep"}})
def get_sweep(sweep_id: str) -> SweepDetail:
    """Progress by pipeline phase and by result state."""
    with session_scope() as session:
        row = _sweep_or_404(session, sweep_id)
        summary, notices = _summary_of(row), list(row.notices or [])
    p = runs.progress(sweep_id)
    return SweepDetail(**summary.model_dump(), total=p.total, done=p.done, finished=p.finished,
                       phases=p.phases, stages=p.stages, states=p.states, attempts=runs.attempts_count(sweep_id),
                       notices=notices)


@router.post("/{sweep_id}/cancel", response_model=SweepCancelled,
             responses={403: WRONG_ORIGIN_RESPONSE, 404: {"description": "unknown sweep"}})
def cancel_sweep(sweep_id: str) -> SweepCancelled:
    """No more cells are released; queued messages find the sweep cancelled and do nothing. A sweep with
    nothing left to run is left as it is: `status` then says what it is (e.g. complete)."""
    done = runs.cancel(sweep_id)
    return SweepCancelled(id=sweep_id, status=done.status, unfinished=done.unfinished)


@router.post("/{sweep_id}/resume", response_model=SweepResumed,
             responses={403: WRONG_ORIGIN_RESPONSE, 404: {"description": "unknown sweep"},
                        409: {"description": "inputs changed since the seal (names the changed components)"}})
def resume_sweep(sweep_id: str) -> SweepResumed:
    """Re-send every unfinished cell; refused when any sealed input changed since the sweep began. A
    cancelled sweep with nothing left to run is completed and its summary recomputed."""
    try:
        resent = runs.resume(sweep_id).resent
    except runs.SealMismatch as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    except (FixtureError, ReferenceFileError) as exc:  # sealed inputs can no longer be read
        raise HTTPException(status.HTTP_409_CONFLICT, f"sweep {sweep_id}: {exc}") from None
    return SweepResumed(id=sweep_id, resent=resent)


@router.post("/{sweep_id}/rerun", response_model=SweepRerun,
             responses={403: WRONG_ORIGIN_RESPONSE, 404: {"description": "unknown sweep"},
                        409: {"description": "inputs changed since the seal (names the changed components), or "
                                            "the sweep is cancelled"}})
def rerun_sweep(sweep_id: str, body: RerunRequest | None = None) -> SweepRerun:
    """New attempts for the sweep's chosen finished INFRA_ERROR / PROVIDER_BLOCK cells (the same service as
    `afpbench rerun`); their earlier attempts and results stay on record as superseded."""
    body = body or RerunRequest()
    choice = runs.RerunChoice(tuple(body.states), body.model, body.fixture, body.note)
    try:
        done = runs.rerun(sweep_id, choice)
    except (FixtureError, ReferenceFileError) as exc:  # sealed inputs can no longer be read
        raise HTTPException(status.HTTP_409_CONFLICT, f"sweep {sweep_id}: {exc}") from None
    if isinstance(done, runs.NothingToRerun):
        return SweepRerun(id=sweep_id, rerun=None, cells=0, message=done.reason)
    return SweepRerun(id=sweep_id, rerun=done.number, cells=done.cells,
                      message=f"rerun {done.number}: {done.cells} cells of sweep {sweep_id} reopened")


@router.get("/{sweep_id}/report", response_class=Response,
            responses={200: {"model": SweepReport, "content": {m: {} for m in REPORT_MEDIA.values()},
                             "description": "format=json: the SweepReport; md and html render it",
                             "headers": {"ETag": {"description": "a finished sweep's report version (none while "
                                                                 "the report is interim)",
                                                  "schema": {"type": "string"}}}},
                       304: {"description": "not modified: If-None-Match named the report's current ETag"},
                       404: {"model": ErrorMessage, "description": "unknown sweep"}})
def sweep_report(
    sweep_id: str,
    request: Request,
    report_format: Annotated[ReportFormat, Query(alias="format")] = ReportFormat.json,
) -> Response:
    """The sweep's report; labelled interim while cells are unfinished, simulated where output is. A
    finished sweep's report is rendered once per version (api/http/report_cache.py) and carries an ETag."""
    cache: ReportCache = request.app.state.report_cache
    report = cache.rendered(sweep_id, report_format.value)
    headers = {"Cache-Control": "private, no-cache", **({"ETag": report.etag} if report.etag else {})}
    if etag_matches(request.headers.get("if-none-match"), report.etag):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)
    return Response(report.body, media_type=REPORT_MEDIA[report_format], headers=headers)
