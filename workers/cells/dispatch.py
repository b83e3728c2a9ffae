"""Release cells to the queues: pending -> queued, one message per cell carrying only its id.

Release is windowed per model at the rate its pool allows (about ten seconds of work, plus the burst
and the in-flight cap; the models without a declared rate share one window), so queues stay short, a
retry's countdown never nears the visibility timeout, and a big sweep does not flood the broker. The
CLI's wait loop, each finished execution and the reconciler top the window up. The pending -> queued
update is conditional, so two releasers racing never send the same cell twice.
"""

from __future__ import annotations

import math
import threading
import time

import sqlalchemy
from sqlalchemy import func, update
from sqlmodel import Session, col, select

from afpbench.workers.celery_app import EXECUTE, SCORE, publish
from afpbench.workers.cells.batch_release import form_batches, kick_due
from afpbench.workers.cells.budget import allowance, stop_if_spent
from afpbench.workers.providers.families import family_of
from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Phase, Sweep, SweepStatus, utcnow
from afpbench.workers.sweeps.inputs import inputs_for
from afpbench.workers.sweeps.lanes import batch_models, tool_fixture_ids
from afpbench.workers.sweeps.spec import ModelSpec
from afpbench.workers.sweeps.time_limits import scoring_limits, sweep_execution_limits

DEFAULT_WINDOW = 1000  # shared by a sweep's models without a declared request rate
WINDOW_SECONDS = 10.0


def window_for(model: ModelSpec, unpaced_models: int = 1) -> int:
    """How many of the model's cells may be queued or executing at once: about WINDOW_SECONDS of work at
    its declared rate, plus its burst and in-flight cap. The models without a declared rate share
    DEFAULT_WINDOW: a window each let a sweep of 100 such models queue all its 100,000 cells at once, and
    the embedded mode holds every queued message in its own memory (benchmarks/results/HISTORY.md,
    session 14)."""
    limits = model.limits
    if not limits.requests_per_min:
        return math.ceil(DEFAULT_WINDOW / max(1, unpaced_models))
    paced = math.ceil(limits.requests_per_min / 60.0 * WINDOW_SECONDS)
    return max(1, paced + limits.burst + (limits.max_in_flight or 0))


LABEL_MAX = 240
# What Flower shows as a task's arguments: where the cell sits in the matrix (never model text or secrets).
_LABEL_COLUMNS = (col(Cell.id), col(Cell.sweep_id), col(Cell.model_label), col(Cell.condition), col(Cell.fixture_id),
                  col(Cell.repeat))


def task_label(cell_id: int, sweep_id: str, model: str, condition: str, fixture: str, repeat: int) -> str:
    """The message's argsrepr, e.g. "(17,) 3f2a9c/gpt-4o-mini/C/P06#r2" (the real args stay [cell_id])."""
    return f"({cell_id},) {sweep_id}/{model}/{condition}/{fixture}#r{repeat}"[:LABEL_MAX]


