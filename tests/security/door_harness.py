"""Plumbing for the door tests (tests/security/test_door_*.py): a real `afpbench serve` process with a
token, a stdlib echo server on loopback that records every request it gets, and helpers to read a
process's memory and to talk raw HTTP/1.1 over a socket."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.e2e.test_cli_errors import row_count  # noqa: F401  (the door tests import it from here)
from tests.serving import Served, free_port, serve_process  # noqa: F401  (Served, free_port: used by the door tests)

TOKEN = "door-test-token-5b1e9a7c"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CANARY = "CANARY-door-7e3f19d2"
SIM = {"provider": "sim", "model": "sim-1", "label": "sim (simulated)"}


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


# A route answers (status, JSON body) for a request path.
Route = Callable[[str], tuple[int, dict]]


@dataclass
class EchoServer:
    """Answers every request from `route` and records it; `base_url(prefix)` names a path prefix."""

    route: Route
    seen: list[Seen] = field(default_factory=list)

    @contextmanager
    def running(self) -> Iterator[EchoServer]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                outer.seen.append(Seen(self.command, self.path, dict(self.headers.items())))
                status, body = outer.route(self.path)
                raw = json.dumps(body).encode()
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", body.get("location", "/"))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = _answer

            def log_message(self, *_args) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = server.server_address[1]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()

    def base_url(self, prefix: str) -> str:
        return f"http://127.0.0.1:{self.port}/{prefix}/v1"


def serve_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "AFP_API_TOKEN": TOKEN, "AFP_DATABASE_URL": f"sqlite:///{tmp / 'door.db'}",
           "AFP_BROKER_URL": "memory://localhost/"}
    env.update(extra)
    return env


def cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`afpbench ARGS` in `cwd`, embedded, on a SQLite file there."""
    full = {**os.environ, "AFP_DATABASE_URL": f"sqlite:///{cwd / 'afpbench.db'}", "AFP_BROKER_URL": "memory://",
            **(env or {})}
    return subprocess.run([sys.executable, "-m", "afpbench.api.cli", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=180)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def serving(env: dict[str, str], log_path: Path):
    """`afpbench serve` on a free loopback port (stdout and stderr, the access log included, in log_path)."""
    return serve_process(env, log_path)


def vm_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


@dataclass
class RawAnswer:
    status: int | None
    head: bytes
    body_bytes_sent: int


def push_body(base: str, path: str, headers: dict[str, str], total: int, chunked: bool = False,
              chunk: int = 1024 * 1024, timeout_s: float = 60) -> RawAnswer:
    """POST `total` bytes to `path` over a raw socket, stopping as soon as the server answers or drops
    the connection; returns the answer's status line and how much of the body went out."""
    host, port = base.removeprefix("http://").split(":")
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}")
    sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    received = b""
    sent = 0
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        piece = b"x" * chunk
        deadline = time.monotonic() + timeout_s
        while sent < total and time.monotonic() < deadline:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break  # the server answered (or closed): stop sending
            n = min(chunk, total - sent)
            data = (f"{n:x}\r\n".encode() + piece[:n] + b"\r\n") if chunked else piece[:n]
            try:
                sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += n
        else:
            if chunked and sent >= total:
                try:
                    sock.sendall(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass
        sock.settimeout(timeout_s)
        try:
            while b"\r\n\r\n" not in received:
                part = sock.recv(65536)
                if not part:
                    break
                received += part
        except (ConnectionResetError, TimeoutError):
            pass
    finally:
        sock.close()
    status = int(received.split(b" ", 2)[1]) if received.startswith(b"HTTP/1.1 ") else None
    return RawAnswer(status, received.split(b"\r\n\r\n", 1)[0], sent)
