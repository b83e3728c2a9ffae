"""A real `afpbench serve` process for tests: on a free loopback port, ready once /readyz answers, stopped
with SIGTERM (the lifespan shuts down cleanly) and killed if it does not stop. One place for the start-up
and tear-down that the HTTP, door, docs and fuzzing tests all need."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.conftest import REPO


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Served:  # not frozen: a test may hang its own facts on it (e.g. the database it uses)
    base: str
    proc: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def afpbench_http_process(args: list[str], port: int, health_path: str, env: dict[str, str], log_path: Path, *,
                          cwd: Path = REPO, ready_within_s: float = 90,
                          healthy_only: bool = True) -> Iterator[Served]:
    """`afpbench ARGS` serving HTTP on `port` (stdout and stderr in log_path): ready when `health_path`
    answers 200, or answers at all with `healthy_only=False`."""
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "afpbench.api.cli", *args], cwd=cwd,
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_within_s
        while True:
            assert proc.poll() is None, f"{args[0]} exited {proc.returncode}: {log_path.read_text()}"
            try:
                if requests.get(f"{base}{health_path}", timeout=5).status_code == 200 or not healthy_only:
                    break
            except requests.RequestException:  # not listening yet, or busy starting up
                pass
            assert time.monotonic() < deadline, f"{args[0]} did not come up: {log_path.read_text()}"
            time.sleep(0.2)
        yield Served(base, proc, log_path)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def serve_process(env: dict[str, str], log_path: Path, *, cwd: Path = REPO, ready_within_s: float = 90,
                  healthy_only: bool = True):
    """`afpbench serve` on a free loopback port, ready when /readyz answers 200 (its database answers; the
    schema is then in place) or answers at all with `healthy_only=False` (a server whose broker or
    database is down on purpose says so with 503)."""
    port = free_port()
    return afpbench_http_process(["serve", "--port", str(port)], port, "/readyz", env, log_path, cwd=cwd,
                                 ready_within_s=ready_within_s, healthy_only=healthy_only)
