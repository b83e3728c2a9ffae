"""Adapters over real HTTP: a local ThreadingHTTPServer replays recorded provider responses and
misbehaves on purpose (slow, reset, truncated, trickling), so every provider fault lands in a named
outcome class and the API key never reaches a stored request, header or body."""

from __future__ import annotations

import gzip
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.transport import close_thread_sessions, session_for
from afpbench.workers.providers.types import ChatRequest, Endpoint, OutcomeClass
from tests.unit.workers.providers.test_classify import expected_class

SAMPLES_DIR = Path(
    os.environ.get("AFP_PROVIDER_SAMPLES")
    or Path(__file__).resolve().parents[3] / "shared" / "provider-samples"
)
SAMPLES = sorted(SAMPLES_DIR.glob("*.json")) if SAMPLES_DIR.is_dir() else []
KEY_ENV = "AFP_REPLAY_TEST_KEY"
CANARY = "sk-canary-" + "7f3a9c1e5b2d4f6a8c0e1a2b"
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-encoding",
    "content-length",
    "te",
    "trailer",
    "upgrade",
    "proxy-authenticate",
    "proxy-authorization",
}
REQUEST = ChatRequest(
    [{"role": "system", "content": "Be exact."}, {"role": "user", "content": "Say hello"}], []
)
OPENAI_ANSWER = {
    "id": "chatcmpl-1",
    "model": "served-1",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}

Behaviour = Callable[[BaseHTTPRequestHandler], None]


class ReplayServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.routes: dict[str, Behaviour] = {}
        self.seen: list[dict] = []  # every request as received: path, headers, body, client port

    def route(self, name: str, behaviour: Behaviour) -> str:
        self.routes[name] = behaviour
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies

    def log_message(self, *args):  # keep test output quiet
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.server.seen.append(
            {"path": self.path, "headers": dict(self.headers), "body": body, "port": self.client_address[1]}
        )
        name = self.path.lstrip("/").split("/", 1)[0]
        try:
            self.server.routes[name](self)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on purpose (deadline tests)


def respond(status: int, body: bytes | str, headers: dict | None = None) -> Behaviour:
    raw = body.encode() if isinstance(body, str) else body

    def behaviour(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        for name, value in (headers or {}).items():
            if name.lower() in HOP_BY_HOP:
                continue
            for v in value if isinstance(value, list) else [value]:
                h.send_header(name, str(v))
        h.send_header("Content-Length", str(len(raw)))
        h.end_headers()
        h.wfile.write(raw)

    return behaviour


@pytest.fixture(scope="module")
def server():
    srv = ReplayServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    close_thread_sessions()


@pytest.fixture(autouse=True)
def canary_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, CANARY)


def endpoint(provider: str, base_url: str, **kw) -> Endpoint:
    return Endpoint(
        provider=provider,
        model=kw.pop("model", "m-1"),
        base_url=base_url,
        api_key_env=KEY_ENV,
        params=kw.pop("params", {}),
        **kw,
    )


def family_of(sample_provider: str) -> str:
    if sample_provider.startswith("openai-compatible") or sample_provider in ("openai", "azure-openai"):
        return "openai"
    return {"anthropic": "anthropic", "google-gemini": "gemini"}[sample_provider]


def assert_no_key_stored(result) -> None:
    stored = json.dumps(
        {
            "request": result.request_sent,
            "headers": result.headers,
            "raw": result.raw_body,
            "error": result.error,
            "text": result.text,
        }
    )
    assert CANARY not in stored
    assert not {"authorization", "x-api-key", "x-goog-api-key"} & {
        k.lower() for k in result.request_sent["headers"]
    }


