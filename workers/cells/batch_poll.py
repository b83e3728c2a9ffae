"""The batch lane's poller (the `batches` task, woken by a release and run by the beat): it sends a
batch to the provider, polls a submitted one, and once the provider ends it records every entry.

A batch is held under a short lease (batch_held.py), so two pollers never work on one; SQL alone says
what is left, so a poller killed at any point leaves the batch to the next one:
- created or submitting: sent by batch_submit.py, which writes the intent (`submitting`, the label the
  batch carries) before the create request, and, for a batch whose create got no answer, asks the
  provider for the copy an earlier try may have left and adopts it instead of sending a second one: a
  batch is accepted, and paid for, once;
- submitted: polled until the provider ends it;
- ended at the provider: each entry recorded by batch_record.py (an entry recorded already is skipped).
A provider that refuses the submission (a 4xx) fails the batch: each entry becomes an attempt with that
cause, and the retry policy sends its cell again on the sync lane within the one attempt budget.
"""

from __future__ import annotations

from sqlalchemy import Row, select, update

from afpbench.workers.cells.batch_held import Held, Route, hold, let_go, lines_of, lines_of_quiet, set_batch
from afpbench.workers.cells.batch_record import record_entry
from afpbench.workers.cells.batch_release import BATCH, ENTRY
from afpbench.workers.cells.batch_submit import Step, not_ours, submit
from afpbench.workers.cells.claim import ATTEMPT, ATTEMPT_NOT_SENT, CELL
from afpbench.workers.providers.batch import BatchLine, BatchView, entry_failure
from afpbench.workers.providers.batch_http import BatchFault
from afpbench.workers.providers.types import OutcomeClass, key_for_quiet
from afpbench.workers.store.batch_models import OPEN_BATCH, BatchStatus
from afpbench.workers.store.db import session_scope, transaction
from afpbench.workers.store.models import Phase, utcnow
from afpbench.workers.sweeps.endpoints import endpoint_for

CANCELLED_UNSENT = "the sweep was cancelled before its batch was sent"


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
        held = hold(batch_id)
        if held is None:
            continue
        looked += 1
        try:
            _advance(held, worker, route)
        finally:
            let_go(batch_id)
    return looked


def _advance(held: Held, worker: str, route: Route) -> None:
    if held.row.status != BatchStatus.submitted.value:
        submitted = submit(held)
        if submitted.step is Step.unsent:
            _unsent(held)
        elif submitted.step is Step.refused:
            assert submitted.failure is not None
            _fail(held, lines_of_quiet(held), submitted.failure, worker, route)
        return  # sent or adopted: polled from the next look on
    endpoint = endpoint_for(held.model)
    try:
        view = held.adapter.poll_batch(endpoint, held.row.provider_batch_id)
    except BatchFault as exc:
        set_batch(held.row.id, error=str(exc))
        return
    set_batch(held.row.id, provider_status=view.provider_status[:32], expires_at=view.expires_at or held.row.expires_at,
              error=view.error or (held.row.details or {}).get("note"))  # the note: how its copy was found
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


def _fail(held: Held, lines: list[tuple[Row, BatchLine]], result, worker: str, route: Route) -> None:
    set_batch(held.row.id, status=BatchStatus.failed.value, provider_status="refused", ended_at=utcnow(),
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
        set_batch(held.row.id, error=f"results not read yet: {exc}")
        return
    cause = {"expired": "expired", "cancelled": "cancelled", "canceled": "cancelled"}.get(view.provider_status.lower(),
                                                                                         "missing")
    missing = entry_failure(cause, f"no result for it when batch {view.provider_batch_id} ended "
                                   f"({view.provider_status}{': ' + view.error if view.error else ''})")
    foreign = not_ours(held.row.details or {}, set(results), set(order))
    if foreign is not None:  # an Anthropic batch adopted unconfirmed was another's: none of its answers is ours
        set_batch(held.row.id, error=foreign)
        results, missing = {}, entry_failure("missing", foreign)
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
