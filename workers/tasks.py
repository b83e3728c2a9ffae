"""Thin Celery tasks with explicit names: each loads ids, calls a plain service, routes the decision.

Every task is idempotent: a redelivered message finds the cell's phase in SQL and does only what is
left. Waiting (limits, backoff) is a retry with a countdown, never a sleep holding the worker slot.
"""

from __future__ import annotations

import logging
import socket

from workers.celery_app import app
from workers.completion import claim_aggregate
from workers.execution import RetryLater, ScoreNext, execute_cell

log = logging.getLogger(__name__)
WORKER_ID = f"{socket.gethostname()}:{__import__('os').getpid()}"


def _worker_name(task) -> str:
    return f"{task.request.hostname or WORKER_ID}"


@app.task(name="afpbench.execute", bind=True, max_retries=None, acks_late=True)
def execute(self, cell_id: int) -> str:
    decision = execute_cell(cell_id, _worker_name(self))
    if isinstance(decision, RetryLater):
        raise self.retry(countdown=max(0.05, decision.delay_s), max_retries=None)
    if isinstance(decision, ScoreNext):
        score.apply_async(args=[cell_id], queue="score")
        return "executed"
    after_terminal(cell_id, self)
    return f"finished: {decision.state}"


@app.task(name="afpbench.score", bind=True, max_retries=None, acks_late=True)
def score(self, cell_id: int) -> str:
    from workers.scoring_service import RejudgeLater, score_cell

    outcome = score_cell(cell_id, _worker_name(self))
    if isinstance(outcome, RejudgeLater):
        raise self.retry(countdown=max(0.05, outcome.delay_s), max_retries=None)
    after_terminal(cell_id, self)
    return "scored"


def after_terminal(cell_id: int, task) -> None:
    from workers.db import session_scope
    from workers.models import Cell

    with session_scope() as session:
        sweep_id = session.get(Cell, cell_id).sweep_id
    if claim_aggregate(sweep_id, _worker_name(task)):
        aggregate.apply_async(args=[sweep_id], queue="aggregate")


@app.task(name="afpbench.aggregate", bind=True, max_retries=5, acks_late=True)
def aggregate(self, sweep_id: str) -> str:
    from workers.aggregation import aggregate_sweep

    aggregate_sweep(sweep_id)
    return "aggregated"


@app.task(name="afpbench.reconcile", bind=True, acks_late=True)
def reconcile(self, sweep_id: str | None = None) -> int:
    from workers.reconciler import reconcile_sweeps

    return reconcile_sweeps(sweep_id)
