"""The FastAPI app: routers, error shapes, the public OpenAPI docs (self-hosted assets), the runtime.

Error contract: bad input -> 422 with a list of {loc, msg, type} (never echoing the input, which could
hold a key someone pasted); unknown ids -> 404; a Host the server does not answer to -> 400, a write from
another site -> 403, a missing or wrong token -> 401, a body over AFP_MAX_BODY_BYTES -> 413 and more than
AFP_HTTP_MAX_IN_FLIGHT requests at once -> 503, all before the body is read (api/http/door.py); no
database connection within AFP_HTTP_POOL_TIMEOUT_S, or an unreachable database -> 503 with Retry-After,
never a 500. The token lives only in app.state and is never logged or returned.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import DataError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path
from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]  # ships no type information

from afpbench.api.http import routes_adjudications, routes_cells, routes_ops, routes_sweeps
from afpbench.api.http.deps import configured_token
from afpbench.api.http.door import DOCS_ASSETS, RETRY_AFTER_S, Door, door_responses
from afpbench.api.http.hosts import HostPolicy
from afpbench.api.http.report_cache import ReportCache
from afpbench.api.http.runtime import Runtime
from afpbench.api.viewer import routes as viewer
from afpbench.reference.errors import AfpbenchError
from afpbench.reference.validation_errors import error_message
from afpbench.workers.settings import Settings, get_settings
from afpbench.workers.store.db import set_pool_timeout
from afpbench.workers.sweeps.seal import afpbench_version

DESCRIPTION = """Run and inspect AFP Benchmark Protocol sweeps. Every route but `/healthz`, `/readyz` and these
docs needs `Authorization: Bearer <AFP_API_TOKEN>` when a token is configured (on this page: the Authorize
button; never a token in the query string); bodies over AFP_MAX_BODY_BYTES are refused (413); beyond
AFP_HTTP_MAX_IN_FLIGHT requests at once, or with no database connection free, the answer is 503 with
Retry-After. Only the names in AFP_ALLOWED_HOSTS (and loopback) are answered as the Host. A posted
spec carries its fixtures, instruction texts and judge prompt inline or names entries of the server's
catalogue, never server paths. Simulated model output is labelled simulated wherever it appears."""


def _printable(value: Any) -> Any:
    """The value with lone surrogates escaped: an error message quoting a path or a key that holds one
    would otherwise fail to encode as UTF-8, and a 422 became a 500."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list | tuple):
        return [_printable(v) for v in value]
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    return value


def _field_errors(exc: RequestValidationError) -> list[dict]:
    out = []
    for err in exc.errors():
        out.append({"loc": list(err.get("loc", ())), "msg": error_message(err), "type": err.get("type", "value_error")})
    return _printable(out)


