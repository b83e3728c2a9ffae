"""The door: what every HTTP request passes before the app reads a byte of its body, in this order.

1. The Host must be one this server answers to, and a state-changing request's Origin (or Referer) this
   server or a listed name (api/http/hosts.py): 400 and 403 otherwise, token or not. Only the probes
   (/healthz, /readyz) answer any Host: they read no data and change nothing.
2. Credentials go in the Authorization header only. A query string with a credential-named parameter
   (`token=`, `api_key=`, ...) or holding the token itself is refused (401): URLs end up in access logs,
   proxies and browser histories.
3. Every path but the public ones (PUBLIC_PATHS) and the viewer (its own sign-in) needs
   `Authorization: Bearer <AFP_API_TOKEN>` (when a token is configured),
   checked from the headers alone: an unauthenticated request is answered 401 without its body read.
4. Bodies are bounded (AFP_MAX_BODY_BYTES): a Content-Length above the limit is answered 413 at once; a
   body without one (chunked) is counted as it arrives and answered 413 as soon as it passes the limit.
5. At most AFP_HTTP_MAX_IN_FLIGHT requests are in the app at once; one more is answered 503 with
   Retry-After at once, having cost nothing (/healthz, which does no work, is never refused). Without
   the bound a burst queued for threads while the connections it held waited for those threads
   (docs/RELIABILITY.md, "The API under a burst").

A refused request that announced a body gets `Connection: close`, so the server drops the connection
instead of draining the rest. One unauthenticated 100 MB POST once grew the server by 500 MB.
The route dependency (deps.require_token) still checks the token too, and documents it in OpenAPI.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

from afpbench.api.http.hosts import SAFE_METHODS, HostPolicy
from afpbench.api.http.schemas import ErrorMessage

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Where the self-hosted Swagger UI files are served (public, like /docs itself).
DOCS_ASSETS = "/docs/assets"
# What answers without the token: the health check and the API description with its assets (not secret;
# a browser cannot send the token before Swagger's Authorize button has it).
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/docs", "/openapi.json"})
# Liveness and readiness: answered for any Host (a probe names the pod's address), never holding data.
PROBES = frozenset({"/healthz", "/readyz"})
LIVENESS = "/healthz"
PUBLIC_PREFIXES = (f"{DOCS_ASSETS}/",)
# The results viewer signs in with its own cookie (api/viewer/auth.py: every viewer route depends on it),
# so the door checks only the body limit there; its pages never accept the bearer token in a query.
VIEWER = "/view"
# Query parameter names that mean "a credential is here" (compared lower-case, '-' read as '_').
QUERY_CREDENTIALS = frozenset({
    "token", "access_token", "api_token", "bearer", "auth", "authorization", "api_key", "apikey", "key",
    "password", "secret",
})
UNAUTHORIZED = "missing or wrong bearer token"
TOKEN_IN_URL = "credentials go in the Authorization header, never in the URL's query string"
WRONG_HOST = ("this server does not answer to the Host this request names: it answers to the loopback names, "
              "the address it listens on and AFP_ALLOWED_HOSTS")
WRONG_ORIGIN = ("a state-changing request from another site is refused: its Origin (or Referer) is neither this "
                "server nor a name in AFP_ALLOWED_HOSTS")
BUSY = "the server is at its limit of requests in flight (AFP_HTTP_MAX_IN_FLIGHT): retry after Retry-After seconds"
RETRY_AFTER_S = 1


class _BodyTooLarge(Exception):
    pass


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value
    return None


def _announces_body(scope: Scope) -> bool:
    length = _header(scope, b"content-length")
    return _header(scope, b"transfer-encoding") is not None or (length is not None and length.strip() != b"0")


class Door:
    def __init__(self, app: ASGIApp, *, token: bytes | None, max_body_bytes: int, hosts: HostPolicy,
                 max_in_flight: int) -> None:
        self.app = app
        self.token = token
        self.max_body_bytes = max_body_bytes
        self.hosts = hosts
        self.max_in_flight = max_in_flight
        self.in_flight = 0  # requests inside the app now (one event loop: no lock needed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path not in PROBES and not self.hosts.host_allowed(_header(scope, b"host")):
            await self._refuse(scope, send, 400, WRONG_HOST)
            return
        if scope["method"] not in SAFE_METHODS and not self.hosts.origin_allowed(
                _header(scope, b"origin"), _header(scope, b"referer"), _header(scope, b"host")):
            await self._refuse(scope, send, 403, WRONG_ORIGIN)
            return
        if self._credential_in_query(scope):
            await self._refuse(scope, send, 401, TOKEN_IN_URL)
            return
        exempt = (path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)
                  or path == VIEWER or path.startswith(VIEWER + "/"))
        if not exempt and not self._authorized(scope):
            await self._refuse(scope, send, 401, UNAUTHORIZED)
            return
        length = _header(scope, b"content-length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_body_bytes:
            await self._refuse(scope, send, 413, self._too_large())
            return
        if path == LIVENESS:
            await self._pass_counting(scope, receive, send)
            return
        if self.in_flight >= self.max_in_flight:
            await self._refuse(scope, send, 503, BUSY)
            return
        self.in_flight += 1
        try:
            await self._pass_counting(scope, receive, send)
        finally:
            self.in_flight -= 1

    def _too_large(self) -> str:
        return f"request body over the {self.max_body_bytes} byte limit (AFP_MAX_BODY_BYTES)"

    def _credential_in_query(self, scope: Scope) -> bool:
        raw = scope.get("query_string", b"").decode("latin-1")
        if not raw:
            return False
        pairs = parse_qsl(raw, keep_blank_values=True)
        if any(k.strip().lower().replace("-", "_") in QUERY_CREDENTIALS for k, _ in pairs):
            return True
        token = self.token.decode("latin-1") if self.token else None
        return bool(token) and (token in raw or any(token in v for _, v in pairs))

    def _authorized(self, scope: Scope) -> bool:
        if self.token is None:  # no token configured: `afpbench serve` then listens on loopback only
            return True
        scheme, _, supplied = (_header(scope, b"authorization") or b"").strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(supplied.strip(), self.token)

    async def _pass_counting(self, scope: Scope, receive: Receive, send: Send) -> None:
        received = 0
        too_large = started = False

        async def counted() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    too_large = True
                    raise _BodyTooLarge
            return message

        async def guarded(message: Message) -> None:
            nonlocal started
            if too_large:
                return  # the app's own answer to the interrupted read (a 400 or 500) is replaced by the 413
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, guarded)
        except _BodyTooLarge:
            pass
        if too_large and not started:
            await self._refuse(scope, send, 413, self._too_large())

    async def _refuse(self, scope: Scope, send: Send, status: int, detail: str) -> None:
        body = json.dumps({"detail": detail}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        if status == 503:
            headers.append((b"retry-after", str(RETRY_AFTER_S).encode()))
        if _announces_body(scope):
            headers.append((b"connection", b"close"))  # never drain an unread body
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def door_responses(*, public: bool = False, text_route: bool = False) -> dict[int | str, dict[str, Any]]:
    """The door's answers, for a route's OpenAPI `responses` (422 is added by FastAPI where input is).
    `text_route`: the route answers text (e.g. /metrics), so its error bodies are named as the JSON they
    are (FastAPI would give a `model` the route's own media type)."""
    error: dict[str, Any] = ({"content": {"application/json": {"schema": {"$ref": ERROR_SCHEMA}}}} if text_route
                             else {"model": ErrorMessage})
    out: dict[int | str, dict[str, Any]] = {
        400: {**error, "description": "a Host this server does not answer to (AFP_ALLOWED_HOSTS), or a body that "
                                      "cannot be read (not UTF-8)"},
        413: {**error, "description": "request body over AFP_MAX_BODY_BYTES (answered before the rest is read)"},
        503: {**error, **BUSY_RESPONSE}}
    if not public:
        out[401] = {**error, "description": "missing or wrong bearer token, or a credential in the query string "
                                            "(answered before the body is read)"}
    return out


ERROR_SCHEMA = "#/components/schemas/ErrorMessage"  # registered by the routes that name ErrorMessage as a model
# What a route answers when the server is at AFP_HTTP_MAX_IN_FLIGHT, or no database connection came free
# within AFP_HTTP_POOL_TIMEOUT_S (api/http/app.py).
BUSY_RESPONSE: dict[str, Any] = {
    "description": "busy: too many requests in flight, or no database connection free; retry after Retry-After "
                   "seconds",
    "headers": {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}}}
# A state-changing route's answer to a request from another site.
WRONG_ORIGIN_RESPONSE: dict[str, Any] = {"model": ErrorMessage, "description": "Origin or Referer of another site"}
