"""Duplicate messages on a busy machine: every execute message sent three times, every score message
three times or more, the aggregate message twice more after completion, beside CPU hogs started by the
test (one per core).

Rule checked (docs/RELIABILITY.md, "Duplicates are no-ops"): a duplicate message never executes a cell
a second time while its first execution is alive, under load as on a quiet machine. Each cell has one
attempt row, the simulator saw exactly the requests that attempt recorded as sent (no more, none
unrecorded), one result per cell and one aggregate row.

Only that is asserted: how much of the machine the hogs got depends on what else runs on it (other test
processes, other users), so it is printed, never checked; the rule must hold whatever the load.
"""

from __future__ import annotations

import pprint
import time

import pytest
import redis
from sqlalchemy import create_engine, text

from tests.integration.workers_helper import service_env
from tests.reliability.ledger import (
    LOADED_MODEL_TIMEOUT_S,
    LOADED_TIMING,
    aggregate_finished,
    create_sweep,
    exactly_once_problems,
    read_ledger,
    repeated_attempts,
    requests_on_record,
    sweep_spec,
    wait_until,
)
from tests.reliability.load import busy_cpu_seconds, cpu_hog
from tests.reliability.poison import PoisonGate, model_request, never

pytestmark = pytest.mark.integration


def _cells(database_url: str, sweep_id: str, phase: str | None = None) -> list[int]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            q = "select id from cell where sweep_id = :s" + (" and phase = :p" if phase else "") + " order by id"
            return [r[0] for r in conn.execute(text(q), {"s": sweep_id, "p": phase})]
    finally:
        engine.dispose()


def test_duplicate_messages_on_a_busy_machine_execute_each_cell_once(
        reliability_db, private_redis, sim, fleet_factory, tmp_path, settings_env):
    """Rule: a duplicate message never executes a cell twice while its first execution is alive (lease
    renewed while the call runs, fenced by attempt number), with the machine's cores busy; an attempt
    row matches the requests that were sent."""
    gate = PoisonGate(sim.base_url, never).start()  # counts every request per X-Afpbench-Cell
    env = service_env(reliability_db, private_redis.url, AFP_SIM_URL=gate.base_url, **LOADED_TIMING)
    settings_env(AFP_BROKER_URL=private_redis.url, AFP_DATABASE_URL=reliability_db)
    from afpbench.workers.celery_app import make_app

    producer = make_app()  # the project's own app, pointed at the private broker
    fleet = fleet_factory(env)
    sweep_id = create_sweep(sweep_spec(gate.base_url, None, 2, judged=True, timeout_s=LOADED_MODEL_TIMEOUT_S),
                            env, tmp_path)
    ids = _cells(reliability_db, sweep_id)
    started = time.monotonic()
    try:
        with cpu_hog() as hogs:
            # Replace the release's single messages by three adjacent copies per cell, so that copies of
            # one cell are taken by different worker threads at the same moment.
            broker = redis.Redis.from_url(private_redis.url)
            broker.delete(*broker.keys("exec.sim*"))
            for cell_id in ids:
                for _ in range(3):
                    producer.send_task("afpbench.execute", args=[cell_id], queue="exec.sim")
            executor = fleet.start(queues="exec.sim")
            executed = ("awaiting_score", "done")  # done: a try decided at execution (e.g. a provider block)
            assert wait_until(
                lambda: sum(len(_cells(reliability_db, sweep_id, p)) for p in executed) == len(ids), 120
            ), fleet.logs()[-4000:]
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
            hog_cpu_s = busy_cpu_seconds(hogs)
    finally:
        producer.close()
        gate.stop()
    elapsed = time.monotonic() - started
    ledger = read_ledger(reliability_db, sweep_id)
    received = {t: fleet.count_in_logs(rf"Task afpbench\.{t}\[\S+\] received")
                for t in ("execute", "score", "aggregate")}
    on_record = requests_on_record(reliability_db, sweep_id)
    seen = {key: n for key, n in gate.requests_by_key.items() if model_request(key)}
    print(f"\nduplicates under load: {len(ids)} cells, tasks seen {received}, hogs used {hog_cpu_s:.0f} CPU s "
          f"in {elapsed:.0f} s, {sum(seen.values())} model requests\n{ledger}")
    assert executor.alive
    assert exactly_once_problems(ledger) == [], ledger
    assert ledger.attempts == len(ids), pprint.pformat(repeated_attempts(reliability_db, sweep_id), width=200)
    assert ledger.attempts_not_sent == 0, ledger
    mismatched = {key: (seen.get(key, 0), rec) for key, rec in on_record.items()
                  if rec.attempts != 1 or rec.sent_rounds != seen.get(key, 0)}
    assert not mismatched, f"requests the simulator saw vs the attempts on record: {mismatched}"
    assert set(seen) == set(on_record), set(seen) ^ set(on_record)
    assert ledger.aggregate_rows == 1
    assert received["execute"] >= 3 * len(ids) and received["score"] >= 3 * len(ids), received
