"""Duplicate executions (issue #15): a duplicate message never executes a cell twice while its first
execution is alive, and an attempt row matches the requests it made.

Replayed hole: a claim held its cell for AFP_LEASE_EXPIRY_S and nothing renewed it. A try that took
longer (a loaded machine, a slow provider, waits between rounds) lost its lease while its call was
still running, and a duplicate message (or the broker's redelivery) claimed the cell and called the
model again: on a busy machine the duplicates test saw 154 attempts for 152 cells. Here the first
call is held at a counting gate longer than the lease, and a duplicate arrives after the lease would
have run out. Real parts only: the product's coordinator, claim, execution and reconciler, a SQLite
file, the simulator behind a real HTTP gate; the two deliveries run on two threads, as in a
threads-pool worker.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import update

from afpbench.workers.sim.server import SimConfig, SimServer
from tests.reliability.lease_rig import LEASE_S, SHORT_TIMING, cell_now, create_one_cell_sweep, one_cell_spec
from tests.reliability.poison import PoisonGate, model_request, never

HOLD_S = LEASE_S * 2 + 1  # the first call outlives its lease by more than one lease


@pytest.fixture
def gate(tmp_path, settings_env):
    settings_env(AFP_DATABASE_URL=f"sqlite:///{tmp_path / 'dups.db'}", AFP_BROKER_URL="memory://localhost/",
                 AFP_REDIS_URL="", **SHORT_TIMING)
    with SimServer(SimConfig()) as sim:
        gate = PoisonGate(sim.base_url, never, delay_s=lambda key: HOLD_S if model_request(key) else 0.0).start()
        try:
            yield gate
        finally:
            gate.stop()


def _first_delivery(cell_id: int) -> tuple[threading.Thread, dict]:
    """The first message's task, on its own thread; returns when its request is at the gate."""
    from afpbench.workers.cells.execution import execute_cell

    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(decision=execute_cell(cell_id, "worker-1")), daemon=True)
    thread.start()
    return thread, out


def test_a_duplicate_during_a_call_longer_than_the_lease_sends_no_second_request(gate):
    """Rule: a duplicate message never executes a cell twice while its first execution is alive (the
    lease is renewed while the call runs); one attempt row, one request, one result."""
    from afpbench.workers.cells.decisions import RetryLater
    from afpbench.workers.cells.execution import execute_cell

    _, cell_id = create_one_cell_sweep(one_cell_spec(gate, judged=False))
    first, out = _first_delivery(cell_id)
    assert gate.wait_for(model_request, 1, 15), "the first delivery never sent its request"
    time.sleep(LEASE_S + 1)  # the claim is older than its lease now; its call is still held at the gate
    duplicate = execute_cell(cell_id, "worker-2")
    first.join(HOLD_S + 15)
    now = cell_now(cell_id)
    assert isinstance(duplicate, RetryLater) and duplicate.reason == "held by another worker", duplicate
    assert gate.count(model_request) == 1, "the duplicate called the model a second time"
    assert [a["outcome"] for a in now.attempt_rows] == ["answer"], now.attempt_rows
    assert now.attempts == 1 and now.phase == "done" and now.results == 1, now


def test_the_reconciler_never_takes_over_a_live_lease(gate):
    """Rule: the reconciler never takes over a live lease: a try running longer than AFP_LEASE_EXPIRY_S
    keeps its cell through a reconciler pass, and a duplicate sent after it still finds the cell held."""
    from afpbench.workers.cells.decisions import RetryLater
    from afpbench.workers.cells.execution import execute_cell
    from afpbench.workers.cells.reconciler import reconcile_sweep
    from afpbench.workers.store.models import utcnow

    sweep_id, cell_id = create_one_cell_sweep(one_cell_spec(gate, judged=False))
    first, _ = _first_delivery(cell_id)
    assert gate.wait_for(model_request, 1, 15)
    time.sleep(LEASE_S + 1)
    resent = reconcile_sweep(sweep_id, older_than=timedelta(seconds=1))
    during, read_at = cell_now(cell_id), utcnow()
    duplicate = execute_cell(cell_id, "worker-2")
    first.join(HOLD_S + 15)
    assert during.phase == "executing" and during.lease_until is not None and during.lease_until > read_at, during
    assert resent == 0, "the reconciler re-sent a cell whose holder is alive"
    assert isinstance(duplicate, RetryLater) and duplicate.reason == "held by another worker", duplicate
    assert gate.count(model_request) == 1
    assert cell_now(cell_id).attempts == 1


