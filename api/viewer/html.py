"""Page shell and HTML helpers of the viewer. Everything that is not a Safe fragment is escaped here.

A `Safe` string is HTML this module (or a caller, from escaped parts) built; every other value is text
and goes through `e`. Tables take cells as text or Safe, so a caller cannot forget to escape.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from urllib.parse import quote, urlencode

from fastapi.responses import HTMLResponse

PREFIX = "/view"

# Only this server's own script and style; inline SVG needs no source. No framing, forms post here only.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    # No referrer to other sites. Not "no-referrer": under it a browser sends `Origin: null` with the
    # viewer's own form posts, which the door refuses as it would a sandboxed frame's (api/http/hosts.py).
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
STATE_CLASS = {
    "MODEL_PASS": "pass", "MODEL_FAIL": "fail", "PROVIDER_BLOCK": "block", "INFRA_ERROR": "infra",
    "INVALID_TEST": "invalid", "GRADER_DISPUTE": "dispute",
}


class Safe(str):
    """HTML built from escaped parts; inserted as is."""


Cell = str | int | float | None | Safe


def e(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def h(value: Cell) -> str:
    return value if isinstance(value, Safe) else e(value)


def join(parts: Iterable[str]) -> Safe:
    return Safe("".join(parts))


def url(path: str, **params: object) -> str:
    """A viewer URL; path segments are quoted by the caller with `seg`, parameters here."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{PREFIX}{path}" + (f"?{query}" if query else "")


def seg(value: object) -> str:
    return quote(str(value), safe="")


def link(href: str, text: Cell, cls: str = "") -> Safe:
    klass = f' class="{e(cls)}"' if cls else ""
    return Safe(f'<a href="{e(href)}"{klass}>{h(text)}</a>')


def badge(text: str, cls: str) -> Safe:
    return Safe(f'<span class="badge {e(cls)}">{e(text)}</span>')


def state_badge(state: str | None, phase: str | None = None) -> Safe:
    if state is None:
        return badge(phase or "unfinished", "unfinished")
    return badge(state, STATE_CLASS.get(state, "unfinished"))


def simulated_badge() -> Safe:
    return badge("SIMULATED", "sim")


def table(header: Sequence[str], rows: Iterable[Sequence[Cell]], cls: str = "", tid: str = "") -> Safe:
    head = "".join(f"<th>{e(c)}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{h(c)}</td>" for c in row) + "</tr>" for row in rows)
    attrs = (f' class="{e(cls)}"' if cls else "") + (f' id="{e(tid)}"' if tid else "")
    return Safe(f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def pre(text: str | None, cls: str = "") -> Safe:
    klass = f' class="{e(cls)}"' if cls else ""
    return Safe(f"<pre{klass}>{e(text if text is not None else '(none)')}</pre>")


def details(summary: str, inner: Cell, open_: bool = False) -> Safe:
    return Safe(f"<details{' open' if open_ else ''}><summary>{e(summary)}</summary>{h(inner)}</details>")


def section(heading: str, *parts: Cell, sid: str = "") -> Safe:
    ident = f' id="{e(sid)}"' if sid else ""
    return Safe(f"<section{ident}><h2>{e(heading)}</h2>" + "".join(h(p) for p in parts) + "</section>")


def para(text: Cell, cls: str = "") -> Safe:
    klass = f' class="{e(cls)}"' if cls else ""
    return Safe(f"<p{klass}>{h(text)}</p>")


def page(title: str, body: Iterable[Cell], *, crumbs: Sequence[tuple[str, str]] = (), logout: Safe | None = None,
         simulated: bool = False, status_code: int = 200) -> HTMLResponse:
    nav = " / ".join(link(href, text) for href, text in [(url("/"), "sweeps"), *crumbs])
    banner = '<div class="banner sim" id="simulated-banner">SIMULATED</div>' if simulated else ""
    html = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{e(('SIMULATED - ' if simulated else '') + title)} - afpbench viewer</title>"
            f'<link rel="stylesheet" href="{PREFIX}/static/viewer.css">'
            f'<script src="{PREFIX}/static/viewer.js" defer></script></head><body>'
            f'<header><nav>{nav}</nav>{logout or ""}</header><main>{banner}<h1>{e(title)}</h1>'
            + "".join(h(p) for p in body) + "</main></body></html>")
    return HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)


def error_page(status_code: int, message: str) -> HTMLResponse:
    """One line naming what is wrong; the page carries the same security headers as the others."""
    return page(f"{status_code}", [para(message, "error")], status_code=status_code)
