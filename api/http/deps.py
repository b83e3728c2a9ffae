"""Request dependencies: the bearer-token check, paging and id parameters, error helpers.

No database session is a dependency. FastAPI enters a yield dependency in one pool thread, runs the route
in another and validates the response in a third, so a session yielded to a route kept its connection
(idle in transaction) across every wait for a thread; under a burst all the connections waited for
threads while all the threads waited for connections (fastapi#3205; docs/RELIABILITY.md, "The API under a
burst"). A route opens `session_scope()` itself, in the thread that runs it, and closes it before it
returns; it never holds one while calling code that opens its own.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Query, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from afpbench.api.http.schemas import MAX_PAGE
from afpbench.workers.settings import Settings

# Integer inputs stay within what every database column and OFFSET accepts: never a 500 for a big number.
DB_INT_MAX = 2**31 - 1
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description=f"page size, at most {MAX_PAGE}")]
Offset = Annotated[int, Query(ge=0, le=DB_INT_MAX)]
CellId = Annotated[int, Path(ge=1, le=DB_INT_MAX)]

_bearer = HTTPBearer(auto_error=False, description="the value of AFP_API_TOKEN")


def configured_token(settings: Settings) -> bytes | None:
    """The API token as bytes, or None when none is set (an empty AFP_API_TOKEN counts as none)."""
    token = settings.api_token.get_secret_value() if settings.api_token is not None else ""
    return token.encode() if token else None


async def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """Every route but /healthz: `Authorization: Bearer <AFP_API_TOKEN>`, compared in constant time.

    Without a configured token the check is off; `afpbench serve` then listens on loopback only. Async:
    a comparison needs no thread from the pool."""
    expected: bytes | None = request.app.state.api_token
    if expected is None:
        return
    supplied = credentials.credentials.encode() if credentials is not None else b""
    if not hmac.compare_digest(supplied, expected):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing or wrong bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )


Authorized = [Depends(require_token)]


def unprocessable(
    message: str, loc: tuple[str | int, ...] = ("body",), kind: str = "value_error"
) -> HTTPException:
    """A 422 shaped like FastAPI's own validation errors: a list of {loc, msg, type}."""
    return HTTPException(
        422, [{"loc": list(loc), "msg": message, "type": kind}]
    )


def not_found(message: str) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, message)
