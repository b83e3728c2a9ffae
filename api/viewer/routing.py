"""The viewer's route class: failures of a page become HTML pages (or a redirect to sign in), here
rather than in the app's handlers, so the JSON API's error contract stays as it is."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute

from afpbench.api.viewer.auth import LoginRequired, PageError
from afpbench.api.viewer.html import error_page, url
from afpbench.reference.errors import AfpbenchError
from afpbench.reference.validation_errors import error_lines


def _field_line(exc: RequestValidationError) -> str:
    return "; ".join(error_lines(exc.errors(), skip=("query", "path", "body"))) or "invalid request"


class ViewerRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequired as exc:
                return RedirectResponse(url("/login", next=exc.next_path), status_code=303)
            except PageError as exc:
                return error_page(exc.status_code, str(exc))
            except RequestValidationError as exc:
                return error_page(422, _field_line(exc))
            except AfpbenchError as exc:  # e.g. an unknown sweep, a refused decision
                return error_page(exc.http_status, str(exc))

        return run
