"""The embedded mode on two cores: a second worker process beside the command's own.

An embedded run's cells are one core's work (one interpreter, one GIL) while the second core of a small
machine idles beside the model's server. When a sweep may be split (`may_split`), `afpbench run` holds
the messages of the sweep's first release, and once the sweep exists (before any thread starts) forks a
second embedded worker:

- Each execute message goes to the process that owns its cell: even ids here, odd ids in the child.
  `publish` in either process hands the other's share over a socket pair. Retries, score and aggregate
  messages stay in the process that sends them, so every message of a cell lives in its owner.
- SQL is the only state the two share, as between distributed workers: claims, leases and the
  completion claim work across processes unchanged. SQLite writers of both processes queue on one flock
  (db.share_sqlite_writer), not in SQLite's sleeping busy handler.
- Only a sweep that declares no limits is split: the limiter is in memory, one per process, and a rate
  or an in-flight cap must be counted in one place (a paced sweep waits on its rate, not on a core).
- `--threads N` is shared out, ceil(N/2) here and floor(N/2) there: the endpoint never sees more than N.
- The child ignores Ctrl-C (this process handles it and stops the child). It stops when told (warm at the
  end, cold after an error) or when this process goes away (end of file on the socket).
- If the child dies with cells open, its tries in flight end "interrupted" and its share of the open
  cells is sent again here (runs.take_over): the sweep finishes in one process, with nothing lost.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import signal
import socket
import struct
import tempfile
import threading
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import make_url

from afpbench.workers.celery_app import EXECUTE, Message, divert_publishing, publish_here
from afpbench.workers.embedded import embedded_worker
from afpbench.workers.runs import take_over
from afpbench.workers.settings import Settings
from afpbench.workers.store.db import share_sqlite_writer
from afpbench.workers.sweeps.spec import SweepSpec
from afpbench.workers.sweeps.two_processes import may_fork

log = logging.getLogger(__name__)

# Below this many cells in the first release a second process (its start, ~0.2 s) is not worth it.
SPLIT_FROM_CELLS = 200
CHILD_WORKER = "embedded-2@localhost"
HERE, CHILD = 0, 1  # which process owns a cell: `owner` of its id
_FRAME = struct.Struct(">I")


def may_split(spec: SweepSpec, threads: int, settings: Settings) -> bool:
    """Whether this run may use a second process: embedded, allowed (AFP_EMBEDDED_PROCESSES), at least
    two threads to share out, and no limit declared by any model or judge of the sweep."""
    return (settings.embedded and settings.embedded_processes > 1 and threads >= 2
            and not any(m.limits.declared for m in [*spec.models, *spec.judges]))


def owner(cell_id: Any) -> Any:
    """HERE or CHILD: the parity of a cell id (an int, or Cell.id in a query)."""
    return cell_id % 2


def _elsewhere(message: Message, mine: int) -> bool:
    """Whether the other process owns `message`: an execute message of a cell `mine` (HERE or CHILD) does
    not own. Every other message stays where it is sent."""
    return message[0] == EXECUTE and owner(message[1][0]) != mine


def _share(link: _Link, messages: Sequence[Message], mine: int) -> Sequence[Message]:
    """The divert hook of either process: the other's share is handed over; returns what is sent here
    (all of it when none is theirs, or when the other process is gone)."""
    theirs = [m for m in messages if _elsewhere(m, mine)]
    if not theirs or not link.send(("publish", theirs)):
        return messages
    return [m for m in messages if not _elsewhere(m, mine)]


class _Link:
    """One end of the socket pair: frames of pickled tuples, sent whole under a lock (many threads
    publish). Unpickling is safe: only our own fork holds the other end."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._lock = threading.Lock()

    def send(self, frame: tuple) -> bool:
        body = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            with self._lock:
                self.sock.sendall(_FRAME.pack(len(body)) + body)
            return True
        except OSError:  # the other process is gone
            return False

    def receive(self) -> tuple | None:
        head = self._exactly(_FRAME.size)
        body = None if head is None else self._exactly(_FRAME.unpack(head)[0])
        return None if body is None else pickle.loads(body)

    def _exactly(self, size: int) -> bytes | None:
        chunks, left = [], size
        while left:
            try:
                chunk = self.sock.recv(min(left, 1 << 20))
            except OSError:
                return None
            if not chunk:
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


