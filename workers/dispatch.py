"""Release cells to the queues: pending -> queued, one message per cell carrying only its id.

Release is windowed per model so queues stay short (a countdown never nears the visibility timeout)
and a big sweep does not flood the broker; the CLI's wait loop and the reconciler top the window up.
"""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import select

from workers.coordinator import mark_queued, queue_for
from workers.db import session_scope
from workers.models import Cell, Phase, Sweep, SweepStatus
from workers.spec import PROVIDER_FAMILIES

DEFAULT_WINDOW = 1000


def _send(cells: list[tuple[int, str]]) -> None:
    from workers.tasks import execute

    for cell_id, provider in cells:
        execute.apply_async(args=[cell_id], queue=queue_for(PROVIDER_FAMILIES[provider]))


def release(sweep_id: str, window: int = DEFAULT_WINDOW) -> int:
    """Queue pending cells so that at most `window` cells per model are in flight; returns how many."""
    with session_scope() as session:
        sweep = session.get(Sweep, sweep_id)
        if sweep is None or sweep.status == SweepStatus.cancelled:
            return 0
        busy = dict(
            session.execute(
                select(Cell.model_hash, func.count())
                .where(Cell.sweep_id == sweep_id, Cell.phase.in_([Phase.queued, Phase.executing]))
                .group_by(Cell.model_hash)
            ).all()
        )
        pending = session.execute(
            select(Cell.id, Cell.provider, Cell.model_hash)
            .where(Cell.sweep_id == sweep_id, Cell.phase == Phase.pending)
            .order_by(Cell.id)
        ).all()
        chosen: list[tuple[int, str]] = []
        room = {h: window - n for h, n in busy.items()}
        for cell_id, provider, model_hash in pending:
            left = room.get(model_hash, window)
            if left <= 0:
                continue
            room[model_hash] = left - 1
            chosen.append((cell_id, provider))
        mark_queued(session, [c for c, _ in chosen])
    # Sent after the commit: a worker that receives the id finds the row queued.
    _send(chosen)
    return len(chosen)


def resend(cells: list[tuple[int, str, str]]) -> int:
    """Send again the messages of cells that may have been lost (duplicates are harmless)."""
    from workers.tasks import execute, score

    for cell_id, provider, phase in cells:
        if phase in (Phase.awaiting_score, Phase.scoring):
            score.apply_async(args=[cell_id], queue="score")
        else:
            execute.apply_async(args=[cell_id], queue=queue_for(PROVIDER_FAMILIES[provider]))
    return len(cells)
