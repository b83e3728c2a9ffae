"""A plain OpenAI-compatible HTTP server (stdlib only) with one route per provider fault.

A model's base_url is `http://127.0.0.1:PORT/<route>/v1`, so each route is a separate endpoint (and a
separate limiter pool) and one sweep can hold many faults. `GET /<route>/v1/models` answers 200 unless
the route says otherwise; `POST /<route>/v1/chat/completions` runs the route's behaviour with `n`, the
number of earlier requests this route has seen for the same cell (header X-Afpbench-Cell), so a route
can fail a cell's first k requests and then answer. Every request is logged for the test to compare
with the attempt rows. Its answers are labelled simulated: no real model is behind this server.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CELL_HEADER = "X-Afpbench-Cell"
SIMULATED_TEXT = "[fault-server] Simulated answer from a test server; not the output of any real model."

Behaviour = Callable[["Handler", int, dict], None]


@dataclass
class Route:
    behaviour: Behaviour
    models_status: int = 200  # what GET /models answers (the preflight)
    models_ids: list[str] = field(default_factory=list)


@dataclass
class Seen:
    route: str
    cell: str
    n: int
    at: float
    authorization: str | None


def completion(text: str = SIMULATED_TEXT, *, finish: str = "stop", model: str = "fault-server-sim",
               tool_calls: list[dict] | None = None, request_id: str = "req-1") -> dict:
    message: dict = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": request_id, "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


def error(status: int, message: str, code: str | None = None) -> tuple[int, dict]:
    return status, {"error": {"message": message, "type": "test_error", "code": code}}


class Handler(BaseHTTPRequestHandler):
    server: FaultServerHTTP

    def log_message(self, *args) -> None:
        pass

    # --- primitives a behaviour can use ---------------------------------------------------------

    def send_json(self, status: int, payload: dict | str | bytes, headers: dict[str, str] | None = None,
                  content_length: int | None = None) -> None:
        if isinstance(payload, dict):
            payload = json.dumps(payload)
        body = payload.encode() if isinstance(payload, str) else payload
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body) if content_length is None else content_length))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client gave up

    def reset(self) -> None:
        """Close with RST (SO_LINGER 0) and no response at all."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def stall(self, seconds: float) -> None:
        """Say nothing for `seconds` (the client's read timeout fires), then answer late."""
        time.sleep(seconds)
        self.send_json(200, completion())

    def trickle(self, interval_s: float, max_s: float) -> None:
        """Headers at once, then the body one byte at a time: no single read ever times out."""
        body = json.dumps(completion()).encode() + b" " * 4096
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            started = time.monotonic()
            for i in range(len(body)):
                if time.monotonic() - started > max_s:
                    break
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
                time.sleep(interval_s)
        except OSError:
            pass
        self.close_connection = True

    # --- routing -------------------------------------------------------------------------------

    def _route(self) -> tuple[str, str]:
        parts = self.path.strip("/").split("/", 2)  # <route>/v1/<rest>
        if len(parts) < 3 or parts[1] != "v1":
            return "", ""
        return parts[0], parts[2]

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        name, rest = self._route()
        route = self.server.routes.get(name)
        if route is None or rest.rstrip("/") != "models":
            return self.send_json(*error(404, f"no route GET {self.path}"))
        if route.models_status != 200:
            return self.send_json(*error(route.models_status, "refused by the test server", "invalid_api_key"))
        ids = route.models_ids
        self.send_json(200, {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        name, rest = self._route()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        route = self.server.routes.get(name)
        if route is None or rest.rstrip("/") != "chat/completions":
            return self.send_json(*error(404, f"no route POST {self.path}"))
        request = json.loads(raw or b"{}")
        cell = self.headers.get(CELL_HEADER) or ""
        with self.server.lock:
            n = sum(1 for s in self.server.seen if s.route == name and s.cell == cell)
            self.server.seen.append(Seen(name, cell, n, time.time(), self.headers.get("Authorization")))
        route.behaviour(self, n, request)


class FaultServerHTTP(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 64
    routes: dict[str, Route]
    seen: list[Seen]
    lock: threading.Lock

    def handle_error(self, request, client_address) -> None:
        pass  # resets and clients that hang up are the point of this server


class FaultServer:
    """Context manager: `with FaultServer(routes) as fs: fs.base_url("ok")`."""

    def __init__(self, routes: dict[str, Route | Behaviour]):
        self.httpd = FaultServerHTTP(("127.0.0.1", 0), Handler)
        self.httpd.routes = {k: v if isinstance(v, Route) else Route(v) for k, v in routes.items()}
        self.httpd.seen = []
        self.httpd.lock = threading.Lock()

    def base_url(self, route: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/{route}/v1"

    def requests_for(self, route: str) -> list[Seen]:
        with self.httpd.lock:
            return [s for s in self.httpd.seen if s.route == route]

    def __enter__(self) -> FaultServer:
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# --- behaviours ---------------------------------------------------------------------------------


def answer(text: str = SIMULATED_TEXT) -> Behaviour:
    return lambda h, n, req: h.send_json(200, completion(text))


def answer_with(**fields) -> Behaviour:
    """A 200 completion with some fields changed (finish="content_filter", model=..., tool_calls=...)."""
    return lambda h, n, req: h.send_json(200, completion(**fields))


def status(code: int, body: dict | str | None = None, headers: dict[str, str] | None = None) -> Behaviour:
    payload = body if body is not None else error(code, f"test server says {code}")[1]
    return lambda h, n, req: h.send_json(code, payload, headers)


def first(k: int, fault: Behaviour, then: Behaviour | None = None) -> Behaviour:
    """Fail a cell's first k requests with `fault`, then behave like `then` (an answer by default)."""
    then = then or answer()
    return lambda h, n, req: (fault if n < k else then)(h, n, req)


def once_overall(fault: Behaviour, then: Behaviour | None = None) -> Behaviour:
    """`fault` for the very first request this route sees (any cell), then `then`."""
    then = then or answer()
    fired = threading.Event()

    def run(h: Handler, n: int, req: dict) -> None:
        if not fired.is_set():
            fired.set()
            return fault(h, n, req)
        return then(h, n, req)

    return run


def reset() -> Behaviour:
    return lambda h, n, req: h.reset()


def stall(seconds: float) -> Behaviour:
    return lambda h, n, req: h.stall(seconds)


def trickle(interval_s: float = 0.2, max_s: float = 30.0) -> Behaviour:
    return lambda h, n, req: h.trickle(interval_s, max_s)


def raw(body: bytes, content_length: int | None = None) -> Behaviour:
    """A 200 whose body is exactly `body` (malformed JSON, or shorter than its Content-Length)."""
    return lambda h, n, req: h.send_json(200, body, content_length=content_length)
