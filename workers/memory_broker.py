"""The embedded mode's broker: kombu's in-memory transport, woken by its own events instead of a poll.

kombu's virtual transports look for a message, and finding none sleep `polling_interval` (10 ms here)
before looking again. With one message a worker thread (prefetch 1), a thread that finished its cell
waited a median 6.6 ms for its next message: the poll, not the work (docs/PERFORMANCE.md, sessions 18-19).
Here every ack or reject (what frees a prefetch slot) and every put the drain could take at once sets
one event, and a drain that finds nothing waits on that event, at most `polling_interval` (the old worst
case, kept so anything that bypassed the hooks is still seen as soon as before). A put to a queue whose
consumers have every prefetch slot taken (a task sending its follow-up just before its ack) does not wake
it: the ack that frees a slot does.

The queues, their state and the message format are kombu's own (`memory.Transport.global_state` is
shared with plain `memory://` connections), so only the waiting changes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from queue import Empty
from time import monotonic
from typing import Any

from kombu.transport import memory, virtual

# Set after anything a drain could now deliver: a delivery acked or rejected (a prefetch slot freed),
# or a message put on a queue it may take from. One per process, as the in-memory queues are.
_changed = threading.Event()
# The queues a put to which the drain could not take yet: every channel consuming them has all its
# prefetch slots taken (a worker busy with its full share). Written by the drain before each look; with
# two drains in one process the last one's view wins, and a put it skips is seen within
# `polling_interval`, as with kombu's own transport.
_full_queues: frozenset[str] = frozenset()


def queues_without_free_slot(channels: Iterable[Any]) -> frozenset[str]:
    """The queues consumed only by channels whose prefetch slots are all taken. A channel without a
    prefetch limit (Celery's remote-control consumer) always has a free slot, for its own queue only."""
    free: set[str] = set()
    full: set[str] = set()
    for channel in channels:
        if channel._consumers:
            (free if channel.qos.can_consume() else full).update(channel._active_queues)
    return frozenset(full - free)


class _QoS(virtual.QoS):
    def ack(self, delivery_tag: Any) -> None:
        super().ack(delivery_tag)
        _changed.set()

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        super().reject(delivery_tag, requeue)
        _changed.set()


class _Channel(memory.Channel):
    QoS = _QoS

    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:
        super()._put(queue, message, **kwargs)
        if queue not in _full_queues:
            _changed.set()


class Transport(memory.Transport):
    """`memory://` with event-driven drains (Celery's `broker_transport` in embedded mode)."""

    Channel = _Channel

    def drain_events(self, connection: Any, timeout: float | None = None, **kwargs: Any) -> None:
        """Deliver one message, or raise `TimeoutError` (socket.timeout) once `timeout` seconds pass without one."""
        deadline = None if timeout is None else monotonic() + timeout
        cycle = self.cycle
        assert cycle is not None  # virtual.Transport builds it in __init__
        while True:
            # Both before the look: a put or an ack after them sets the event again, so no wake is lost.
            _changed.clear()
            global _full_queues
            _full_queues = queues_without_free_slot(self.channels or ())
            try:
                cycle.get(self._deliver, timeout=0)
                return
            except Empty:
                pass
            wait = self.polling_interval or 0.01
            if deadline is not None:
                wait = min(wait, deadline - monotonic())
            # Not woken by the deadline: time out without another look (the caller drains again at once).
            if not _changed.wait(max(wait, 0)) and deadline is not None and monotonic() >= deadline:
                raise TimeoutError()  # socket.timeout, which Celery's loop catches
