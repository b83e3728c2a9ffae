"""The embedded worker stops as soon as its `with` block ends, and a task still running at a normal end
finishes and is acknowledged before the channel closes. A real WorkController on the in-memory broker."""

from __future__ import annotations

import threading
import time

from afpbench.workers.celery_app import app
from afpbench.workers.embedded import embedded_worker

# Celery's own blocking loop notices a stop only between 2-second drains, so a stop took 2-4 s. The bound
# is well under one such cycle and far above what a prompt stop needs (about 0.05-0.1 s).
PROMPT_STOP_S = 1.5

started = threading.Event()
finished = threading.Event()


@app.task(name="afpbench.test.slow_noop")
def slow_noop(seconds: float) -> None:
    started.set()
    time.sleep(seconds)
    finished.set()


def _unacked(worker) -> int:
    return len(worker.consumer.connection.default_channel.qos._delivered)


def test_stop_is_prompt():
    with embedded_worker(concurrency=2):
        time.sleep(0.2)  # let the consumer enter its drain loop
        leaving = time.monotonic()
    assert time.monotonic() - leaving < PROMPT_STOP_S


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
