"""HTTP transport for adapters: pooled sessions and network-fault mapping.

One `requests.Session` per thread per base URL (sessions are not thread-safe to share, but reusing
one per thread keeps TLS connections warm). Redirects are not followed: custom key headers such as
x-api-key would be forwarded to the new host. The body is streamed under an overall deadline, so a
server that trickles bytes cannot hold a worker forever; per-read timeouts alone would not stop it.
"""

from __future__ import annotations

import heapq
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

from afpbench.workers.providers.types import Endpoint, OutcomeClass, PreparedCall
from afpbench.workers.redact import decode_body

MAX_BODY_BYTES = 16 * 1024 * 1024
_CHUNK = 8192
_local = threading.local()


@dataclass
class HttpOutcome:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""  # exactly as received: stored (masked) beside the decoded text
    body_text: str = ""  # `body` decoded by its BOM / NUL layout (UTF-8 unless it says otherwise)
    fault: str | None = None  # set when no complete HTTP response was read
    fault_class: OutcomeClass = OutcomeClass.infra_error


def session_for(base_url: str) -> requests.Session:
    """This thread's pooled session for `base_url` (created on first use)."""
    sessions: dict[str, requests.Session] | None = getattr(_local, "sessions", None)
    if sessions is None:
        sessions = _local.sessions = {}
    session = sessions.get(base_url)
    if session is None:
        session = requests.Session()
        # Credentials come only from the endpoint's own key variable: a no-op auth keeps requests from
        # attaching a ~/.netrc entry to model calls (and from reading that file on every call).
        session.auth = _no_netrc_auth
        # Proxy settings are read from the environment once per session, not on every call.
        session.proxies = requests.utils.get_environ_proxies(base_url)
        session.trust_env = False
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=2, max_retries=0)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        sessions[base_url] = session
    return session


def _prepared_request(session: requests.Session, prepared: PreparedCall) -> requests.PreparedRequest:
    """What `session.post(url, json=..., headers=...)` would send, built without its per-call merging.

    Session.prepare_request copies the cookie jar twice and merges params, auth and hooks through
    generic helpers whose typing.Protocol isinstance checks were about a tenth of a call's CPU. The
    merge is fixed for our sessions, so it is done directly: session headers overlaid by the call's,
    the session's cookies, its no-op auth (trust_env is off: never netrc), its hooks."""
    headers = requests.structures.CaseInsensitiveDict(session.headers)
    headers.update(prepared.headers)  # the call's headers win, as in requests' merge_setting,
    for name in [name for name, value in headers.items() if value is None]:
        del headers[name]  # which also drops any header set to None (e.g. to remove a session default)
    request = requests.PreparedRequest()
    request.prepare(
        method=prepared.method,
        url=prepared.url,
        headers=headers,
        json=prepared.json,
        auth=session.auth,
        cookies=session.cookies,
        hooks=session.hooks,
    )
    return request


def _send_settings(session: requests.Session) -> dict:
    """Session.merge_environment_settings for a session with trust_env off: its own proxies (set once
    from the environment in session_for), verify and cert; the body always streamed."""
    proxies = {scheme: url for scheme, url in session.proxies.items() if url is not None}
    return {"proxies": proxies, "stream": True, "verify": session.verify, "cert": session.cert}


def _no_netrc_auth(request: requests.PreparedRequest) -> requests.PreparedRequest:
    return request


def close_thread_sessions() -> None:
    """Close this thread's sessions (worker shutdown, tests)."""
    for session in (getattr(_local, "sessions", None) or {}).values():
        session.close()
    _local.sessions = {}


def _root_cause(exc: BaseException) -> BaseException:
    seen: set[int] = set()
    current = exc
    while id(current) not in seen:
        seen.add(id(current))
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            current = reason
        elif current.args and isinstance(current.args[0], BaseException):
            current = current.args[0]
        elif current.__cause__ is not None:
            current = current.__cause__
        else:
            break
    return current


def _describe(exc: BaseException) -> str:
    root = _root_cause(exc)
    detail = re.sub(r"<[^>]*>:?\s*", "", str(root)).strip()  # drop '<HTTPConnection object at 0x..>'
    detail = detail[:140]
    return f"{type(root).__name__}: {detail}" if detail else type(root).__name__


def _socket_of(response: requests.Response) -> socket.socket | None:
    connection = getattr(response.raw, "connection", None) or getattr(response.raw, "_connection", None)
    sock = getattr(connection, "sock", None)
    return sock if isinstance(sock, socket.socket) else None


