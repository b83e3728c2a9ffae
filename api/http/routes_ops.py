"""Operations: /healthz (no auth: load balancers probe it) and /metrics (Prometheus text, auth)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy import text

from afpbench.api.http.deps import Authorized
from afpbench.api.http.door import door_responses
from afpbench.api.http.metrics import CONTENT_TYPE, render_metrics
from afpbench.api.http.schemas import Health
from afpbench.workers.store.db import session_scope

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
def healthz(request: Request):
    """Liveness and database connectivity. Says which mode runs; never names URLs or credentials."""
    settings = request.app.state.settings
    mode = "embedded" if settings.embedded else "distributed"
    try:
        with session_scope() as session:
            session.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any failure to reach the database means not healthy
        body = Health(status="unavailable", database="unreachable", mode=mode,
                      detail={"error": type(exc).__name__})
        return JSONResponse(body.model_dump(), status_code=503)
    return Health(status="ok", database="ok", mode=mode)


@router.get("/metrics", dependencies=Authorized, response_class=PlainTextResponse,
            responses={200: {"content": {CONTENT_TYPE: {}}}, **door_responses()})
def metrics(request: Request) -> PlainTextResponse:
    """Cells by phase and state, attempts by outcome, 429s, retries, queue depth, pool in-flight."""
    return PlainTextResponse(render_metrics(request.app.state.settings), media_type=CONTENT_TYPE)
