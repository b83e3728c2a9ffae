"""`afpbench worker --processes N`: N worker processes from one command, so one command uses every core.

One worker process runs its tasks on threads under one GIL: at 0 ms latency it saturates one core
(docs/PERFORMANCE.md). Celery's prefork pool runs one task per child at a time, so it cannot give each
core a thread pool of its own; N whole workers can. Each child is a complete `afpbench worker` (its
own interpreter, thread pool, database pool and node name `<name>-<i>@<host>`); this parent only
starts them, passes SIGINT / SIGTERM on (a warm shutdown in each child), and starts again a child
that died while the group was running: its unacknowledged tasks come back from the broker after the
visibility timeout, as for any lost worker, and their cells' leases keep duplicates out.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

# A child that exits non-zero this soon after its start failed on its configuration (broker or database
# down, schema behind: the check prints one line): starting it again would only fail again.
_FAILED_AT_START_S = 10.0


def node_names(hostname: str | None, processes: int) -> list[str]:
    """Distinct Celery node names, one per child: two workers with one name confuse remote control and
    Flower, and leases name their holder."""
    name, _, host = (hostname or "afpbench@%h").partition("@")
    return [f"{name}-{i}@{host or '%h'}" for i in range(1, processes + 1)]


@dataclass
class _Child:
    argv: list[str]
    proc: subprocess.Popen = field(init=False)
    started: float = field(init=False)

    def start(self) -> None:
        # Its own process group: a terminal's Ctrl-C reaches only this parent, which passes it on once
        # (a second SIGINT would make Celery stop cold, abandoning its running tasks).
        self.proc = subprocess.Popen(self.argv, process_group=0)
        self.started = time.monotonic()


def run_group(child_argvs: list[list[str]], poll_s: float = 0.5, failed_at_start_s: float = _FAILED_AT_START_S) -> int:
    """Run one child per argv until SIGINT / SIGTERM, then stop them all; the exit status is the first
    non-zero one among the children (0 when all stopped cleanly)."""
    children = [_Child(argv) for argv in child_argvs]
    stopping: list[int] = []

    def _stop(signum, _frame) -> None:
        stopping.append(signum)
        for child in children:
            if child.proc.poll() is None:
                child.proc.send_signal(signum)

    previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for child in children:
            child.start()
        while not stopping:
            for child in children:
                status = child.proc.poll()
                if status is None or stopping:
                    continue
                if status != 0 and time.monotonic() - child.started < failed_at_start_s:
                    print(f"afpbench worker: a worker process exited with status {status} at start; "
                          "stopping the others", file=sys.stderr)
                    _stop(signal.SIGTERM, None)
                    break
                print(f"afpbench worker: a worker process exited with status {status}; starting it again",
                      file=sys.stderr)
                child.start()
            time.sleep(poll_s)
        statuses = [child.proc.wait() for child in children]
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return next((s for s in statuses if s not in (0, -signal.SIGTERM, -signal.SIGINT)), 0)