class _Deadlines:
    """One thread per process shuts sockets down at their deadlines, so a blocked read returns and the
    call ends. (A `threading.Timer` per call started and stopped a thread for every model request.)"""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Watch]] = []
        self._wake = threading.Condition()
        self._seq = 0
        self._compact_at = 1024
        self._thread: threading.Thread | None = None

    def watch(self, sock: socket.socket, seconds: float) -> _Watch:
        watch = _Watch(sock)
        with self._wake:
            self._seq += 1
            heapq.heappush(self._heap, (time.monotonic() + max(0.0, seconds), self._seq, watch))
            if len(self._heap) > self._compact_at:  # entries of finished calls: keep memory flat
                self._heap = [entry for entry in self._heap if not entry[2].cancelled]
                heapq.heapify(self._heap)
                self._compact_at = max(1024, 2 * len(self._heap))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="afpbench-deadlines", daemon=True)
                self._thread.start()
            if self._heap[0][2] is watch:  # only a new earliest deadline changes how long to sleep
                self._wake.notify()
        return watch

    def _run(self) -> None:
        with self._wake:
            while True:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)  # finished calls leave their entries; drop them lazily
                if not self._heap:
                    self._wake.wait()
                    continue
                due, _, watch = self._heap[0]
                now = time.monotonic()
                if due > now:
                    self._wake.wait(due - now)
                    continue
                heapq.heappop(self._heap)
                watch.fire()


class _Watch:
    def __init__(self, sock: socket.socket | None):
        self.fired = False
        self.cancelled = sock is None
        self._sock = sock

    def fire(self) -> None:
        if self.cancelled:
            return
        self.fired = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # type: ignore[union-attr]
        except OSError:
            pass

    def cancel(self) -> None:
        self.cancelled = True


_deadlines = _Deadlines()


def _watchdog(response: requests.Response, seconds: float) -> _Watch:
    sock = _socket_of(response)
    return _deadlines.watch(sock, seconds) if sock is not None else _Watch(None)


def _read_body(
    response: requests.Response, deadline: float, budget_s: float
) -> tuple[bytes | None, str | None]:
    watchdog = _watchdog(response, deadline - time.monotonic())
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_content(chunk_size=_CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return None, f"response body exceeds {MAX_BODY_BYTES} bytes"
            if time.monotonic() > deadline:
                return None, f"response deadline exceeded after {budget_s:g}s (body still arriving)"
    except requests.RequestException:
        if watchdog.fired or time.monotonic() > deadline:
            return None, f"response deadline exceeded after {budget_s:g}s (body still arriving)"
        raise
    finally:
        watchdog.cancel()
    return b"".join(chunks), None


def post_json(endpoint: Endpoint, prepared: PreparedCall) -> HttpOutcome:
    """One POST; never raises for network faults (they become HttpOutcome.fault)."""
    parts = urlsplit(prepared.url)
    session = session_for(endpoint.base_url or f"{parts.scheme}://{parts.netloc}")
    # Overall budget: connect + read timeouts; the read timeout also applies to each socket read.
    budget_s = endpoint.connect_timeout_s + endpoint.timeout_s
    deadline = time.monotonic() + budget_s
    try:
        with session.send(
            _prepared_request(session, prepared),
            timeout=(endpoint.connect_timeout_s, endpoint.timeout_s),
            allow_redirects=False,
            **_send_settings(session),
        ) as response:
            body, fault = _read_body(response, deadline, budget_s)
            if fault is not None:
                return HttpOutcome(status=response.status_code, fault=fault)
            assert body is not None, "_read_body returns either a body or a fault"
            # JSON is UTF-8 (RFC 8259), but error pages and proxies send UTF-16 too: decode by BOM and NUL
            # layout, never by a text/* header's Latin-1 default, and hand the exact bytes up as well.
            return HttpOutcome(response.status_code, dict(response.headers), body, decode_body(body))
    except requests.exceptions.ConnectTimeout:
        return HttpOutcome(fault=f"connect timeout after {endpoint.connect_timeout_s:g}s")
    except requests.exceptions.ReadTimeout:
        return HttpOutcome(fault=f"read timeout after {endpoint.timeout_s:g}s waiting for response")
    except (
        requests.exceptions.InvalidURL,
        requests.exceptions.MissingSchema,
        requests.exceptions.InvalidSchema,
    ) as exc:
        return HttpOutcome(fault=f"invalid base_url: {exc}", fault_class=OutcomeClass.auth_error)
    except requests.exceptions.InvalidHeader:
        # Requests quotes the offending header value (the key) in this message; and a
        # key with a newline or stray whitespace is a configuration error that retrying cannot fix.
        return HttpOutcome(
            fault="invalid header value: the API key contains whitespace or a line break",
            fault_class=OutcomeClass.auth_error,
        )
    except requests.exceptions.SSLError as exc:
        return HttpOutcome(fault=f"TLS error: {_describe(exc)}")
    except requests.exceptions.ChunkedEncodingError as exc:
        return HttpOutcome(fault=f"truncated body: {_describe(exc)}")
    except requests.exceptions.ContentDecodingError as exc:
        return HttpOutcome(fault=f"body decoding failed: {_describe(exc)}")
    except requests.exceptions.ConnectionError as exc:
        root = _root_cause(exc)
        if "timed out" in str(root).lower():
            return HttpOutcome(fault=f"read timeout after {endpoint.timeout_s:g}s mid-body")
        return HttpOutcome(fault=f"connection error: {_describe(exc)}")
    except requests.RequestException as exc:
        return HttpOutcome(fault=f"request failed: {_describe(exc)}")