class EmbeddedPair:
    """The second process of one embedded run: `hold()` before the sweep is created, `start(sweep_id)`
    after it (forks the child, or not), and leave it as a context to stop the child."""

    def __init__(self, threads: int, database_url: str) -> None:
        self.threads = threads
        self.stop_wait_s = 15.0  # how long a warm stop waits for the child's tasks in flight
        self._database_url = database_url
        self._held: list[Message] | None = None
        self._link: _Link | None = None
        self._pid: int | None = None
        self._sweep_id: str | None = None
        self._writer_file: str | None = None
        self._stopping = False
        self._gone = threading.Event()
        self.exit_code: int | None = None

    # ------------------------------------------------------------------ routing
    def hold(self) -> None:
        """Keep what is published from now on (the sweep's first release) until the fork decides."""
        self._held = []
        divert_publishing(self._divert)

    def let_go(self) -> None:
        """Creating the sweep failed: publishing is this process's alone again; the held messages go."""
        self._held = None
        divert_publishing(None)

    def _divert(self, messages: Sequence[Message]) -> Sequence[Message]:
        if self._held is not None:
            self._held.extend(messages)
            return []
        if self._link is None or self._gone.is_set():  # no child, or it is gone: every message is sent here
            return messages
        return _share(self._link, messages, HERE)  # a child gone meanwhile: all here (take_over covers it)

    # ------------------------------------------------------------------ start
    def start(self, sweep_id: str) -> int:
        """Fork the child for `sweep_id` if its first release is big enough and no thread is alive yet;
        how many threads this process's worker runs. Without a child every held message is sent here."""
        held, self._held = self._held or [], None
        cells = sum(1 for m in held if m[0] == EXECUTE)
        if cells < SPLIT_FROM_CELLS or not may_fork():
            return self._alone_after_all(held)
        self._sweep_id = sweep_id
        here, there = math.ceil(self.threads / 2), self.threads // 2
        if make_url(self._database_url).drivername.startswith("sqlite"):
            handle, self._writer_file = tempfile.mkstemp(prefix="afpbench-writer-")
            os.close(handle)
        share_sqlite_writer(self._writer_file)  # and drops the pooled connections: none crosses the fork
        mine, child = socket.socketpair()
        try:
            pid = os.fork()
        except OSError as exc:  # no memory or process slot for a second one: one process, as before
            log.warning("embedded run: no second process (%s); all cells run here", exc)
            mine.close()
            child.close()
            self._forget_writer_file()
            return self._alone_after_all(held)
        if pid == 0:
            mine.close()
            _be_the_child(_Link(child), [m for m in held if _elsewhere(m, HERE)], there)
        child.close()
        self._pid, self._link = pid, _Link(mine)
        publish_here([m for m in held if not _elsewhere(m, HERE)])
        threading.Thread(target=self._receive, name="afpbench-pair-receiver", daemon=True).start()
        threading.Thread(target=self._watch, name="afpbench-pair-watcher", daemon=True).start()
        return here

    def _alone_after_all(self, held: list[Message]) -> int:
        """No child: publishing is this process's alone, the held messages go out here, all threads here."""
        divert_publishing(None)
        publish_here(held)
        return self.threads

    def _forget_writer_file(self) -> None:
        if self._writer_file:
            share_sqlite_writer(None)
            os.unlink(self._writer_file)
            self._writer_file = None

    @property
    def child_pid(self) -> int | None:
        return self._pid

    def _receive(self) -> None:
        assert self._link is not None
        while (frame := self._link.receive()) is not None:
            if frame[0] == "publish":
                publish_here(frame[1])

    def _watch(self) -> None:
        assert self._pid is not None
        _, status = os.waitpid(self._pid, 0)
        self.exit_code = os.waitstatus_to_exitcode(status)
        self._gone.set()
        if self._stopping:
            return
        log.warning("the second embedded worker process stopped (exit %s); its cells run in this process",
                    self.exit_code)
        if self._sweep_id is not None:
            try:
                take_over(self._sweep_id, CHILD_WORKER, lambda cell_id: owner(cell_id) == CHILD)
            except Exception:
                log.exception("could not take over the second process's cells; `afpbench resume %s` sends them",
                              self._sweep_id)

    # ------------------------------------------------------------------ stop
    def ask_to_stop(self, warm: bool = True) -> None:
        """Tell the child to stop (without waiting), so it stops while this process's worker does. Warm:
        its tasks in flight may finish for up to stop_wait_s. Cold (after an error or Ctrl-C): killed at
        once, as this process's own calls in flight are dropped; SQLite rolls its open writes back."""
        if self._pid is None or self._stopping:
            return
        self._stopping = True
        if warm and self._link is not None and self._link.send(("stop", self.stop_wait_s)):
            return
        if not self._gone.is_set():
            os.kill(self._pid, signal.SIGKILL)

    def __enter__(self) -> EmbeddedPair:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        divert_publishing(None)
        if self._pid is None:
            return
        self.ask_to_stop(warm=exc_type is None)
        if not self._gone.wait(self.stop_wait_s + 2):
            os.kill(self._pid, signal.SIGKILL)
            self._gone.wait(5)
        if self._link is not None:
            self._link.sock.close()
        if self._writer_file:
            os.unlink(self._writer_file)


class _ColdStop(Exception):
    """Leaves the child's worker context the way an error does: running tasks are not waited for."""


def _be_the_child(link: _Link, held: list[Message], threads: int) -> None:
    """The second worker: run its share until told to stop or until the command's process goes away."""
    status = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command's process handles Ctrl-C and stops us
        divert_publishing(lambda messages: _share(link, messages, CHILD))
        publish_here(held)
        try:
            with embedded_worker(threads, hostname=CHILD_WORKER) as worker:
                while (frame := link.receive()) is not None and frame[0] == "publish":
                    publish_here(frame[1])
                if frame is None:  # the command's process is gone: nobody waits for our calls in flight
                    raise _ColdStop
                worker.stop_wait_s = frame[1]
        except _ColdStop:
            pass
        status = 0
    except BaseException:
        log.exception("the second embedded worker process failed")
    finally:
        os._exit(status)

