"""A batch held by one poller (batch_poll.py, batch_submit.py): the row under a short lease (a conditional
UPDATE, so two pollers never work on one batch), the sweep's inputs, the model and its adapter, and each
entry's request as its sync call would be built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Row, select, update

from afpbench.scoring.render import render
from afpbench.workers.cells.batch_release import BATCH, ENTRY
from afpbench.workers.cells.claim import CELL
from afpbench.workers.cells.decisions import ExecutionDecision
from afpbench.workers.errors import MissingKey
from afpbench.workers.providers.batch import BatchAPI, BatchLine
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.types import ChatRequest
from afpbench.workers.settings import get_settings
from afpbench.workers.store.batch_models import OPEN_BATCH
from afpbench.workers.store.db import session_scope, transaction
from afpbench.workers.store.models import cell_key, utcnow
from afpbench.workers.sweeps.endpoints import endpoint_for
from afpbench.workers.sweeps.inputs import SweepInputs, inputs_for
from afpbench.workers.sweeps.spec import ModelSpec

# Where a decision goes next (tasks.py maps it onto the queues): the cell's id, its provider, the decision.
Route = Callable[[int, str, ExecutionDecision], None]
SIM_CELL = "afpbench_cell"  # a simulated entry's cell key, where a sync call sends X-Afpbench-Cell


@dataclass(frozen=True)
class Held:
    row: Row
    inputs: SweepInputs
    model: ModelSpec
    adapter: BatchAPI


def hold(batch_id: int) -> Held | None:
    """The open batch under this poller's lease, or None when another poller holds it."""
    now = utcnow()
    with transaction() as conn:
        row = conn.execute(
            update(BATCH)
            .where(BATCH.c.id == batch_id, BATCH.c.status.in_(OPEN_BATCH),
                   BATCH.c.lease_until.is_(None) | (BATCH.c.lease_until < now))
            .values(lease_until=now + timedelta(seconds=get_settings().batch_hold_s))
            .returning(*BATCH.c)
        ).first()
        if row is None:
            return None
        inputs = inputs_for(conn, row.sweep_id)
    model = inputs.models_by_hash[row.model_hash]
    adapter = adapter_for(model.provider)
    assert isinstance(adapter, BatchAPI), f"provider {model.provider!r} has no batch API"
    return Held(row, inputs, model, adapter)


def let_go(batch_id: int) -> None:
    next_poll = utcnow() + timedelta(seconds=get_settings().batch_poll_s)
    with transaction() as conn:
        conn.execute(update(BATCH).where(BATCH.c.id == batch_id).values(lease_until=None, next_poll_at=next_poll))


def set_batch(batch_id: int, **values) -> None:
    with transaction() as conn:
        conn.execute(update(BATCH).where(BATCH.c.id == batch_id).values(**values))


def lines_of(held: Held) -> list[tuple[Row, BatchLine]]:
    """Each entry with its request: the cell's prompt rendered and built as its sync call would be."""
    with session_scope() as session:
        rows = session.execute(
            select(ENTRY.c.custom_id, ENTRY.c.cell_id, ENTRY.c.attempt_id, ENTRY.c.number, ENTRY.c.outcome,
                   CELL.c.sweep_id, CELL.c.model_hash, CELL.c.condition, CELL.c.fixture_id, CELL.c.fixture_version,
                   CELL.c.repeat)
            .join(CELL, CELL.c.id == ENTRY.c.cell_id).where(ENTRY.c.batch_id == held.row.id).order_by(ENTRY.c.cell_id)
        ).all()
    endpoint = endpoint_for(held.model)
    out = []
    for row in rows:
        fixture = held.inputs.fixtures[row.fixture_id]
        prompt = render(row.condition, fixture, held.inputs.instructions.text(row.condition))
        line = held.adapter.batch_line(endpoint, row.custom_id, ChatRequest(prompt.messages(), prompt.tools))
        if held.model.simulated:  # the simulator draws its answer from the cell key, as on the sync lane
            line.body["metadata"] = {SIM_CELL: cell_key(row)}
        out.append((row, line))
    return out


def lines_of_quiet(held: Held) -> list[tuple[Row, BatchLine]]:
    """The entries with the request each would have carried; an entry whose request cannot be built (no
    key) keeps an empty body."""
    try:
        return lines_of(held)
    except MissingKey:
        with session_scope() as session:
            rows = session.execute(select(ENTRY).where(ENTRY.c.batch_id == held.row.id)).all()
        return [(row, BatchLine(row.custom_id, "", {})) for row in rows]
