"""Sign-in and sign-out pages of the viewer, and its static files (served without a session: the
sign-in page needs its style, and neither file holds anything secret)."""

from __future__ import annotations

from pathlib import Path as FilePath
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import RedirectResponse

from afpbench.api.viewer import html as v
from afpbench.api.viewer.auth import (
    COOKIE,
    Form,
    PageError,
    check_csrf,
    expected_token,
    safe_next,
    session_value,
    token_matches,
)
from afpbench.api.viewer.routing import ViewerRoute

router = APIRouter(route_class=ViewerRoute)
STATIC_DIR = FilePath(__file__).parent / "static"
STATIC = {"viewer.js": "text/javascript; charset=utf-8", "viewer.css": "text/css; charset=utf-8"}


def _login_form(next_path: str, message: str = "") -> list[v.Cell]:
    return [
        v.para(message, "error") if message else "",
        v.Safe(f'<form method="post" action="{v.url("/login")}" id="login" class="login">'
               f'<input type="hidden" name="next" value="{v.e(next_path)}">'
               '<label>API token (AFP_API_TOKEN) <input type="password" name="token" autocomplete="current-password" '
               'required autofocus></label><button type="submit">sign in</button></form>'),
        v.para("the cookie holds a keyed hash of the token, never the token itself", "muted"),
    ]


@router.get("/login")
def login_page(request: Request, next_path: Annotated[str | None, Query(alias="next", max_length=2000)] = None):
    if expected_token(request) is None:
        return RedirectResponse(safe_next(next_path), status_code=303)
    return v.page("Sign in", _login_form(safe_next(next_path)))


@router.post("/login")
def login(request: Request, form: Form):
    token = expected_token(request)
    target = safe_next(form.get("next"))
    if token is None:
        return RedirectResponse(target, status_code=303)
    if not token_matches(form.get("token", ""), token):
        page = _login_form(target, "wrong token: the value of AFP_API_TOKEN this server was started with")
        return v.page("Sign in", page, status_code=401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(COOKIE, session_value(token), httponly=True, samesite="strict", path=v.PREFIX,
                        secure=request.url.scheme == "https")
    return response


@router.post("/logout")
def logout(request: Request, form: Form):
    check_csrf(request, form)
    response = RedirectResponse(v.url("/login"), status_code=303)
    response.delete_cookie(COOKIE, path=v.PREFIX, httponly=True, samesite="strict")
    return response


@router.get("/static/{name}")
def static(name: Annotated[str, Path(max_length=40)]) -> Response:
    if name not in STATIC:
        raise PageError(404, f"no static file {name!r}")
    return Response((STATIC_DIR / name).read_bytes(), media_type=STATIC[name],
                    headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"})
