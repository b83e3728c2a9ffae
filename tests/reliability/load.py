"""A busy machine on demand: processes that spin on the CPU for as long as a test runs.

Reliability rules must hold when the cores are taken (a CI runner shared with other jobs), not only
on a quiet machine; a test that depends on spare cores fails where it matters. The hogs run at normal
priority and die with the test process (PR_SET_PDEATHSIG) if it is killed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tests.reliability.services import die_with_parent


@contextmanager
def cpu_hog(processes: int | None = None) -> Iterator[list[int]]:
    """One spinning process per core plus one (at least 2) for the duration of the block; yields pids."""
    count = processes or max(2, (os.cpu_count() or 1) + 1)
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=die_with_parent)
             for _ in range(count)]
    try:
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(10)


def busy_cpu_seconds(pids: list[int]) -> float:
    """CPU time the hogs have used so far (user + system), read from /proc: proof the load was real."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total
