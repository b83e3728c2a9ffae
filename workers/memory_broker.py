"""The embedded mode's broker: kombu's in-memory transport, woken by its own events instead of a poll.

kombu's virtual transports look for a message, and finding none sleep `polling_interval` (10 ms here)
before looking again. With one message a worker thread (prefetch 1), a thread that finished its cell
waited a median 6.6 ms for its next message: the poll, not the work (benchmarks/results/HISTORY.md, sessions 18-19).
Here every put and every ack or reject (an ack is what frees a prefetch slot) sets one event, and a
drain that finds nothing waits on that event, at most `polling_interval` (the old worst case, kept so
anything that bypassed the hooks is still seen as soon as before).

The queues, their state and the message format are kombu's own (`memory.Transport.global_state` is
shared with plain `memory://` connections), so only the waiting changes.
"""

from __future__ import annotations

import threading
from queue import Empty
from time import monotonic
from typing import Any

from kombu.transport import memory, virtual

# Set after anything a drain could now deliver: a message put on a queue, a delivery acked or rejected.
# One per process, as the in-memory queues are; a spurious set costs one empty look.
_changed = threading.Event()


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
            _changed.clear()  # before the look: a put after it sets the event again, so no wake is lost
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
