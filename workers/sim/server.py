"""The simulated OpenAI-compatible model server (stdlib HTTP, one daemon thread per connection).

Endpoints: POST /v1/chat/completions, GET /v1/models, GET /_sim/stats, POST /_sim/reset.
Everything it answers is labelled simulated: the served model is "sim-<requested model>", the body's
system_fingerprint is "afpbench-sim" and every response has the header X-Afpbench-Simulated: 1.
The order for a chat request: rate limit (429 costs no token) -> latency -> injected fault or answer.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from afpbench.fixtures.loader import load_fixtures
from afpbench.reference.loader import ReferenceFileError, load_instructions, load_judge_prompt
from afpbench.workers.sim.canned import load_canned
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
from afpbench.workers.sim.stats import SimStats
from afpbench.workers.sim.wire import FINGERPRINT, completion_body, error_body, served_model

log = logging.getLogger("afpbench.sim")

SIMULATED_HEADER = "X-Afpbench-Simulated"
CELL_HEADER = "X-Afpbench-Cell"


@dataclass
class SimConfig:
    faults: FaultConfig = field(default_factory=FaultConfig)
    plain: bool = False  # answer every prompt with one short fixed text (throughput runs)
    fixtures_dir: str | None = None  # None: the packaged pilot set and its simulated/ answers
    instructions_dir: str | None = None  # None: packaged A-D texts (used only to recognise the condition)
    judge_prompt_path: str | None = None  # None: the packaged judge prompt


def build_engine(config: SimConfig) -> SimEngine:
    """Load what the engine compares requests with. Missing packaged instructions or judge prompt only
    weaken recognition (logged); a broken fixture or canned file is an error naming the file."""
    tasks: dict[str, str] = {}
    canned = {}
    if not config.plain:
        fixtures = load_fixtures(config.fixtures_dir)
        tasks = {fx.id: fx.task for fx in fixtures}
        canned = load_canned(config.fixtures_dir, {fx.id: fx.fatal_ids() for fx in fixtures})
    try:
        instruction_set = load_instructions(config.instructions_dir)
        instructions = {c: instruction_set.text(c) for c in instruction_set.by_condition}
    except (OSError, ReferenceFileError) as exc:
        if config.instructions_dir is not None:
            raise
        log.warning("sim: packaged instructions unavailable (%s); every system text counts as B-like", exc)
        instructions = {}
    try:
        judge_prompt = load_judge_prompt(config.judge_prompt_path)
    except (OSError, ReferenceFileError) as exc:
        if config.judge_prompt_path is not None:
            raise
        log.warning("sim: packaged judge prompt unavailable (%s); judge requests will not be recognised", exc)
        judge_prompt = None
    return SimEngine(tasks, canned, instructions, judge_prompt, plain=config.plain)


@dataclass
class _State:
    config: SimConfig
    engine: SimEngine
    injector: FaultInjector
    stats: SimStats = field(default_factory=SimStats)
    stopping: threading.Event = field(default_factory=threading.Event)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() must not wait for a request stalled by an injected timeout
    request_queue_size = 256  # the stdlib default (5) resets connections under a burst of clients
    state: _State


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: throughput runs should not pay a TCP handshake per request
    disable_nagle_algorithm = True  # headers and body go out as two writes; Nagle would stall each ~40 ms
    server: _HTTPServer

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
        else:
            self._json(404, error_body(f"no route POST {self.path}", "invalid_request_error", "not_found"))

    def _reject(self, state: _State, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        state.stats.status(status)
        self._json(status, body, headers)

    def _chat(self, state: _State, raw: bytes) -> None:
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
        admission = state.injector.admit()
        limit_headers = self._limit_headers(state.config.faults, admission)
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
        faults = state.config.faults
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
            reply = state.engine.respond(messages, request.get("tools"), self.headers.get(CELL_HEADER))
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


class SimServer:
    """The simulator on a background thread; a context manager. port=0 picks a free port."""

    def __init__(
        self,
        config: SimConfig,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._clock = clock  # the rate limiter's clock; tests pass a controllable one
        self.host = host
        self.port = port
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> SimServer:
        if self._httpd is not None:
            return self
        state = _State(self.config, build_engine(self.config), FaultInjector(self.config.faults, self._clock))
        httpd = _HTTPServer((self.host, self.port), _Handler)
        httpd.state = state
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="afpbench-sim", daemon=True
        )
        self._thread.start()
        return self

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def stats(self) -> dict:
        if self._httpd is None:
            raise RuntimeError("the simulator is not running")
        return self._httpd.state.stats.snapshot()

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.state.stopping.set()  # wakes requests sleeping on latency or an injected timeout
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(config: SimConfig, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Run in the foreground until Ctrl-C (for `afpbench sim`)."""
    server = SimServer(config, host, port).start()
    try:
        # The banner inside the try: a client that reads it and presses Ctrl-C at once (the server thread
        # already answers) must not find this thread still before the handler (seen on a loaded machine).
        print(f"afpbench-sim: SIMULATED model server (not a real provider) at {server.base_url}", flush=True)
        while server._thread is not None and server._thread.is_alive():
            server._thread.join(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        print("afpbench-sim: stopped", flush=True)
