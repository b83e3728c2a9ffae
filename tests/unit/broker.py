"""The in-memory broker's queues as a test reads them (the embedded mode's broker, a real kombu channel)."""

from __future__ import annotations

from collections.abc import Iterable

from afpbench.workers.celery_app import QUEUES, app


def drain(queues: Iterable[str] = QUEUES) -> list:
    """Every message waiting in `queues` (all of the app's by default), taken off them, oldest first."""
    out = []
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in queues:
            while (message := channel.basic_get(queue, no_ack=True)) is not None:
                out.append(message)
    return out
