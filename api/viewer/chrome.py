"""Pieces every signed-in page shows: the sign-out form (it carries the CSRF token)."""

from __future__ import annotations

from fastapi import Request

from afpbench.api.viewer import html as v
from afpbench.api.viewer.auth import csrf_token, expected_token


def csrf_field(request: Request) -> str:
    return f'<input type="hidden" name="csrf" value="{v.e(csrf_token(request))}">'


def logout_form(request: Request) -> v.Safe | None:
    if expected_token(request) is None:
        return None
    return v.Safe(f'<form method="post" action="{v.url("/logout")}" class="logout">{csrf_field(request)}'
                  '<button type="submit">sign out</button></form>')
