"""Start and stop real `afpbench worker` processes for integration tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import REPO


def service_env(database_url: str, broker_url: str, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "AFP_DATABASE_URL": database_url,
        "AFP_BROKER_URL": broker_url,
        "PYTHONUNBUFFERED": "1",
    }
    env.update(extra)
    return env


@contextmanager
def running_workers(
    env: dict[str, str],
    names: list[str],
    log_dir: Path,
    concurrency: int = 4,
    queues: str | None = None,
    pool: str = "threads",
    beat: bool = False,
):
    procs = []
    for name in names:
        log = open(log_dir / f"{name}.log", "w")  # noqa: SIM115 - closed below
        args = [
            sys.executable,
            "-m",
            "afpbench.api.cli",
            "worker",
            f"--concurrency={concurrency}",
            f"--hostname={name}@%h",
            f"--pool={pool}",
            "--loglevel=INFO",
        ]
        if queues:
            args.append(f"--queues={queues}")
        if beat:  # the periodic tasks too; celery beat keeps its schedule file in the working directory
            args.append("--beat")
        proc = subprocess.Popen(
            args, cwd=log_dir if beat else REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        procs.append((proc, log))
    try:
        yield [p for p, _ in procs]
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc, log in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()
