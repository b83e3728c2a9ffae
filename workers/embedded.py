"""The embedded mode's in-process worker: a real Celery WorkController on a thread pool, consuming
the same queues through kombu's in-memory transport. Tasks take the real path (messages, acks,
retries with countdown), not `task_always_eager`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from celery.worker import WorkController
from celery.worker import state as worker_state

from afpbench.workers.celery_app import QUEUES, app


class _Controller(WorkController):
    # How long leaving the context waits for tasks in flight; a cancelled run lowers it (api/cli.py).
    stop_wait_s = 15.0

    def __init__(self, *args, **kwargs):
        self.started = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer):
        self.started.set()


@contextmanager
def embedded_worker(concurrency: int = 8, queues: tuple[str, ...] = QUEUES) -> Iterator[_Controller]:
    logging.getLogger("celery").setLevel(logging.WARNING)
    # A task's retry re-sends itself through a signature bound to the *current* app, which pool threads
    # do not inherit; without a process default they would use Celery's built-in one (amqp://localhost)
    # and every retry with a countdown would be lost.
    app.set_default()
    worker = _Controller(
        app=app,
        concurrency=concurrency,
        pool="threads",
        hostname="embedded@localhost",
        queues=list(queues),
        loglevel="WARNING",
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        ready_callback=None,
    )
    thread = threading.Thread(target=worker.start, name="afpbench-embedded-worker", daemon=True)
    thread.start()
    if not worker.started.wait(30):
        raise RuntimeError("the embedded worker did not start within 30 s")
    try:
        yield worker
    finally:
        # celery-types declares this flag None; celery's worker sets an exit code in it to stop.
        worker_state.should_terminate = 0  # type: ignore[assignment]
        thread.join(worker.stop_wait_s)
        worker_state.should_terminate = None
