"""Operations: /healthz (liveness), /readyz (readiness: the database answers) and /metrics (Prometheus
text, auth). The probes need no token and answer any Host (api/http/door.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy import text

from afpbench.api.http.deps import Authorized
from afpbench.api.http.door import BUSY_RESPONSE, ERROR_SCHEMA, RETRY_AFTER_S, door_responses
from afpbench.api.http.metrics import CONTENT_TYPE, render_metrics
from afpbench.api.http.schemas import Health, Liveness
from afpbench.workers.store.db import session_scope

router = APIRouter(tags=["operations"])


def _mode(request: Request) -> str:
    return "embedded" if request.app.state.settings.embedded else "distributed"


@router.get("/healthz", response_model=Liveness, responses={413: door_responses(public=True)[413]})
async def healthz(request: Request) -> Liveness:
    """Liveness: the server answers. Touches neither the database nor a thread of the pool, and is never
    refused as busy, so it answers while a burst is refused; /readyz says whether the data routes can."""
    return Liveness(status="ok", mode=_mode(request))


@router.get("/readyz", response_model=Health,
            responses={413: door_responses(public=True)[413], 503: {**BUSY_RESPONSE, "content": {"application/json": {
                "schema": {"anyOf": [{"$ref": "#/components/schemas/Health"}, {"$ref": ERROR_SCHEMA}]}}},
                "description": "not ready: the database does not answer (Health), or the server is at its limit of "
                               "requests in flight (ErrorMessage)"}})
def readyz(request: Request):
    """Readiness: a connection from the pool answers `SELECT 1`. 503 while the database is unreachable,
    every connection is taken, or the server is at its limit of requests in flight. Says which mode runs;
    never names URLs or credentials."""
    try:
        with session_scope() as session:
            session.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any failure to reach the database means not ready
        body = Health(status="unavailable", database="unreachable", mode=_mode(request),
                      detail={"error": type(exc).__name__})
        return JSONResponse(body.model_dump(), status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})
    return Health(status="ok", database="ok", mode=_mode(request))


@router.get("/metrics", dependencies=Authorized, response_class=PlainTextResponse,
            responses={200: {"content": {CONTENT_TYPE: {}}}, **door_responses(text_route=True)})
def metrics(request: Request) -> PlainTextResponse:
    """Cells by phase and state, attempts by outcome, 429s, retries, queue depth, pool in-flight."""
    return PlainTextResponse(render_metrics(request.app.state.settings), media_type=CONTENT_TYPE)
