"""Private Redis and PostgreSQL servers that a reliability test may kill and restart.

Each runs on a free loopback port in its own temporary directory; the machine's shared services
(Redis on 6379, PostgreSQL on 5432) are never touched. Restarting loses everything Redis held (no
persistence), as a real broker restart without AOF does; PostgreSQL keeps its data (an immediate stop
is a crash: in-flight transactions are rolled back on the way up).
"""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class ServiceUnavailable(RuntimeError):
    """The service cannot be run here (binary missing, no postgres OS user...)."""


def die_with_parent() -> None:
    """preexec_fn for test subprocesses: Linux sends SIGKILL to the child when the test process dies, so
    a test run killed by a timeout leaves no worker or broker behind (no-op where prctl is missing)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


class PrivateRedis:
    """`redis-server` without persistence on a free port; `restart()` comes back empty."""

    def __init__(self, log_dir: Path) -> None:
        if shutil.which("redis-server") is None:
            raise ServiceUnavailable("redis-server is not installed")
        self.port = free_port()
        self.log_dir = log_dir
        self.proc: subprocess.Popen | None = None
        self.restarts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        log = open(self.log_dir / f"redis-{self.port}-{self.restarts}.log", "w")  # noqa: SIM115 - kept by Popen
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent,
        )
        if not _wait_port(self.port, 10):
            raise ServiceUnavailable(f"redis-server did not listen on port {self.port}")
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self, down_s: float = 0.0) -> None:
        """Kill the server (everything it held is lost) and start an empty one on the same port."""
        self.kill()
        time.sleep(down_s)
        self.restarts += 1
        self.start()

    def __enter__(self) -> PrivateRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl:
        return Path(pg_ctl).parent
    raise ServiceUnavailable("no pg_ctl under /usr/lib/postgresql/*/bin or on PATH")


class PrivatePostgres:
    """A throw-away PostgreSQL cluster (trust auth, fsync off) in a temporary directory.

    initdb refuses to run as root, so as root every server command runs as the `postgres` OS user.
    """

    def __init__(self) -> None:
        self.bin = _pg_bin()
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="afp-pg-"))
        self.data = self.dir / "data"
        self.restarts = 0
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                raise ServiceUnavailable("running as root without runuser to drop to the postgres user")
            try:
                shutil.chown(self.dir, "postgres", "postgres")
            except (LookupError, OSError) as exc:
                raise ServiceUnavailable(f"no postgres OS user to run the server as: {exc}") from None
            self._as_user = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 60) -> None:
        proc = subprocess.run([*self._as_user, *args], capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise ServiceUnavailable(f"{Path(args[0]).name} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")

    def start(self) -> PrivatePostgres:
        if not self.data.exists():
            self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                      "--no-sync", "-E", "UTF8")
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "server.log"),
                  "-o", opts, "-w", "-t", "60", "start")
        return self

    def stop(self, mode: str = "immediate") -> None:
        """`immediate` is a crash as far as clients can tell: every connection drops mid-transaction."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.restarts += 1
        self.start()

    def __enter__(self) -> PrivatePostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop("fast")
        except ServiceUnavailable:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
