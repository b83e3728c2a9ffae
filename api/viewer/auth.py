"""Viewer sign-in: the API's token (AFP_API_TOKEN) entered once in a form, kept as a cookie.

The cookie holds an HMAC of the token, never the token, and is HttpOnly and SameSite=Strict; it is
compared in constant time. Without a configured token there is no sign-in (the server then listens on
loopback only, see api/cli_serve.py). Forms that change something carry a CSRF token derived from the
session cookie (or, without a token, from a secret of this process), checked in constant time. The JSON
API does not read this cookie: it keeps using the Authorization header only.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import Depends, Request

from afpbench.api.viewer.html import PREFIX

COOKIE = "afpbench_view"
SESSION_CONTEXT = b"afpbench viewer session v1"
CSRF_CONTEXT = b"afpbench viewer csrf v1|"
MAX_FORM_BYTES = 64 * 1024


class PageError(Exception):
    """A page that cannot be shown: rendered as a one-line error page with this status."""

    def __init__(self, status_code: int, message: str):
        super().__init__(message)
        self.status_code = status_code


class LoginRequired(Exception):
    """No valid session cookie: the browser is sent to the sign-in page, then back to `next_path`."""

    def __init__(self, next_path: str):
        super().__init__(next_path)
        self.next_path = next_path


def expected_token(request: Request) -> bytes | None:
    return request.app.state.api_token


def session_value(token: bytes) -> str:
    """What the cookie holds: a keyed hash of the token (the token itself never leaves the form post)."""
    return hmac.new(token, SESSION_CONTEXT, hashlib.sha256).hexdigest()


def token_matches(supplied: str, token: bytes) -> bool:
    return hmac.compare_digest(supplied.encode(), token)


def _signed_in(request: Request, token: bytes) -> bool:
    cookie = request.cookies.get(COOKIE, "")
    return hmac.compare_digest(cookie.encode(), session_value(token).encode())


def safe_next(path: str | None) -> str:
    """Only a path of this viewer: a `next` that names another site would make the sign-in a redirector."""
    if path and path.startswith(PREFIX + "/") and not path.startswith("//") and "\\" not in path:
        return path
    return PREFIX + "/"


async def require_viewer(request: Request) -> None:
    """The viewer's auth dependency: a valid session cookie when a token is configured (async: a
    comparison needs no thread from the pool)."""
    token = expected_token(request)
    if token is None or _signed_in(request, token):
        return
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if request.method != "GET" or request.url.path.endswith(".json"):
        raise PageError(401, "not signed in: sign in with the API token first")
    raise LoginRequired(safe_next(target))


Viewer = [Depends(require_viewer)]


def _process_secret(request: Request) -> bytes:
    # Without an API token there is no session to derive from; a secret of this process stands in,
    # so another site still cannot forge a decision form (it cannot read our pages).
    state = request.app.state
    if getattr(state, "viewer_csrf_secret", None) is None:
        state.viewer_csrf_secret = secrets.token_bytes(32)
    return state.viewer_csrf_secret


def csrf_token(request: Request) -> str:
    token = expected_token(request)
    if token is None:
        return hmac.new(_process_secret(request), CSRF_CONTEXT, hashlib.sha256).hexdigest()
    session = request.cookies.get(COOKIE, "").encode()
    return hmac.new(token, CSRF_CONTEXT + session, hashlib.sha256).hexdigest()


async def read_form(request: Request) -> dict[str, str]:
    """A url-encoded form (the viewer's only kind), first value per field, size-capped."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise PageError(413, f"form too large: {len(body)} bytes, at most {MAX_FORM_BYTES}")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=50)
    except (UnicodeDecodeError, ValueError) as exc:
        raise PageError(400, f"form is not url-encoded UTF-8: {type(exc).__name__}") from None
    return {k: v[0] for k, v in fields.items()}


def check_csrf(request: Request, form: dict[str, str]) -> None:
    if not hmac.compare_digest(form.get("csrf", "").encode(), csrf_token(request).encode()):
        raise PageError(403, "csrf: the form's token does not match this session; reload the page and try again")


Form = Annotated[dict[str, str], Depends(read_form)]
