"""Thin Celery tasks with explicit names: each loads ids, calls a plain service, routes the decision.

Every task is idempotent: a redelivered message finds the cell's phase in SQL and does only what is
left. Waiting (limits, backoff) is a retry with a countdown, never a sleep holding the worker slot.
"""

from __future__ import annotations

import logging
import os
import socket

from sqlalchemy.exc import InterfaceError, OperationalError

from afpbench.workers.celery_app import AGGREGATE, BATCHES, EXECUTE, RECONCILE, SCORE, app, send
from afpbench.workers.cells.batch_poll import advance_batches
from afpbench.workers.cells.completion import sweep_of_cell
from afpbench.workers.cells.decisions import ExecutionDecision, RetryLater, ScoreNext
from afpbench.workers.cells.execution import execute_cell
from afpbench.workers.cells.finish import finish_if_done
from afpbench.workers.cells.reconciler import reconcile_sweeps
from afpbench.workers.grading.scorer import RejudgeLater, score_cell
from afpbench.workers.providers.families import family_of
from afpbench.workers.results.aggregation import store_summary
from afpbench.workers.settings import get_settings

log = logging.getLogger(__name__)
WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"


def _worker_name(task) -> str:
    return f"{task.request.hostname or WORKER_ID}"


def _unavailable_errors() -> tuple[type[Exception], ...]:
    """The errors of a database (or of the limiter's or broker's Redis) that went away: restart, failover,
    network. The open transaction was rolled back whole, so the task is retried later with backoff and
    finds in SQL what is left to do. The Redis errors count whenever this process may use Redis; the plain
    embedded mode has none to catch and never imports the Redis client (~130 ms)."""
    if not get_settings().may_use_redis:
        return (OperationalError, InterfaceError)
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return (OperationalError, InterfaceError, RedisConnectionError, RedisTimeoutError)


# Resolved once, from the same settings the Celery app was configured with (workers/celery_app.py).
DATABASE_UNAVAILABLE = _unavailable_errors()


def _countdown(delay_s: float) -> float:
    """A countdown message waits unacked in the worker; one that outlives the broker's visibility
    timeout is delivered a second time. Cap it at half the timeout: a task that wakes early finds its
    not_before or lease in SQL and waits again."""
    return max(0.05, min(delay_s, get_settings().visibility_timeout_s / 2))


def _retry_database(task, exc: Exception):
    delay = min(30.0, 2.0 ** min(task.request.retries, 5))
    log.warning("database or limiter unavailable (%s); retrying %s in %.0f s", type(exc).__name__, task.name,
                delay)
    return task.retry(exc=exc, countdown=_countdown(delay), max_retries=None)


@app.task(name=EXECUTE, bind=True, max_retries=None, acks_late=True)
def execute(self, cell_id: int, prepaid: bool = False) -> str:
    try:
        decision = execute_cell(cell_id, _worker_name(self), prepaid=prepaid)
        if isinstance(decision, RetryLater):
            raise self.retry(
                countdown=_countdown(decision.delay_s),
                kwargs={"cell_id": cell_id, "prepaid": decision.prepaid},
                args=(),
                max_retries=None,
            )
        if isinstance(decision, ScoreNext):
            # The execute message's label (sweep/model/condition/fixture) carries on to its score message.
            send(SCORE, [cell_id], "score", getattr(self.request, "argsrepr", None),
                 decision.limits.options() if decision.limits else None)
            return "executed"
        if decision.sweep_open is not True:
            _finish(cell_id, self, decision.sweep_id)
    except DATABASE_UNAVAILABLE as exc:
        raise _retry_database(self, exc) from exc
    return f"finished: {decision.state}"


@app.task(name=SCORE, bind=True, max_retries=None, acks_late=True)
def score(self, cell_id: int) -> str:
    try:
        outcome = score_cell(cell_id, _worker_name(self))
        if isinstance(outcome, RejudgeLater):
            raise self.retry(countdown=_countdown(outcome.delay_s), max_retries=None)
        _finish(cell_id, self)
    except DATABASE_UNAVAILABLE as exc:
        raise _retry_database(self, exc) from exc
    return "scored"


def _finish(cell_id: int, task, sweep_id: str | None = None) -> None:
    """After a cell reached its result: finish the sweep if this was its last open cell."""
    if sweep_id is None:
        sweep_id = sweep_of_cell(cell_id)
    finish_if_done(sweep_id, _worker_name(task))


@app.task(name=AGGREGATE, bind=True, max_retries=5, acks_late=True)
def aggregate(self, sweep_id: str) -> str:
    try:
        store_summary(sweep_id)
    except DATABASE_UNAVAILABLE as exc:
        raise _retry_database(self, exc) from exc
    return "aggregated"


@app.task(name=RECONCILE, bind=True, acks_late=True)
def reconcile(self, sweep_id: str | None = None) -> int:
    return reconcile_sweeps(sweep_id)


@app.task(name=BATCHES, bind=True, acks_late=True)
def batches(self, sweep_id: str | None = None) -> int:
    """Submit, poll and record the batch lane's due batches (workers/cells/batch_poll.py)."""
    worker = _worker_name(self)

    def route(cell_id: int, provider: str, decision: ExecutionDecision) -> None:
        # A batch entry's decision goes where an execute task's would: scoring, a sync retry, or the finish.
        if isinstance(decision, RetryLater):
            send(EXECUTE, [cell_id], family_of(provider).queue, countdown=_countdown(decision.delay_s))
        elif isinstance(decision, ScoreNext):
            send(SCORE, [cell_id], "score", None, decision.limits.options() if decision.limits else None)
        elif decision.sweep_open is not True:
            _finish(cell_id, self, decision.sweep_id)

    try:
        return advance_batches(sweep_id, worker, route)
    except DATABASE_UNAVAILABLE as exc:
        raise _retry_database(self, exc) from exc
