"""Running the validity gate over a sweep's fixtures, on two cores when that is safe.

The gate (scoring/validity.py) is pure and per fixture: about 1.5 ms a fixture, all before the sweep
row exists, while the second core of a small machine idles. With many fixtures, and only when this
process has no other thread (a command-line `run` before its worker starts; never the HTTP server),
a forked child gates the second half while this process gates the first. The child inherits the parsed
fixtures (nothing is pickled in), sends its reports back as JSON over a pipe, and exits without
running any cleanup. Whatever goes wrong with the child (it dies, writes nothing, writes something
unreadable), the parent gates that half itself: the reports are exactly those of the one-core run,
in fixture order.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence

from afpbench.fixtures.schema import Fixture

log = logging.getLogger(__name__)

# Below this many fixtures a fork (a few milliseconds, and a copy of touched pages) is not worth it.
SPLIT_FROM_FIXTURES = 200

Report = dict  # the stored form of one fixture's validity report: {"passed": ..., "failures": [...]}


def _may_fork(fixtures: int) -> bool:
    # A fork copies only the calling thread: with another thread alive (a worker pool, a server, a
    # lease keeper) a lock it held would stay locked in the child. One thread, more than one core.
    return (
        fixtures >= SPLIT_FROM_FIXTURES
        and hasattr(os, "fork")
        and (os.cpu_count() or 1) > 1
        and threading.active_count() == 1
    )


def gate_all(fixtures: Sequence[Fixture], gate: Callable[[Fixture], Report]) -> dict[str, Report]:
    """`gate` of every fixture, by fixture id in the given order (split over two processes when safe)."""
    if not _may_fork(len(fixtures)):
        return {fx.id: gate(fx) for fx in fixtures}
    half = len(fixtures) // 2
    mine, theirs = fixtures[:half], fixtures[half:]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: gate its half, write it, leave at once
        status = 1
        try:
            gc.disable()  # a collection would touch (and so copy) every inherited object's page
            os.close(read_end)
            payload = json.dumps({fx.id: gate(fx) for fx in theirs}).encode()
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    reports = {fx.id: gate(fx) for fx in mine}
    with os.fdopen(read_end, "rb") as incoming:
        payload = incoming.read()
    _, wait_status = os.waitpid(pid, 0)
    reports.update(_child_reports(payload, wait_status, theirs) or {fx.id: gate(fx) for fx in theirs})
    return reports


def _child_reports(payload: bytes, wait_status: int, expected: Sequence[Fixture]) -> dict[str, Report] | None:
    """The child's reports, or None when they cannot be trusted whole (then the parent gates them)."""
    if os.waitstatus_to_exitcode(wait_status) != 0:
        log.warning("validity gate: the helper process failed; gating its fixtures here")
        return None
    try:
        reports = json.loads(payload)
    except ValueError:
        log.warning("validity gate: unreadable reports from the helper process; gating its fixtures here")
        return None
    if not isinstance(reports, dict) or list(reports) != [fx.id for fx in expected]:
        log.warning("validity gate: incomplete reports from the helper process; gating its fixtures here")
        return None
    return reports