@pytest.mark.parametrize("path", SAMPLES or [None], ids=lambda p: p.stem if p else "no-samples")
def test_replayed_sample_classified_over_http(server, path):
    """Each recorded response, served over real HTTP, lands in its documented outcome class."""
    if path is None:
        pytest.skip(f"provider samples not found at {SAMPLES_DIR} (set AFP_PROVIDER_SAMPLES)")
    sample = json.loads(path.read_text(encoding="utf-8"))
    body = sample["body"] if isinstance(sample["body"], str) else json.dumps(sample["body"])
    base = server.route(path.stem, respond(sample["status"], body, sample["headers"]))
    result = adapter_for(family_of(sample["provider"])).call(
        endpoint(family_of(sample["provider"]), base), REQUEST
    )
    assert result.outcome == expected_class(path, sample), result.error
    assert result.http_status == sample["status"]
    assert result.latency_ms > 0
    assert_no_key_stored(result)


@pytest.mark.parametrize(
    "provider,auth_header,auth_value,path_suffix",
    [
        ("openai", "Authorization", f"Bearer {CANARY}", "/v1/chat/completions"),
        ("anthropic", "x-api-key", CANARY, "/v1/messages"),
        ("gemini", "x-goog-api-key", CANARY, "/v1beta/models/m-1:generateContent"),
    ],
)
def test_key_sent_in_header_only_and_never_stored(server, provider, auth_header, auth_value, path_suffix):
    """The key reaches the provider in its auth header, never the URL, and no stored field holds it,
    even when the provider echoes it back in an error body."""
    echo = {
        "error": {
            "message": f"Incorrect API key provided: {CANARY}",
            "type": "authentication_error",
            "code": "invalid_api_key",
        }
    }
    name = f"echo-{provider}"
    base = server.route(name, respond(401, json.dumps(echo), {"Content-Type": "application/json"}))
    result = adapter_for(provider).call(
        endpoint(provider, base + "/v1" if provider == "openai" else base), REQUEST
    )
    seen = server.seen[-1]
    assert seen["path"] == f"/{name}{path_suffix}"
    assert seen["headers"][auth_header] == auth_value
    assert CANARY not in seen["path"]
    assert result.outcome == OutcomeClass.auth_error
    assert result.error.startswith("401")
    assert_no_key_stored(result)
    assert result.request_sent["url"].endswith(path_suffix)
    assert result.request_sent["json"]  # the body that was sent is on record


def test_read_timeout_is_infra_error(server):
    """The answer is held until the call has returned (at most 30 s): a client without a read timeout
    would wait for it and get an answer, so the outcome alone shows the timeout cut the call."""
    release = threading.Event()

    def slow(h):
        release.wait(30)
        respond(200, json.dumps(OPENAI_ANSWER))(h)

    base = server.route("slow", slow)
    try:
        result = adapter_for("openai").call(endpoint("openai", base, timeout_s=0.3), REQUEST)
    finally:
        release.set()
    assert result.outcome == OutcomeClass.infra_error
    assert result.error.startswith("read timeout after 0.3s")
    assert result.http_status is None
    assert_no_key_stored(result)


def test_connection_reset_is_infra_error(server):
    def reset(h):
        # SO_LINGER with zero timeout makes close() send RST instead of FIN.
        h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        h.connection.close()
        h.close_connection = True

    base = server.route("reset", reset)
    result = adapter_for("anthropic").call(endpoint("anthropic", base), REQUEST)
    assert result.outcome == OutcomeClass.infra_error
    assert result.error.startswith("connection error: ")
    assert_no_key_stored(result)


