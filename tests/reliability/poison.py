"""A poison gate in front of the simulator: requests for chosen cells always get HTTP 500, every other
request is passed through unchanged (a real HTTP hop, no mocks). The gate also counts the requests it
saw per cell key, so a test can hold the attempts on record against the requests that really arrived.

Cells are recognised by the X-Afpbench-Cell header the adapters send ("sweep|model|cond|fixture@ver|rN").
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

CELL_HEADER = "X-Afpbench-Cell"
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def model_request(key: str) -> bool:
    """A cell's execution request (judge requests carry a `|judgeN` suffix)."""
    return key.count("|") == 4


def judge_request(key: str) -> bool:
    return key.count("|") == 5 and key.rsplit("|", 1)[1].startswith("judge")


def never(_key: str) -> bool:
    """A matcher that poisons nothing: the gate only counts."""
    return False


def cell_matcher(condition: str, fixture_id: str, repeat: int) -> Callable[[str], bool]:
    """True for the execution request of one cell (judge requests carry a `|judgeN` suffix)."""

    def matches(key: str) -> bool:
        parts = key.split("|")
        return (len(parts) == 5 and parts[2] == condition and parts[3].split("@")[0] == fixture_id
                and parts[4] == f"r{repeat}")

    return matches


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # a worker SIGKILLed mid-request resets its connection: expected here, not worth a traceback


class PoisonGate:
    def __init__(self, upstream_base_url: str, poisoned: Callable[[str], bool],
                 delay_s: Callable[[str], float] | None = None) -> None:
        up = urlparse(upstream_base_url)
        self.upstream = (up.hostname, up.port)
        self.poisoned = poisoned  # may be swapped while the gate runs
        self.delay_s = delay_s or (lambda _key: 0.0)  # how long a POST is held before it is answered
        self.poisoned_requests = 0
        self.requests_by_key: Counter[str] = Counter()  # POSTs seen, by X-Afpbench-Cell value
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._local = threading.local()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        return conn

    def forward(self, method: str, path: str, body: bytes, headers: dict[str, str]):
        for retry in (False, True):
            conn = self._connection()
            try:
                conn.request(method, path, body=body or None, headers=headers)
                resp = conn.getresponse()
                return resp.status, resp.getheaders(), resp.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if retry:
                    raise
        raise AssertionError("unreachable")

    def wait_for(self, matches: Callable[[str], bool], n: int = 1, timeout_s: float = 30) -> bool:
        """Block until `n` POSTs whose key `matches` have arrived (they may still be held)."""
        with self._arrived:
            return self._arrived.wait_for(
                lambda: sum(c for k, c in self.requests_by_key.items() if matches(k)) >= n, timeout_s)

    def count(self, matches: Callable[[str], bool]) -> int:
        with self._lock:
            return sum(c for k, c in self.requests_by_key.items() if matches(k))

    def start(self) -> PoisonGate:
        gate = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _relay(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                key = self.headers.get(CELL_HEADER) or ""
                poisoned = method == "POST" and gate.poisoned(key)  # decided on arrival, before any hold
                if method == "POST":
                    with gate._arrived:
                        gate.requests_by_key[key] += 1
                        gate._arrived.notify_all()
                    time.sleep(gate.delay_s(key))
                if poisoned:
                    with gate._lock:
                        gate.poisoned_requests += 1
                    payload = json.dumps({"error": {"message": "poison cell: always fails (reliability test)",
                                                    "type": "server_error"}}).encode()
                    status, headers = 500, [("Content-Type", "application/json")]
                else:
                    sent = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
                    status, headers, payload = gate.forward(method, self.path, body, sent)
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in HOP_HEADERS:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:  # noqa: N802 - stdlib naming
                self._relay("GET")

            def do_POST(self) -> None:  # noqa: N802 - stdlib naming
                self._relay("POST")

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> PoisonGate:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
