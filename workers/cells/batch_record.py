"""One batch entry recorded through the sync lane's record (recording.py:record_try): its attempt row
filled in and the cell moved on, under the same fence.

The entry's cell is `batched` under the attempt the batch carries. It is first moved to `executing`
under that attempt's number (a conditional UPDATE: only if it is still batched under it), then recorded
exactly as a sync answer is: scored at once (no judges), sent to scoring, retried later (the retry
policy's verdict: an expired, cancelled or errored entry is sent again on the sync lane within the one
attempt budget), or finished. The entry row is marked with the outcome afterwards; an entry whose cell
moved on meanwhile (a cancel, a takeover) is marked `superseded` and its result not written twice.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from sqlalchemy import Row, update

from afpbench.workers.cells.batch_release import ENTRY
from afpbench.workers.cells.claim import CELL, Claimed, load_cell
from afpbench.workers.cells.conversation import round_record
from afpbench.workers.cells.decisions import ExecutionDecision
from afpbench.workers.cells.recording import record_try
from afpbench.workers.cells.retry import RetryPolicy
from afpbench.workers.providers.batch import BatchLine
from afpbench.workers.providers.types import AdapterResult
from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import transaction
from afpbench.workers.store.models import Phase, utcnow
from afpbench.workers.sweeps.spec import ModelSpec

SUPERSEDED = "superseded"


def record_entry(entry: Row, line: BatchLine, result: AdapterResult, provider_batch_id: str | None,
                 model: ModelSpec, worker: str) -> ExecutionDecision | None:
    """Record one entry's result; the decision for its cell, or None when the cell is no longer the
    batch's (nothing written but the entry's mark)."""
    settings = get_settings()
    now = utcnow()
    with transaction() as conn:
        moved = conn.execute(
            update(CELL)
            .where(CELL.c.id == entry.cell_id, CELL.c.phase == Phase.batched.value, CELL.c.attempts == entry.number)
            .values(phase=Phase.executing.value, lease_owner=worker,
                    lease_until=now + timedelta(seconds=settings.lease_expiry_s), updated_at=now)
        ).rowcount
    loaded = load_cell(entry.cell_id) if moved else None
    if loaded is None:
        _mark(entry, SUPERSEDED)
        return None
    cell, inputs, validity = loaded
    request = {"method": "POST", "url": line.url, "json": line.body, "batch": provider_batch_id,
               "custom_id": line.custom_id}
    result = replace(result, request_sent=request)
    usage = result.usage
    tokens = {"input": usage.input_tokens or 0, "output": usage.output_tokens or 0,
              "cached": usage.cached_tokens or 0, "reasoning": usage.reasoning_tokens or 0, "latency_ms": 0.0}
    decision = record_try(cell, Claimed(entry.attempt_id, entry.number), model, inputs, validity, result,
                          [round_record(result)], [], tokens, RetryPolicy(max_attempts=settings.max_attempts))
    _mark(entry, result.outcome.value)
    return decision


def _mark(entry: Row, outcome: str) -> None:
    with transaction() as conn:
        conn.execute(update(ENTRY).where(ENTRY.c.custom_id == entry.custom_id, ENTRY.c.outcome.is_(None),
                                         ENTRY.c.cell_id == entry.cell_id).values(outcome=outcome[:24]))
