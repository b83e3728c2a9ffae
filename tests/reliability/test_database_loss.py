"""Database loss: a private PostgreSQL is stopped in immediate mode (every connection dropped
mid-transaction, as in a crash) and started again a few seconds later, in the middle of a sweep.

Tasks that hit the outage retry with backoff (workers/tasks.py); a transaction cut off is rolled back
whole, so there are no partial rows: every result belongs to a done cell in the same state, no attempt
is left half-written, and the sweep completes with one result per cell.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import need
from tests.integration.workers_helper import service_env
from tests.reliability.conftest import new_database
from tests.reliability.ledger import (
    FAST_TIMING,
    aggregate_finished,
    create_sweep,
    done_count,
    exactly_once_problems,
    read_ledger,
    sweep_spec,
    wait_until,
)
from tests.reliability.services import PrivatePostgres, ServiceUnavailable

pytestmark = pytest.mark.integration


@pytest.fixture
def restartable_pg():
    try:
        server = PrivatePostgres().start()
    except ServiceUnavailable as exc:
        need("private PostgreSQL", str(exc))
    yield server
    server.__exit__()


def _inconsistent_rows(database_url: str, sweep_id: str) -> dict[str, int]:
    checks = {
        "result of a cell not done or in another state": (
            "select count(*) from result r join cell c on c.id = r.cell_id "
            "where r.sweep_id = :s and (c.phase <> 'done' or c.state <> r.state)"),
        "done cell without a state": (
            "select count(*) from cell where sweep_id = :s and phase = 'done' and state is null"),
        "finished attempt without an end time": (
            "select count(*) from attempt a join cell c on c.id = a.cell_id "
            "where c.sweep_id = :s and a.outcome <> 'started' and a.finished_at is null"),
        "scored cell whose attempt has no answer": (
            "select count(*) from result r join attempt a on a.id = cast(r.details->>'attempt_id' as integer) "
            "where r.sweep_id = :s and r.scoring_run > 0 and a.output_text is null"),
    }
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return {k: int(conn.execute(text(q), {"s": sweep_id}).scalar()) for k, q in checks.items()}
    finally:
        engine.dispose()


def test_database_restart_mid_sweep_retries_and_leaves_no_partial_rows(restartable_pg, private_redis, sim,
                                                                       fleet_factory, tmp_path):
    database_url = new_database(restartable_pg)
    env = service_env(database_url, private_redis.url, AFP_SIM_URL=sim.base_url, **FAST_TIMING)
    fleet = fleet_factory(env)
    fleet.start(queues="control", beat=True, name="beat")
    workers = [fleet.start(), fleet.start()]
    sweep_id = create_sweep(sweep_spec(sim.base_url, None, 6), env, tmp_path)
    cells = read_ledger(database_url, sweep_id).cells
    engine = create_engine(database_url, pool_pre_ping=True)
    try:
        assert wait_until(lambda: (done_count(engine, sweep_id) or 0) >= cells // 4, 120), fleet.logs()[-4000:]
        engine.dispose()
        restartable_pg.restart(down_s=3.0)
        restarted_at = done_count(engine, sweep_id)
        finished = wait_until(lambda: aggregate_finished(engine, sweep_id), 240, poll_s=1.0)
    finally:
        engine.dispose()
    time.sleep(0.5)
    ledger = read_ledger(database_url, sweep_id)
    logs = fleet.logs()
    print(f"\ndatabase loss: restarted at {restarted_at}/{cells} done; {ledger}")
    assert finished, (ledger, logs[-6000:])
    assert restartable_pg.restarts == 1
    assert fleet.count_in_logs("database or limiter unavailable") >= 1, "some task met the outage and retried"
    assert all(w.alive for w in workers)
    assert exactly_once_problems(ledger) == [], (ledger, logs[-6000:])
    bad = _inconsistent_rows(database_url, sweep_id)
    assert not any(bad.values()), bad
