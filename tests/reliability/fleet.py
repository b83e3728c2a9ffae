"""Real `afpbench worker` processes that a test kills with SIGKILL and replaces.

Each worker runs in its own session (process group), so killing the group takes the main process and
its whole pool at once, as a machine or container dying would. A prefork pool child can also be killed
alone (found with `ps --ppid`), which Celery reports as WorkerLostError.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO
from tests.reliability.services import die_with_parent


@dataclass
class Worker:
    name: str
    proc: subprocess.Popen
    log_path: Path
    pool: str

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class WorkerFleet:
    env: dict[str, str]
    log_dir: Path
    concurrency: int = 4
    workers: dict[str, Worker] = field(default_factory=dict)
    started: int = 0
    kills: int = 0
    child_kills: int = 0

    def start(self, pool: str = "threads", queues: str | None = None, beat: bool = False,
              name: str | None = None) -> Worker:
        self.started += 1
        name = name or f"w{self.started}"
        log_path = self.log_dir / f"{name}.log"
        args = [sys.executable, "-m", "afpbench.api.cli", "worker", f"--concurrency={self.concurrency}",
                f"--hostname={name}@%h", f"--pool={pool}", "--loglevel=INFO"]
        if queues:
            args.append(f"--queues={queues}")
        if beat:
            args.append("--beat")
        env = {**self.env, "PYTHONPATH": str(REPO)}
        with open(log_path, "w") as log:
            # cwd is the log folder: beat writes its schedule file in the working directory.
            proc = subprocess.Popen(args, cwd=self.log_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=die_with_parent)
        worker = Worker(name, proc, log_path, pool)
        self.workers[name] = worker
        return worker

    def killable(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.alive and not w.name.startswith("beat")]

    def kill(self, worker: Worker) -> None:
        """SIGKILL the worker's whole process group: no shutdown, no acks, no cleanup."""
        os.killpg(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait(10)
        self.kills += 1

    def pool_children(self, worker: Worker) -> list[int]:
        out = subprocess.run(["ps", "--ppid", str(worker.proc.pid), "-o", "pid="], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def kill_pool_child(self, worker: Worker) -> int | None:
        """SIGKILL one prefork pool child (busy or not); the main process replaces it."""
        children = self.pool_children(worker)
        if not children:
            return None
        victim = children[self.child_kills % len(children)]
        os.kill(victim, signal.SIGKILL)
        self.child_kills += 1
        return victim

    def wait_ready(self, worker: Worker, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not worker.alive:
                raise RuntimeError(f"worker {worker.name} exited: {self.tail(worker)}")
            if "ready." in worker.log_path.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise RuntimeError(f"worker {worker.name} not ready after {timeout_s} s: {self.tail(worker)}")

    def count_in_logs(self, pattern: str) -> int:
        """Matches of a regular expression in every worker's log."""
        return sum(len(re.findall(pattern, w.log_path.read_text(errors="replace"))) for w in self.workers.values())

    def finished_tasks(self, worker: Worker) -> int:
        return worker.log_path.read_text(errors="replace").count(" succeeded in ")

    def tail(self, worker: Worker, chars: int = 3000) -> str:
        return worker.log_path.read_text(errors="replace")[-chars:]

    def logs(self, chars: int = 2000) -> str:
        return "\n".join(f"--- {w.name}\n{self.tail(w, chars)}" for w in self.workers.values())

    def stop_all(self) -> None:
        for worker in self.workers.values():
            if worker.alive:
                os.killpg(worker.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for worker in self.workers.values():
            try:
                worker.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(worker.proc.pid, signal.SIGKILL)
                worker.proc.wait()

    def __enter__(self) -> WorkerFleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()
