"""The embedded mode's in-process worker: a real Celery WorkController on a thread pool, consuming
the same queues through kombu's in-memory transport. Tasks take the real path (messages, acks,
retries with countdown), not `task_always_eager`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery.worker import WorkController, loops
from celery.worker import state as worker_state
from celery.worker.consumer import Consumer

from afpbench.workers.celery_app import QUEUES, app
from afpbench.workers.store.db import size_pool

# Celery's blocking loop (the one used for transports without an event loop, such as memory://) looks
# at the stop flags only between `drain_events(timeout=2.0)` calls, so every stop waited up to two
# such cycles (3.7 s measured) after the sweep was done. Drain in short slices instead: the in-memory
# transport polls every 10 ms anyway, so a slice end costs one caught timeout.
STOP_POLL_S = 0.05


class _ShortDrains:
    """The consumer's broker connection, with each drain cut to STOP_POLL_S."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def drain_events(self, timeout: float | None = None, **kwargs: Any) -> Any:
        slice_s = STOP_POLL_S if timeout is None else min(timeout, STOP_POLL_S)
        return self._connection.drain_events(timeout=slice_s, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


def _prompt_loop(obj: Any, connection: Any, *args: Any, **kwargs: Any) -> Any:
    return loops.synloop(obj, _ShortDrains(connection), *args, **kwargs)


class _PromptConsumer(Consumer):
    # Celery keeps a `loop` the class already has (consumer.py: `if not hasattr(self, 'loop')`).
    loop = staticmethod(_prompt_loop)


class _Controller(WorkController):
    # How long leaving the context waits for tasks in flight; a cancelled run lowers it (api/cli_run.py).
    stop_wait_s = 15.0

    def __init__(self, *args, **kwargs):
        self.started = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer):
        self.started.set()


@contextmanager
def embedded_worker(concurrency: int = 8, queues: tuple[str, ...] = QUEUES,
                    hostname: str = "embedded@localhost") -> Iterator[_Controller]:
    logging.getLogger("celery").setLevel(logging.WARNING)
    # A task's retry re-sends itself through a signature bound to the *current* app, which pool threads
    # do not inherit; without a process default they would use Celery's built-in one (amqp://localhost)
    # and every retry with a countdown would be lost.
    app.set_default()
    size_pool(concurrency)  # a pooled database connection for each worker thread
    worker = _Controller(
        app=app,
        concurrency=concurrency,
        pool="threads",
        consumer_cls=_PromptConsumer,
        hostname=hostname,
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
    stopped_by_error = True
    try:
        yield worker
        stopped_by_error = False
    finally:
        # celery-types declares these flags None; celery's worker sets an exit code in one to stop.
        # After a normal end a warm stop: the pool lets running tasks finish (and ack) before the
        # channel closes. After an error or Ctrl-C a cold one, as before: nothing waits for a model call.
        if stopped_by_error:
            worker_state.should_terminate = 0  # type: ignore[assignment]
        else:
            worker_state.should_stop = 0  # type: ignore[assignment]
        thread.join(worker.stop_wait_s)
        worker_state.should_terminate = None
        worker_state.should_stop = None
