"""Duplicate messages: every execute message sent three times, every score message three times or
more, the aggregate message twice more after completion. Idempotent tasks turn the copies into no-ops:
one attempt and one result per cell, one aggregate row.
"""

from __future__ import annotations

import time

import pytest
import redis
from sqlalchemy import create_engine, text

from tests.integration.workers_helper import service_env
from tests.reliability.ledger import (
    FAST_TIMING,
    aggregate_finished,
    create_sweep,
    exactly_once_problems,
    read_ledger,
    sweep_spec,
    wait_until,
)

pytestmark = pytest.mark.integration


def _cells(database_url: str, sweep_id: str, phase: str | None = None) -> list[int]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            q = "select id from cell where sweep_id = :s" + (" and phase = :p" if phase else "") + " order by id"
            return [r[0] for r in conn.execute(text(q), {"s": sweep_id, "p": phase})]
    finally:
        engine.dispose()


def test_duplicate_execute_score_and_aggregate_messages_give_one_result_per_cell(
        reliability_db, private_redis, sim, fleet_factory, tmp_path, settings_env):
    env = service_env(reliability_db, private_redis.url, AFP_SIM_URL=sim.base_url, **FAST_TIMING)
    settings_env(AFP_BROKER_URL=private_redis.url, AFP_DATABASE_URL=reliability_db)
    from afpbench.workers.celery_app import make_app

    producer = make_app()  # the project's own app, pointed at the private broker
    fleet = fleet_factory(env)
    sweep_id = create_sweep(sweep_spec(sim.base_url, None, 2, judged=True), env, tmp_path)
    ids = _cells(reliability_db, sweep_id)
    try:
        # Replace the release's single messages by three adjacent copies per cell, so that copies of one
        # cell are taken by different worker threads at the same moment.
        broker = redis.Redis.from_url(private_redis.url)
        broker.delete(*broker.keys("exec.sim*"))
        for cell_id in ids:
            for _ in range(3):
                producer.send_task("afpbench.execute", args=[cell_id], queue="exec.sim")
        executor = fleet.start(queues="exec.sim")
        executed = ("awaiting_score", "done")  # done: a try decided at execution (e.g. a provider block)
        assert wait_until(lambda: sum(len(_cells(reliability_db, sweep_id, p)) for p in executed) == len(ids), 120), \
            fleet.logs()[-4000:]
        for cell_id in ids:
            for _ in range(2):
                producer.send_task("afpbench.score", args=[cell_id], queue="score")
        fleet.start(queues="score,aggregate,control")
        engine = create_engine(reliability_db)
        assert wait_until(lambda: aggregate_finished(engine, sweep_id), 120), fleet.logs()[-4000:]
        for _ in range(2):
            producer.send_task("afpbench.aggregate", args=[sweep_id], queue="aggregate")
        aggregated = r"succeeded in \S+ 'aggregated'"
        assert wait_until(lambda: fleet.count_in_logs(aggregated) >= 3, 60), fleet.logs()[-4000:]
        time.sleep(8)  # let copies still waiting on a countdown run out
        engine.dispose()
    finally:
        producer.close()
    ledger = read_ledger(reliability_db, sweep_id)
    received = {t: fleet.count_in_logs(rf"Task afpbench\.{t}\[\S+\] received")
                for t in ("execute", "score", "aggregate")}
    print(f"\nduplicates: {len(ids)} cells, tasks seen {received}\n{ledger}")
    assert executor.alive
    assert exactly_once_problems(ledger) == [], ledger
    assert ledger.attempts == len(ids), "three execute messages per cell, one execution each"
    assert ledger.aggregate_rows == 1
    assert received["execute"] >= 3 * len(ids) and received["score"] >= 3 * len(ids), received