def test_body_cut_short_is_infra_error(server):
    def cut(h):
        raw = json.dumps(OPENAI_ANSWER).encode()
        h.send_response(200)
        h.send_header("Content-Length", str(len(raw)))
        h.end_headers()
        h.wfile.write(raw[: len(raw) // 2])
        h.wfile.flush()
        h.close_connection = True

    base = server.route("cut", cut)
    result = adapter_for("openai").call(endpoint("openai", base), REQUEST)
    assert result.outcome == OutcomeClass.infra_error
    assert result.error.startswith("truncated body")


def test_connection_refused_is_infra_error():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    result = adapter_for("gemini").call(endpoint("gemini", f"http://127.0.0.1:{port}"), REQUEST)
    assert result.outcome == OutcomeClass.infra_error
    assert result.error.startswith("connection error: ")


def trickle(raw: bytes, pause_s: float, chunked: bool) -> Behaviour:
    def behaviour(h):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        if chunked:
            h.send_header("Transfer-Encoding", "chunked")
        else:
            h.send_header("Content-Length", str(len(raw)))
        h.end_headers()
        for i in range(0, len(raw), 8):
            piece = raw[i : i + 8]
            h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            h.wfile.flush()
            time.sleep(pause_s)
        if chunked:
            h.wfile.write(b"0\r\n\r\n")

    return behaviour


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_slow_trickle_within_deadline_is_read_whole(server, chunked):
    raw = json.dumps(OPENAI_ANSWER).encode()
    base = server.route(f"trickle-ok-{chunked}", trickle(raw, 0.005, chunked))
    result = adapter_for("openai").call(endpoint("openai", base, timeout_s=5), REQUEST)
    assert result.outcome == OutcomeClass.answer
    assert result.text == "hello" and result.served_model == "served-1"


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_endless_trickle_hits_overall_deadline(server, chunked):
    """Each piece arrives well within the per-read timeout, so only the overall deadline stops it. The
    whole body would take about 50 s (8 bytes every 0.1 s): the bound only catches a missing deadline,
    whatever the machine's load."""
    raw = json.dumps(OPENAI_ANSWER).encode() * 20
    assert len(raw) / 8 * 0.1 > 40
    base = server.route(f"trickle-slow-{chunked}", trickle(raw, 0.1, chunked))
    started = time.monotonic()
    result = adapter_for("openai").call(
        endpoint("openai", base, timeout_s=0.6, connect_timeout_s=0.2), REQUEST
    )
    elapsed = time.monotonic() - started
    assert result.outcome == OutcomeClass.infra_error
    assert result.error.startswith("response deadline exceeded after 0.8s")
    assert elapsed < 20


def test_gzip_body_is_decoded(server):
    raw = gzip.compress(json.dumps(OPENAI_ANSWER).encode())
    base = server.route("gzip", respond(200, raw, {"Content-Type": "application/json"}))

    def gzip_response(h):
        h.send_response(200)
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Content-Length", str(len(raw)))
        h.end_headers()
        h.wfile.write(raw)

    server.routes["gzip"] = gzip_response
    result = adapter_for("openai").call(endpoint("openai", base), REQUEST)
    assert result.outcome == OutcomeClass.answer and result.text == "hello"


def test_redirect_is_not_followed(server):
    """Following a redirect would carry x-api-key to another host; it is a config error instead."""
    base = server.route("moved", respond(301, "", {"Location": "http://example.invalid/v1/messages"}))
    result = adapter_for("anthropic").call(endpoint("anthropic", base), REQUEST)
    assert result.outcome == OutcomeClass.auth_error
    assert len([s for s in server.seen if s["path"].startswith("/moved")]) == 1


def test_session_pooled_per_thread_and_connection_reused(server):
    base = server.route(
        "pooled", respond(200, json.dumps(OPENAI_ANSWER), {"Content-Type": "application/json"})
    )
    adapter = adapter_for("openai")
    for _ in range(2):
        assert adapter.call(endpoint("openai", base), REQUEST).outcome == OutcomeClass.answer
    ports = [s["port"] for s in server.seen if s["path"].startswith("/pooled")]
    assert len(ports) == 2 and ports[0] == ports[1], "keep-alive connection reused by the pooled session"
    here = session_for(base)
    assert session_for(base) is here
    other: list = []
    worker = threading.Thread(target=lambda: other.append(session_for(base)))
    worker.start()
    worker.join()
    assert other[0] is not here
