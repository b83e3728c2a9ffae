"""A loopback provider for the provider-semantics tests: a stdlib HTTP server that answers each
(method, path) with a recorded provider response from shared/provider-samples (or a documented shape
the recordings lack), and keeps every request it received (path, headers, body) for the test to check.

The samples are read from their folder beside the repository, never copied into it; a test that
needs one skips with the reason when the folder is absent.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SAMPLES_DIR = Path(
    os.environ.get("AFP_PROVIDER_SAMPLES")
    or Path(__file__).resolve().parents[3] / "shared" / "provider-samples"
)
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-encoding", "content-length"}


@dataclass(frozen=True)
class Reply:
    status: int
    body: str
    headers: dict[str, str] = field(default_factory=dict)


def sample(name: str, **extra_headers: str) -> Reply:
    """A recorded response (status, headers, body) by file stem; skips the test when samples are absent."""
    path = SAMPLES_DIR / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"provider sample {name} not found in {SAMPLES_DIR} (set AFP_PROVIDER_SAMPLES)")
    data = json.loads(path.read_text(encoding="utf-8"))
    body = data["body"] if isinstance(data["body"], str) else json.dumps(data["body"])
    headers = {
        k: ", ".join(map(str, v)) if isinstance(v, list) else str(v)
        for k, v in data["headers"].items()
        if k.lower() not in _HOP_BY_HOP
    }
    if not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = "application/json"
    return Reply(data["status"], body, {**headers, **extra_headers})


def reply_json(status: int, payload: object, **headers: str) -> Reply:
    return Reply(status, json.dumps(payload), {"Content-Type": "application/json", **headers})


def listing(*ids: str) -> Reply:
    """An OpenAI-style GET /models answer."""
    return reply_json(200, {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})


def chat_answer(text: str = "The figures do not support a conclusion; I cannot verify the total.") -> Reply:
    return reply_json(200, {
        "id": "chatcmpl-1", "object": "chat.completion", "model": "served-1",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    })


# A route answers a request (the handler gives its headers and decoded JSON body) with a Reply.
Route = Reply | Callable[[dict, object], Reply]


class LoopbackProvider:
    def __init__(self, routes: dict[tuple[str, str], Route]):
        self.routes = routes
        self.seen: list[dict] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"

    def requests(self, method: str, path: str | None = None) -> list[dict]:
        with self._lock:
            return [r for r in self.seen if r["method"] == method and (path is None or r["path"] == path)]

    def __enter__(self) -> LoopbackProvider:
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler(owner: LoopbackProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # keep test output quiet
            pass

        def _answer(self, method: str) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            path = self.path.split("?", 1)[0]
            headers = {k.lower(): v for k, v in self.headers.items()}
            with owner._lock:
                owner.seen.append({"method": method, "path": path, "headers": headers, "body": body})
            route = owner.routes.get((method, path))
            if route is None:
                reply = Reply(404, "404 page not found", {"Content-Type": "text/plain"})
            else:
                reply = route(headers, body) if callable(route) else route
            payload = reply.body.encode()
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            self._answer("GET")

        def do_POST(self) -> None:  # noqa: N802 - stdlib naming
            self._answer("POST")

    return Handler