def route_table(app: FastAPI) -> list[tuple[str, set[str]]]:
    """(path, methods) of every route, including those of included routers (which FastAPI >= 0.16x
    keeps as lazy inclusions in app.routes rather than as flat routes)."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # older FastAPI: app.routes is already flat
        return [(r.path, set(getattr(r, "methods", None) or ())) for r in app.routes if hasattr(r, "path")]
    return [(c.path, set(c.methods or ())) for c in iter_route_contexts(app.routes) if c.path]


MethodTable = list[tuple[re.Pattern[str], set[str]]]


def method_table(app: FastAPI) -> MethodTable:
    return [(compile_path(path)[0], methods) for path, methods in route_table(app)]


def allowed_methods(table: MethodTable, path: str) -> list[str]:
    """Every method some route answers at `path` (what a 405's Allow header must list)."""
    return sorted({m for pattern, methods in table if pattern.match(path) for m in methods})


def create_app(settings: Settings | None = None, *, runtime: bool = True, listen_host: str | None = None) -> FastAPI:
    """The API. With runtime=True its lifespan runs what serving needs (see api/http/runtime.py);
    tests that only exercise routes pass runtime=False. `listen_host`: the address `serve --host` binds,
    answered as a Host beside the loopback names and AFP_ALLOWED_HOSTS."""
    settings = settings or get_settings()
    worker_runtime = Runtime(settings, enabled=runtime)
    hosts = HostPolicy.build(settings.allowed_hosts, listen_host)  # a bad entry: one line before serving

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # A thread for every request the door lets in, so none waits for one while holding anything.
        limiter = to_thread.current_default_thread_limiter()
        limiter.total_tokens = max(limiter.total_tokens, settings.http_max_in_flight + 8)
        set_pool_timeout(settings.http_pool_timeout_s)
        worker_runtime.start()
        try:
            yield
        finally:
            worker_runtime.stop()

    app = FastAPI(title="afpbench", version=afpbench_version(), description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.state.settings = settings
    app.state.api_token = configured_token(settings)
    app.state.runtime = worker_runtime
    app.state.report_cache = ReportCache(settings.report_cache_entries)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _field_errors(exc)}, status_code=422)

    @app.exception_handler(AfpbenchError)
    async def _known(_request: Request, exc: AfpbenchError) -> JSONResponse:
        # The one mapping of known failures: each error class carries its HTTP status; a 422 has the
        # same {loc, msg, type} list shape as FastAPI's own validation errors.
        if exc.http_status == 422:
            kind = "".join(f"_{c.lower()}" if c.isupper() else c for c in type(exc).__name__).lstrip("_")
            return JSONResponse({"detail": [{"loc": ["body"], "msg": _printable(str(exc)), "type": kind}]},
                                status_code=422)
        return JSONResponse({"detail": _printable(str(exc))}, status_code=exc.http_status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # FastAPI's own handler, given a detail that can always be encoded (see _printable).
        exc.detail = _printable(exc.detail)
        if exc.status_code == 405:  # Starlette names only the first route of the path (`Allow: POST` on /sweeps)
            allow = ", ".join(allowed_methods(app.state.methods, request.url.path))
            exc.headers = {**(exc.headers or {}), "Allow": allow}
        return await http_exception_handler(request, exc)

    @app.exception_handler(PoolTimeout)
    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def _busy(_request: Request, exc: Exception) -> JSONResponse:
        # No pooled connection came free within AFP_HTTP_POOL_TIMEOUT_S, or the database does not answer:
        # the client is told to come back, never given a 500 (and never the driver's message).
        detail = (f"no database connection came free within {settings.http_pool_timeout_s:g} s "
                  "(AFP_HTTP_POOL_TIMEOUT_S); retry after Retry-After seconds" if isinstance(exc, PoolTimeout)
                  else "the database is unavailable; retry after Retry-After seconds")
        return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})

    @app.exception_handler(DataError)
    async def _unstorable(_request: Request, _exc: DataError) -> JSONResponse:
        # The database refused a value from the request (e.g. a NUL character in a string).
        msg = "a value in the request cannot be stored or compared by the database (e.g. it contains NUL)"
        return JSONResponse({"detail": [{"loc": ["request"], "msg": msg, "type": "data_error"}]}, status_code=422)

    # The API description is not secret: /docs, its assets and /openapi.json are served without the token
    # (a browser cannot send it before Swagger's Authorize button has it). The assets ship in the
    # swagger-ui-bundle package, so the page works offline and loads nothing from a CDN.
    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json", title="afpbench API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
        )

    app.mount(DOCS_ASSETS, StaticFiles(directory=swagger_ui_path), name="docs-assets")

    app.include_router(routes_ops.router)  # each names its own door answers
    for module in (routes_sweeps, routes_cells, routes_adjudications):
        app.include_router(module.router, responses=door_responses())
    app.include_router(viewer.router)  # the results viewer under /view: its own cookie sign-in
    app.state.methods = method_table(app)  # every route is in: what a 405 names in Allow
    # Host, Origin, token, body limit and the in-flight bound before anything reads the body (api/http/door.py).
    app.add_middleware(Door, token=app.state.api_token, max_body_bytes=settings.max_body_bytes, hosts=hosts,
                       max_in_flight=settings.http_max_in_flight)
    return app
