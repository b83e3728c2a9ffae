"""Two jobs at once on a small machine: one in this process, one in a forked child.

Used before a sweep row exists (parsing and gating its fixtures: gate_run.py), where the second core of
a two-core machine would otherwise idle. Only call it when `may_fork` says so. The child inherits
everything it needs (nothing is sent in), returns its result pickled over a pipe and leaves at once
without running any cleanup. The caller decides what to trust of that result and does the rest itself:
a child that dies or writes something unreadable gives None.
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO, TypeVar

log = logging.getLogger(__name__)

Here = TypeVar("Here")


def may_fork() -> bool:
    """More than one core, and no other thread alive. A fork copies only the calling thread: with another
    thread alive (a worker pool, a server, a lease keeper) a lock it held would stay locked in the child."""
    return hasattr(os, "fork") and (os.cpu_count() or 1) > 1 and threading.active_count() == 1


def run_beside_a_child(here: Callable[[], Here], in_child: Callable[[], Any], what: str) -> tuple[Here, Any]:
    """here() in this process while in_child() runs in a forked child: here()'s result and in_child()'s
    (None when the child failed or sent something unreadable). If here() raises, the child is killed and
    reaped before the exception goes on. `what` names the job in log messages."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        _be_the_child(read_end, write_end, in_child)
    os.close(write_end)
    incoming = os.fdopen(read_end, "rb")
    try:
        mine = here()
        theirs, readable = _unpickled(incoming)
    except BaseException:
        os.kill(pid, signal.SIGKILL)  # its work is of no use now; do not wait for it to finish
        raise
    finally:
        incoming.close()
        _, wait_status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(wait_status) != 0:
        log.warning("%s: the helper process failed; doing its share here", what)
        return mine, None
    if not readable:
        log.warning("%s: unreadable result from the helper process; doing its share here", what)
    return mine, theirs


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: for code that only builds many objects (unpickling the child's
    fixtures, reading cached ones), where collections would walk the growing heap for nothing (5,000
    fixtures unpickled: 0.8-1.2 s of CPU with the collector on, 0.24-0.31 s without)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _unpickled(incoming: BinaryIO) -> tuple[Any, bool]:
    """The child's result and True, or (None, False) when the stream cannot be read whole (a child that
    died mid-write leaves it short or empty). Unpickling is safe here: only our own child, forked from
    this process, holds the other end of the pipe."""
    with collector_paused():
        try:
            return pickle.load(incoming), True
        except Exception:
            return None, False


def _be_the_child(read_end: int, write_end: int, work: Callable[[], Any]) -> None:
    """Do `work`, write its result, leave without cleanup (no atexit, no flushing of inherited buffers)."""
    status = 1
    try:
        gc.disable()  # a collection would touch (and so copy) every inherited object's page
        os.close(read_end)
        # Pickled whole before writing: the parent reads only once its own share is done, so the
        # pickling overlaps the parent's work instead of following it.
        payload = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_end, "wb") as out:
            out.write(payload)
        status = 0
    finally:
        os._exit(status)
