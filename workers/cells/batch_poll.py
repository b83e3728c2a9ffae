"""The batch lane's poller (the `batches` task, woken by a release and run by the beat): it sends a
created batch to the provider, polls a submitted one, and once the provider ends it records every entry.

A batch is held under a short lease (a conditional UPDATE), so two pollers never work on one; SQL alone
says what is left, so a poller killed at any point leaves the batch to the next one:
- created, not yet accepted: submitted at the next poll (a kill after the provider accepted it but
  before the row says so sends it again; the first copy's results are never read, the cells are not
  answered twice);
- submitted: polled until the provider ends it;
- ended at the provider: each entry recorded by batch_record.py (an entry recorded already is skipped).
A provider that refuses the submission (a 4xx) fails the batch: each entry becomes an attempt with that
cause, and the retry policy sends its cell again on the sync lane within the one attempt budget.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Row, select, update

from afpbench.scoring.render import render
from afpbench.workers.cells.batch_record import record_entry
from afpbench.workers.cells.batch_release import BATCH, ENTRY
from afpbench.workers.cells.claim import ATTEMPT, ATTEMPT_NOT_SENT, CELL
from afpbench.workers.cells.decisions import ExecutionDecision
from afpbench.workers.errors import MissingKey
from afpbench.workers.providers.batch import BatchAPI, BatchLine, BatchView, entry_failure
from afpbench.workers.providers.batch_http import BatchFault
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.types import ChatRequest, OutcomeClass, failure_result, key_for_quiet
from afpbench.workers.settings import get_settings
from afpbench.workers.store.batch_models import OPEN_BATCH, BatchStatus
from afpbench.workers.store.db import session_scope, transaction
from afpbench.workers.store.models import Phase, cell_key, utcnow
from afpbench.workers.sweeps.endpoints import endpoint_for
from afpbench.workers.sweeps.inputs import SweepInputs, inputs_for
from afpbench.workers.sweeps.progress import is_cancelled
from afpbench.workers.sweeps.spec import ModelSpec

log = logging.getLogger(__name__)
# Where a decision goes next (tasks.py maps it onto the queues): the cell's id, its provider, the decision.
Route = Callable[[int, str, ExecutionDecision], None]
SIM_CELL = "afpbench_cell"  # a simulated entry's cell key, where a sync call sends X-Afpbench-Cell
CANCELLED_UNSENT = "the sweep was cancelled before its batch was sent"


@dataclass(frozen=True)
class Held:
    row: Row
    inputs: SweepInputs
    model: ModelSpec
    adapter: BatchAPI


def advance_batches(sweep_id: str | None, worker: str, route: Route) -> int:
    """Look at every open batch that is due (of one sweep, or all); how many were looked at."""
    now = utcnow()
    with session_scope() as session:
        query = select(BATCH.c.id).where(BATCH.c.status.in_(OPEN_BATCH), BATCH.c.next_poll_at <= now)
        if sweep_id is not None:
            query = query.where(BATCH.c.sweep_id == sweep_id)
        due = list(session.execute(query.order_by(BATCH.c.id)).scalars())
    looked = 0
    for batch_id in due:
        held = _hold(batch_id)
        if held is None:
            continue
        looked += 1
        try:
            _advance(held, worker, route)
        finally:
            _let_go(batch_id)
    return looked


def _hold(batch_id: int) -> Held | None:
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


def _let_go(batch_id: int) -> None:
    next_poll = utcnow() + timedelta(seconds=get_settings().batch_poll_s)
    with transaction() as conn:
        conn.execute(update(BATCH).where(BATCH.c.id == batch_id).values(lease_until=None, next_poll_at=next_poll))


def _set(batch_id: int, **values) -> None:
    with transaction() as conn:
        conn.execute(update(BATCH).where(BATCH.c.id == batch_id).values(**values))


def _advance(held: Held, worker: str, route: Route) -> None:
    if held.row.status == BatchStatus.created.value:
        if is_cancelled(held.row.sweep_id):
            _unsent(held)  # nothing is sent after a cancel
        else:
            _submit(held, worker, route)
        return
    endpoint = endpoint_for(held.model)
    try:
        view = held.adapter.poll_batch(endpoint, held.row.provider_batch_id)
    except BatchFault as exc:
        _set(held.row.id, error=str(exc))
        return
    _set(held.row.id, provider_status=view.provider_status[:32], expires_at=view.expires_at or held.row.expires_at,
         error=view.error)
    if view.ended:
        _record_all(held, view, worker, route)


def _unsent(held: Held) -> None:
    """A cancelled sweep's batch that was never sent: each attempt ends `not_sent` saying so, and each cell
    goes back to pending, which `afpbench resume` releases again. A batch already at the provider is
    polled and recorded as usual: those are requests in flight, recorded like any other."""
    now = utcnow()
    with transaction() as conn:
        entries = conn.execute(select(ENTRY.c.cell_id, ENTRY.c.attempt_id, ENTRY.c.number)
                               .where(ENTRY.c.batch_id == held.row.id, ENTRY.c.outcome.is_(None))).all()
        for entry in entries:
            moved = conn.execute(update(CELL).where(CELL.c.id == entry.cell_id, CELL.c.phase == Phase.batched.value,
                                                    CELL.c.attempts == entry.number)
                                 .values(phase=Phase.pending.value, lease_owner=None, updated_at=now)).rowcount
            if moved:
                conn.execute(update(ATTEMPT).where(ATTEMPT.c.id == entry.attempt_id).values(
                    outcome=ATTEMPT_NOT_SENT, finished_at=now, error=CANCELLED_UNSENT))
        conn.execute(update(ENTRY).where(ENTRY.c.batch_id == held.row.id, ENTRY.c.outcome.is_(None))
                     .values(outcome=ATTEMPT_NOT_SENT))
        conn.execute(update(BATCH).where(BATCH.c.id == held.row.id).values(
            status=BatchStatus.ended.value, provider_status="not sent", ended_at=now,
            error=CANCELLED_UNSENT))


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


def _submit(held: Held, worker: str, route: Route) -> None:
    try:
        lines = lines_of(held)
        label = f"{held.row.sweep_id}/{held.model.display}/batch {held.row.id}"
        view = held.adapter.submit_batch(endpoint_for(held.model), [line for _, line in lines], label)
    except MissingKey as exc:
        _fail(held, lines_of_quiet(held), failure_result(OutcomeClass.auth_error, f"missing API key: {exc}"),
              worker, route)
        return
    except BatchFault as exc:
        if exc.refused:
            _fail(held, lines_of_quiet(held), entry_failure("failed", f"the provider refused the batch: {exc}"),
                  worker, route)
        else:  # unreachable or 5xx: sent again at the next poll
            _set(held.row.id, error=str(exc))
        return
    _set(held.row.id, status=BatchStatus.submitted.value, provider_batch_id=view.provider_batch_id[:200],
         provider_status=view.provider_status[:32], submitted_at=utcnow(), expires_at=view.expires_at, error=None)
    log.info(json.dumps({"event": "batch_submitted", "batch": held.row.id, "provider_batch": view.provider_batch_id,
                         "entries": len(lines)}))


def lines_of_quiet(held: Held) -> list[tuple[Row, BatchLine]]:
    """The entries with the request each would have carried; an entry whose request cannot be built (no
    key) keeps an empty body."""
    try:
        return lines_of(held)
    except MissingKey:
        with session_scope() as session:
            rows = session.execute(select(ENTRY).where(ENTRY.c.batch_id == held.row.id)).all()
        return [(row, BatchLine(row.custom_id, "", {})) for row in rows]


def _fail(held: Held, lines: list[tuple[Row, BatchLine]], result, worker: str, route: Route) -> None:
    _set(held.row.id, status=BatchStatus.failed.value, provider_status="refused", ended_at=utcnow(),
         error=result.error)
    _record_each(held, lines, {}, result, None, worker, route)


def _record_all(held: Held, view: BatchView, worker: str, route: Route) -> None:
    secrets = [k for k in (key_for_quiet(endpoint_for(held.model)),) if k]
    lines = lines_of(held)
    order = [row.custom_id for row, _ in lines]
    try:
        results = {r.custom_id: r.result
                   for r in held.adapter.batch_results(endpoint_for(held.model), view, secrets, order)}
    except BatchFault as exc:
        _set(held.row.id, error=f"results not read yet: {exc}")
        return
    cause = {"expired": "expired", "cancelled": "cancelled", "canceled": "cancelled"}.get(view.provider_status.lower(),
                                                                                         "missing")
    missing = entry_failure(cause, f"no result for it when batch {view.provider_batch_id} ended "
                                   f"({view.provider_status}{': ' + view.error if view.error else ''})")
    _record_each(held, lines, results, missing, view.provider_batch_id, worker, route)
    with transaction() as conn:
        counts = conn.execute(select(ENTRY.c.outcome).where(ENTRY.c.batch_id == held.row.id)).scalars().all()
        conn.execute(update(BATCH).where(BATCH.c.id == held.row.id).values(
            status=BatchStatus.ended.value, ended_at=utcnow(), recorded=sum(1 for o in counts if o),
            answered=sum(1 for o in counts if o in (OutcomeClass.answer.value, OutcomeClass.tool_call.value))))


def _record_each(held: Held, lines: list[tuple[Row, BatchLine]], results: dict, missing, provider_batch_id: str | None,
                 worker: str, route: Route) -> None:
    for row, line in lines:
        if row.outcome is not None:
            continue  # recorded by an earlier poller
        result = results.get(row.custom_id, missing)
        decision = record_entry(row, line, result, provider_batch_id, held.model, worker)
        if decision is not None:
            route(row.cell_id, held.model.provider, decision)
