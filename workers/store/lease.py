"""Leases kept alive while their holder works: one renewal thread per process.

A claim holds a cell for AFP_LEASE_EXPIRY_S. A live try can outlast that: a machine whose cores are
busy stretches every step, a tool conversation waits for the limiter between rounds, judges are slow.
Once the lease ran out, a duplicate message (every message may be delivered more than once) claimed
the cell and called the model again while the first call was still running: two requests, two
attempts, one of them superseded. So every holder registers its lease here, and a daemon thread
extends each lease every third of AFP_LEASE_EXPIRY_S, counted from its claim and then from its last
renewal.

Each renewal is fenced: an execution lease only while the cell is still `executing` under the same
attempt number, a scoring lease only while the cell is `scoring` under the same claim token. A holder
whose fence no longer matches (its lease ran out while it was stalled and another worker claimed the
cell) is marked lost: it renews nothing, starts no further round, and its record is refused by the
same fence in the record transaction.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Connection, Update, bindparam, update
from sqlalchemy.exc import SQLAlchemyError

from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import transaction
from afpbench.workers.store.models import Cell, Phase, table_of, utcnow

log = logging.getLogger(__name__)


CELL = table_of(Cell)

RENEW_EXECUTION = (
    update(CELL)
    .where(
        CELL.c.id == bindparam("b_cell"),
        CELL.c.phase == Phase.executing.value,
        CELL.c.attempts == bindparam("b_fence"),
    )
    .values(lease_until=bindparam("b_until"))
)
RENEW_SCORING = (
    update(CELL)
    .where(
        CELL.c.id == bindparam("b_cell"),
        CELL.c.phase == Phase.scoring.value,
        CELL.c.lease_owner == bindparam("b_fence"),
    )
    .values(lease_until=bindparam("b_until"))
)


def _interval_s() -> float:
    """How often a lease is renewed: every third of it, so two renewals can fail before it runs out."""
    return max(0.2, get_settings().lease_expiry_s / 3)


@dataclass(eq=False)
class Hold:
    """One live lease: the cell, the statement that renews it under its fence, when it is next due
    (monotonic clock), and whether it was lost."""

    cell_id: int
    statement: Update
    fence: int | str
    due: float = 0.0
    lost_event: threading.Event = field(default_factory=threading.Event)

    @property
    def lost(self) -> bool:
        return self.lost_event.is_set()

    def renew(self, conn: Connection, until: datetime) -> bool:
        """Extend the lease if the fence still matches; mark the hold lost when it does not."""
        matched = conn.execute(self.statement, {"b_cell": self.cell_id, "b_fence": self.fence, "b_until": until})
        if matched.rowcount:
            return True
        self.lost_event.set()
        return False


class LeaseKeeper:
    """The holds of this process and the thread that renews each one when it is due."""

    def __init__(self) -> None:
        self._holds: set[Hold] = set()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._wakes_at = math.inf  # when the thread will next look (monotonic), under self._changed

    @contextmanager
    def holding(self, hold: Hold) -> Iterator[Hold]:
        hold.due = time.monotonic() + _interval_s()  # the claim itself just set the lease
        with self._changed:
            self._ensure_thread()
            self._holds.add(hold)
            if hold.due < self._wakes_at:
                # Wake the thread only when it sleeps past this hold (waiting for a later one, or for
                # none): every hold is due one interval after its claim, so while others are held it
                # is never the earliest, and a wake-up per cell was a context switch per cell.
                self._changed.notify()
        try:
            yield hold
        finally:
            with self._changed:
                self._holds.discard(hold)

    def renew_all(self, due_only: bool = False) -> int:
        """Renew the holds (every live one, or those due): the thread's work, and tests call it directly.
        Returns how many leases were extended. Each lease is renewed in its own short transaction, so a
        row locked by its holder's record transaction delays only itself. A database error leaves that
        hold as it is: its lease still has two thirds of its time, and it is tried again next time."""
        now = time.monotonic()
        with self._changed:
            holds = sorted((h for h in self._holds if not h.lost and (not due_only or h.due <= now)),
                           key=lambda h: h.cell_id)
        renewed = 0
        for hold in holds:
            hold.due = time.monotonic() + _interval_s()
            try:
                with transaction() as conn:
                    renewed += hold.renew(conn, utcnow() + timedelta(seconds=get_settings().lease_expiry_s))
            except SQLAlchemyError as exc:
                log.warning("lease renewal of cell %s failed (%s); retrying when it is due again", hold.cell_id,
                            type(exc).__name__)
        return renewed

    def _run(self) -> None:
        while True:
            with self._changed:
                live = [h.due for h in self._holds if not h.lost]
                self._wakes_at = min(live) if live else math.inf
                wait = self._wakes_at - time.monotonic() if live else None
                if wait is None or wait > 0:
                    self._changed.wait(wait)
                    continue
                self._wakes_at = -math.inf  # renewing now: a hold added meanwhile is looked at next round
            try:
                self.renew_all(due_only=True)
            except Exception:  # noqa: BLE001 - the renewal thread must outlive any one failure
                log.exception("lease renewal failed")

    def _ensure_thread(self) -> None:
        # Called with self._changed held. A prefork pool child inherits the object but not the thread.
        if self._thread is not None and self._thread.is_alive() and self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._run, name="afpbench-lease-keeper", daemon=True)
        self._thread.start()

    def _after_fork(self) -> None:
        # A lock held by another thread at fork time would never be released in the child.
        self._changed = threading.Condition()
        self._holds = set()
        self._thread = None
        self._wakes_at = math.inf


_keeper = LeaseKeeper()
os.register_at_fork(after_in_child=_keeper._after_fork)


def keeper() -> LeaseKeeper:
    return _keeper


def hold_execution(cell_id: int, number: int) -> AbstractContextManager[Hold]:
    """Keep an execution claim alive while its try runs; fenced by the attempt number."""
    return _keeper.holding(Hold(cell_id, RENEW_EXECUTION, number))


def hold_scoring(cell_id: int, token: str) -> AbstractContextManager[Hold]:
    """Keep a scoring claim alive while its judges run; fenced by the claim's token."""
    return _keeper.holding(Hold(cell_id, RENEW_SCORING, token))
