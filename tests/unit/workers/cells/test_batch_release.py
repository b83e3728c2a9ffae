"""The batch lane's release (workers/cells/batch_release.py) and a cancel before sending
(workers/cells/batch_poll.py), on real releases over SQLite and the in-memory broker.

Rules: a batch-lane model's cells go into batch rows, never into execute messages; each carries one
counted attempt (`started`, worker batch:<id>) under the claim's budget; a batch holds at most
AFP_BATCH_MAX_ENTRIES cells; nothing is sent after a cancel (the batch's attempts end `not_sent` and
their cells go back to pending for `resume`)."""

from __future__ import annotations

import pytest
from sqlalchemy import update
from sqlmodel import col, select

from afpbench.workers.celery_app import BATCHES
from afpbench.workers.cells.batch_poll import CANCELLED_UNSENT, advance_batches
from afpbench.workers.cells.dispatch import release
from afpbench.workers.store.batch_models import Batch, BatchEntry
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Attempt, Cell, Phase, Sweep, SweepStatus
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.broker import drain
from tests.unit.sweep_builder import CellMaker, make_sweep


@pytest.fixture
def sweep(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_BROKER_URL="memory://", AFP_BATCH_MAX_ENTRIES="4")
    drain()
    spec = parse_spec({"name": "lanes", "judges": [],
                       "models": [{"provider": "sim", "model": "sim-1", "lane": "batch"}]})
    with session_scope() as s:
        row = make_sweep(s, "bat1", spec=spec, status="running", inputs=load_inputs(spec).to_json())
        cells = CellMaker(s, row)
        for n in range(10):
            cells.add("A", f"P{n:02d}", None)
        s.execute(update(Cell).values(phase=Phase.pending))
    yield spec
    drain()


def test_batch_lane_cells_go_into_batches_of_at_most_the_cap_with_one_counted_attempt_each(sweep):
    release("bat1")
    messages = drain()
    assert {m.headers["task"] for m in messages} == {BATCHES}, "no execute message for a batch-lane cell"
    with session_scope() as s:
        batches = s.exec(select(Batch).order_by(col(Batch.id))).all()
        cells = s.exec(select(Cell)).all()
        attempts = s.exec(select(Attempt)).all()
        entries = s.exec(select(BatchEntry)).all()
    assert [b.entries for b in batches] == [4, 4, 2] and all(b.status == "created" for b in batches)
    assert all(c.phase == Phase.batched and c.attempts == 1 for c in cells)
    assert sorted(a.worker for a in attempts) == sorted([f"batch:{b.id}" for b in batches for _ in range(b.entries)])
    assert all(a.outcome == "started" for a in attempts) and len(entries) == 10
    release("bat1")
    with session_scope() as s:
        assert len(s.exec(select(Batch)).all()) == 3, "a second release finds no pending cell to batch"


def test_a_cancel_before_sending_sends_nothing_and_returns_the_cells_to_pending(sweep):
    release("bat1")
    drain()
    with session_scope() as s:
        s.execute(update(Sweep).values(status=SweepStatus.cancelled))
    routed = []
    assert advance_batches("bat1", "test", lambda *a: routed.append(a)) == 3
    with session_scope() as s:
        batches = s.exec(select(Batch)).all()
        cells = s.exec(select(Cell)).all()
        attempts = s.exec(select(Attempt)).all()
    assert routed == [] and all(b.status == "ended" and b.provider_status == "not sent" for b in batches)
    assert all(b.provider_batch_id is None for b in batches)
    assert all(c.phase == Phase.pending for c in cells)
    assert all(a.outcome == "not_sent" and a.error == CANCELLED_UNSENT for a in attempts)


def test_a_batch_quota_caps_the_tokens_queued_in_open_batches(sqlite_url, settings_env):
    """limits.batch_queue_tokens: the pool's open batches never hold more estimated input tokens than the
    quota (the first cell goes alone if it is bigger); a batch that ends gives its room back."""
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_BROKER_URL="memory://")
    drain()
    spec = parse_spec({"name": "quota", "judges": [], "models": [
        {"provider": "sim", "model": "sim-1", "lane": "batch", "limits": {"batch_queue_tokens": 1}}]})
    inputs = load_inputs(spec)
    with session_scope() as s:
        row = make_sweep(s, "q1", spec=spec, status="running", inputs=inputs.to_json(),
                         fixture_files=dict(zip(list(inputs.fixtures), list(inputs.fixture_files), strict=True)))
        cells = CellMaker(s, row)
        for fixture in ("P01", "P02", "P03"):
            cells.add("A", fixture, None)
        s.execute(update(Cell).values(phase=Phase.pending))
    release("q1")
    with session_scope() as s:
        batches = s.exec(select(Batch)).all()
    assert len(batches) == 1 and batches[0].entries == 1 and batches[0].tokens > 1, "alone, and nothing beside it"
    with session_scope() as s:
        s.execute(update(Batch).values(status="ended"))
    release("q1")
    with session_scope() as s:
        assert [b.entries for b in s.exec(select(Batch).order_by(col(Batch.id))).all()] == [1, 1]
    drain()
