"""The simulator's HTTP side: one request handler (chat completions, the model list, stats and reset)
over the state a running server shares between its connection threads (server.py starts it).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from afpbench.workers.sim.batches import BatchBook
from afpbench.workers.sim.engine import SimEngine, conversation_key
from afpbench.workers.sim.faults import (
    Admission,
    Fault,
    FaultConfig,
    FaultInjector,
    draw_fault,
    latency_s,
    retry_after_value,
)
from afpbench.workers.sim.shape_routes import route_get, route_post
from afpbench.workers.sim.stats import SimStats
from afpbench.workers.sim.wire import FINGERPRINT, completion_body, error_body, served_model

log = logging.getLogger("afpbench.sim")

SIMULATED_HEADER = "X-Afpbench-Simulated"
CELL_HEADER = "X-Afpbench-Cell"


@dataclass
class ServerState:
    faults: FaultConfig
    engine: SimEngine
    injector: FaultInjector
    batches: BatchBook
    stats: SimStats = field(default_factory=SimStats)
    stopping: threading.Event = field(default_factory=threading.Event)


class SimHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() must not wait for a request stalled by an injected timeout
    request_queue_size = 256  # the stdlib default (5) resets connections under a burst of clients
    state: ServerState


class SimHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: throughput runs should not pay a TCP handshake per request
    disable_nagle_algorithm = True  # headers and body go out as two writes; Nagle would stall each ~40 ms
    server: SimHTTPServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        log.debug("sim: " + format, *args)

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header(SIMULATED_HEADER, "1")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. its read timeout fired)

    def _json(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(body, ensure_ascii=False).encode("utf-8"), headers)

    def _read_body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0  # the body then fails JSON parsing and gets a 400
        return self.rfile.read(length) if length > 0 else b""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        state = self.server.state
        if self.path.rstrip("/") == "/v1/models":
            self._json(
                200,
                {
                    "object": "list",
                    "data": [{"id": "sim-model", "object": "model", "created": 0, "owned_by": FINGERPRINT}],
                },
            )
        elif self.path == "/_sim/stats":
            self._json(200, state.stats.snapshot())
        elif (answer := route_get(state.batches, self.path, self._root())) is not None:
            self._answer(*answer)
        else:
            self._json(404, error_body(f"no route GET {self.path}", "invalid_request_error", "not_found"))

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        state = self.server.state
        raw = self._read_body()
        if self.path == "/_sim/reset":
            state.stats.reset()
            state.injector.reset()
            self._json(200, {"reset": True})
        elif self.path.rstrip("/") == "/v1/chat/completions":
            state.stats.add("requests")
            self._chat(state, raw)
        elif (answer := route_post(state.batches, state.engine, self.path.rstrip("/"),
                                   self.headers.get("Content-Type") or "", raw, self.headers.get(CELL_HEADER))):
            if answer[0] == 200 and "batch" in self.path.lower():  # a batch created (registered)
                state.stats.add("batches")
                hold = state.faults.batch_create_hold_s
                if hold and state.stopping.wait(hold):  # its answer held (the fault), until the server stops
                    self.close_connection = True
                    return
            self._answer(*answer)
        else:
            self._json(404, error_body(f"no route POST {self.path}", "invalid_request_error", "not_found"))

    def _answer(self, status: int, body: dict | bytes) -> None:
        self._json(status, body) if isinstance(body, dict) else self._send(status, body)

    def _root(self) -> str:
        return f"http://{self.headers.get('Host') or '127.0.0.1'}/v1"

    def _reject(self, state: ServerState, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        state.stats.status(status)
        self._json(status, body, headers)

    def _chat(self, state: ServerState, raw: bytes) -> None:
        try:
            request = json.loads(raw or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            request = None
        messages = request.get("messages") if isinstance(request, dict) else None
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return self._reject(
                state,
                400,
                error_body("body must be JSON with a non-empty 'messages' list", "invalid_request_error"),
            )
        if request.get("stream"):
            return self._reject(state, 400, error_body("streaming is not supported", "invalid_request_error"))
        seed = request.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            return self._reject(state, 400, error_body("'seed' must be an integer", "invalid_request_error"))
        admission = state.injector.admit()
        limit_headers = self._limit_headers(state.faults, admission)
        if not admission.allowed:
            state.stats.add("rate_limited")
            limit_headers["Retry-After"] = retry_after_value(admission.retry_after_s)
            return self._reject(
                state,
                429,
                error_body("rate limit reached for requests", "requests", "rate_limit_exceeded"),
                limit_headers,
            )
        key = self.headers.get(CELL_HEADER) or conversation_key(messages)
        attempt = state.injector.next_attempt(key)
        faults = state.faults
        if state.stopping.wait(latency_s(faults, key, attempt)):
            self.close_connection = True
            return None
        fault = draw_fault(faults, key, attempt)
        if fault is Fault.error_5xx:
            state.stats.add("errors_5xx")
            status = state.injector.next_server_error()
            return self._reject(
                state, status, error_body("injected server error", "server_error"), limit_headers
            )
        if fault is Fault.timeout:
            state.stats.add("timeouts")
            self.close_connection = True
            if state.stopping.wait(faults.timeout_s):
                return None
        try:
            reply = state.engine.respond(messages, request.get("tools"), self.headers.get(CELL_HEADER),
                                         seed)
        except Exception:  # a simulator bug must surface as a 500, not a dropped connection
            log.exception("sim: engine failed")
            return self._reject(
                state, 500, error_body("simulator engine error", "server_error"), limit_headers
            )
        model = served_model(request.get("model"))
        if fault is Fault.timeout:
            return self._json(200, completion_body(reply, model), limit_headers)
        state.stats.status(200)
        if fault is Fault.content_filter:
            state.stats.add("filtered")
            state.stats.tokens(reply.prompt_tokens, 0)
            return self._json(200, completion_body(reply, model, filtered=True), limit_headers)
        payload = json.dumps(completion_body(reply, model), ensure_ascii=False).encode("utf-8")
        if fault is Fault.malformed:
            state.stats.add("malformed")
            return self._send(200, payload[: len(payload) // 2], limit_headers)
        state.stats.served(reply)
        return self._send(200, payload, limit_headers)

    @staticmethod
    def _limit_headers(faults: FaultConfig, admission: Admission) -> dict[str, str]:
        if faults.rate_per_min is None:
            return {}
        return {
            "x-ratelimit-limit-requests": f"{faults.rate_per_min:g}",
            "x-ratelimit-remaining-requests": str(admission.remaining),
        }
