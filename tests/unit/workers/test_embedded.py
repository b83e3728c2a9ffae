"""The embedded worker stops when its `with` block ends (its consumer drains in short slices, so the stop
flag is seen between them, not after Celery's 2-second drain), and a task still running at a normal end
finishes and is acknowledged before the channel closes. A real WorkController on the in-memory broker."""

from __future__ import annotations

import threading
import time

from afpbench.workers.celery_app import app
from afpbench.workers.embedded import STOP_POLL_S, _ShortDrains, embedded_worker

started = threading.Event()
finished = threading.Event()


@app.task(name="afpbench.test.slow_noop")
def slow_noop(seconds: float) -> None:
    started.set()
    time.sleep(seconds)
    finished.set()


def _unacked(worker) -> int:
    return len(worker.consumer.connection.default_channel.qos._delivered)


class _Drains:
    """A broker connection that records the timeout of each drain."""

    def __init__(self) -> None:
        self.timeouts: list[float | None] = []
        self.hostname = "memory"

    def drain_events(self, timeout: float | None = None, **_kwargs) -> None:
        self.timeouts.append(timeout)


def test_each_drain_is_cut_to_a_short_slice():
    drains = _Drains()
    short = _ShortDrains(drains)
    short.drain_events(timeout=2.0)  # what Celery's blocking loop asks for
    short.drain_events()
    short.drain_events(timeout=STOP_POLL_S / 5)
    assert drains.timeouts == [STOP_POLL_S, STOP_POLL_S, STOP_POLL_S / 5]
    assert short.hostname == "memory"  # everything else is the connection's own


def _worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "afpbench-embedded-worker" and t.is_alive()]


def test_leaving_the_block_stops_the_worker_thread():
    with embedded_worker(concurrency=2) as worker:
        assert worker.consumer.loop.__name__ == "_prompt_loop"  # the consumer drains in short slices
        assert _worker_threads()
    assert not _worker_threads(), "the embedded worker's thread still runs after the block ended"


def test_running_task_finishes_and_acks_before_a_normal_stop():
    started.clear()
    finished.clear()
    with embedded_worker(concurrency=2) as worker:
        slow_noop.apply_async(args=(0.4,), queue="control")
        assert started.wait(10), "the embedded worker never ran the task"
        channel = worker.consumer.connection.default_channel
        assert _unacked(worker) == 1  # acks_late: the message is held while the task runs
    assert finished.is_set(), "the stop returned while the task was still running"
    assert len(channel.qos._delivered) == 0, "the running task's message was not acknowledged"