def test_a_stale_holder_renews_nothing_sends_nothing_and_its_attempt_says_so(gate):
    """Rule: renewal is fenced by the attempt number, so a holder whose lease ran out and was taken over
    can never renew it, starts no request, and its attempt row says it was never sent (outcome
    `not_sent`, the reason), while the new holder keeps the cell."""
    from afpbench.workers.cells.claim import claim, load_cell
    from afpbench.workers.cells.conversation import converse
    from afpbench.workers.cells.decisions import Finished
    from afpbench.workers.cells.execution import record_not_sent
    from afpbench.workers.store.db import transaction
    from afpbench.workers.store.lease import hold_execution, keeper
    from afpbench.workers.store.models import Cell, utcnow

    _, cell_id = create_one_cell_sweep(one_cell_spec(gate, judged=False))
    row, inputs, _ = load_cell(cell_id)
    with transaction() as conn:
        first = claim(conn, cell_id, "worker-1", LEASE_S)
    with hold_execution(cell_id, first.number) as stale:
        with transaction() as conn:  # worker-1 stalled past its lease, and worker-2 claimed the cell
            conn.execute(update(Cell.__table__).where(Cell.__table__.c.id == cell_id)
                         .values(lease_until=utcnow() - timedelta(seconds=1)))
            second = claim(conn, cell_id, "worker-2", LEASE_S)
        taken_over = cell_now(cell_id)
        keeper().renew_all()
        result, rounds, _, _ = converse(inputs.spec.models[0], inputs, row, stale)
        decision = record_not_sent(row, first, inputs.spec.models[0], rounds)
    now = cell_now(cell_id)
    assert second is not None and second.number == 2
    assert stale.lost, "the stale holder's renewal matched the cell"
    assert now.lease_until == taken_over.lease_until, "the stale holder moved the new holder's lease"
    assert gate.count(model_request) == 0, "a holder that lost its lease sent a request"
    assert [r["sent"] for r in rounds] == [False] and "lease" in (result.error or ""), rounds
    assert isinstance(decision, Finished) and "superseded" in decision.reason, decision
    assert [(a["number"], a["outcome"]) for a in now.attempt_rows] == [(1, "not_sent"), (2, "started")]
    assert "lease" in now.attempt_rows[0]["error"]
    assert (now.phase, now.attempts, now.lease_owner) == ("executing", 2, "worker-2"), now


def test_the_keeper_renews_a_hold_added_while_it_sleeps_for_an_earlier_one(gate):
    """Rule: a live claim's lease is renewed while its try runs. The keeper thread is woken only for a
    hold due before its next wake-up (not once per cell), so a hold added while it sleeps for an earlier
    one must still be renewed, on the round that renews the earlier one or the next."""
    from afpbench.workers.cells.claim import claim
    from afpbench.workers.store.db import transaction
    from afpbench.workers.store.lease import hold_execution

    _, first_id = create_one_cell_sweep(one_cell_spec(gate, judged=False))
    _, second_id = create_one_cell_sweep(one_cell_spec(gate, judged=False))
    with transaction() as conn:
        first = claim(conn, first_id, "worker-1", LEASE_S)
        second = claim(conn, second_id, "worker-1", LEASE_S)
    with hold_execution(first_id, first.number):
        time.sleep(0.3)  # the keeper now sleeps until the first hold is due
        claimed_until = cell_now(second_id).lease_until
        with hold_execution(second_id, second.number):
            deadline = time.monotonic() + 3 * LEASE_S
            while cell_now(second_id).lease_until == claimed_until and time.monotonic() < deadline:
                time.sleep(0.1)
            renewed = cell_now(second_id).lease_until
    assert renewed > claimed_until, "the hold added while the keeper slept was never renewed"