def _labels(cell_ids: list[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    with session_scope() as session:
        for start in range(0, len(cell_ids), 500):
            chunk = cell_ids[start:start + 500]
            for row in session.execute(sqlalchemy.select(*_LABEL_COLUMNS).where(col(Cell.id).in_(chunk))).all():
                out[row[0]] = task_label(*row)
    return out


def _send(cells: list[tuple[int, str, str, dict[str, int]]]) -> None:
    queues = {name: family_of(name).queue for name in {cell[1] for cell in cells}}  # per provider once
    publish([(EXECUTE, [cell_id], queues[name], label, limits) for cell_id, name, label, limits in cells])


def release(sweep_id: str) -> int:
    """Queue pending cells up to each model's window; returns how many were sent. One transaction for
    the models with room, the messages sent after its commit: what a release holds in memory is the
    windows' free room (bounded: the unpaced models share one window). One transaction a model cost a
    sweep of 100 models a hundred write transactions at every top-up. Each message carries its model's
    task time limits (derived from its timeout_s and tool rounds, workers/sweeps/time_limits.py)."""
    settings = get_settings()
    with session_scope() as session:
        status = session.exec(select(Sweep.status).where(Sweep.id == sweep_id)).first()
        if status is None or status == SweepStatus.cancelled:
            return 0
        busy: dict[str, int] = dict(
            session.execute(
                select(Cell.model_hash, func.count())
                .where(Cell.sweep_id == sweep_id, col(Cell.phase).in_([Phase.queued, Phase.executing]))
                .group_by(Cell.model_hash)
            ).all()
        )
        inputs = inputs_for(session, sweep_id)
        unpaced = sum(1 for model in inputs.spec.models if not model.limits.requests_per_min)
        rooms = [(model, window_for(model, unpaced) - busy.get(model.model_hash, 0),
                  sweep_execution_limits(inputs, model, settings).options()) for model in inputs.spec.models]
    # A budgeted sweep stays on the sync lane: its budget counts spend and calls in flight per call
    # (workers/cells/budget.py), which a batch waiting up to 24 h would escape.
    batching = batch_models(inputs) if inputs.spec.budget is None else []
    if batching:  # the batch lane's cells go into provider batches, not the window (batch_release.py)
        form_batches(sweep_id, inputs)
        kick_due(sweep_id)
    tools = tool_fixture_ids(sweep_id, inputs) if batching else frozenset()
    chosen: list[tuple[int, str, str, dict[str, int]]] = []
    with session_scope() as session:
        budget = allowance(session, sweep_id, inputs)  # None without a budget (workers/cells/budget.py)
        for model, room, limits in rooms:
            if budget is not None:
                room = min(room, budget.cells.get(model.model_hash, 0))
            if room > 0 and (model not in batching or tools):  # a batch-lane model's tool fixtures stay sync
                chosen += _queue_pending(session, sweep_id, model, room, limits, balanced=budget is not None,
                                         only=tools if model in batching else None)
        if budget is not None and not chosen:
            stop_if_spent(session, sweep_id, budget)
    # Sent after the commit: a worker that receives the id finds the row queued.
    if chosen:
        _send(chosen)
    return len(chosen)


def _queue_pending(session: Session, sweep_id: str, model: ModelSpec, room: int, limits: dict[str, int],
                   balanced: bool = False,
                   only: frozenset[str] | None = None) -> list[tuple[int, str, str, dict[str, int]]]:
    """Up to `room` of the model's pending cells made queued, lowest ids first; their messages' parts.
    `balanced` (a budgeted sweep): repeat by repeat, fixture by fixture, every condition together, so that
    a budget reached leaves whole matched units run and the conditions alike (not condition D unrun).
    `only`: of these fixtures (a batch-lane model's sync cells)."""
    order = [col(Cell.repeat), col(Cell.fixture_id), col(Cell.condition), col(Cell.id)] if balanced else [col(Cell.id)]
    query = select(Cell.id).where(Cell.sweep_id == sweep_id, Cell.model_hash == model.model_hash,
                                  Cell.phase == Phase.pending)
    if only is not None:
        query = query.where(col(Cell.fixture_id).in_(only))
    ids = list(session.exec(query.order_by(*order).limit(room)))
    if not ids:
        return []
    moved = session.execute(
        update(Cell)
        .where(col(Cell.id).in_(ids), col(Cell.phase) == Phase.pending)
        .values(phase=Phase.queued, updated_at=utcnow())
        .returning(*_LABEL_COLUMNS)
    ).all()
    return [(row[0], model.provider, task_label(*row), limits) for row in moved]


_last_top_up: dict[str, float] = {}
_top_up_lock = threading.Lock()


def top_up(sweep_id: str, every_s: float = 1.0) -> int:
    """Release more cells as executions finish, at most once a second per process per sweep (the
    release query groups over the sweep's cells, so it must stay off the per-task hot path)."""
    now = time.monotonic()
    with _top_up_lock:
        if now - _last_top_up.get(sweep_id, 0.0) < every_s:
            return 0
        _last_top_up[sweep_id] = now
    return release(sweep_id)


def resend(cells: list[tuple[int, str, str]], sweep_id: str | None = None) -> int:
    """Send again the messages of cells that may have been lost (duplicates are harmless). With the
    sweep's id they carry its derived time limits (an execute message the longest of its models')."""
    labels = _labels([cell_id for cell_id, _, _ in cells]) if cells else {}
    execute_limits = score_limits = None
    if sweep_id is not None and cells:
        with session_scope() as session:
            inputs = inputs_for(session, sweep_id)
        settings = get_settings()
        execute_limits = max((sweep_execution_limits(inputs, m, settings) for m in inputs.spec.models),
                             key=lambda t: t.hard_s).options()
        score_limits = scoring_limits(inputs.spec, settings).options()
    publish([
        (SCORE, [cell_id], "score", labels.get(cell_id, f"({cell_id},)"), score_limits)
        if phase in (Phase.awaiting_score, Phase.scoring)
        else (EXECUTE, [cell_id], family_of(name).queue, labels.get(cell_id, f"({cell_id},)"),
              execute_limits)
        for cell_id, name, phase in cells
    ])
    return len(cells)
