"""Broker loss: the Redis broker is killed and started again empty in the middle of a sweep.

Every queued and unacknowledged message is gone. The workers reconnect on their own; `afpbench resume`
re-sends every unfinished cell from SQL and the reconciler sends whatever went missing later; the
sweep completes with every cell done once and one result each.
"""

from __future__ import annotations

import pytest

from tests.integration.workers_helper import service_env
from tests.reliability.chaos import ChaosPlan, run_with_chaos
from tests.reliability.ledger import FAST_TIMING, create_sweep, exactly_once_problems, read_ledger, sweep_spec

pytestmark = pytest.mark.integration


def test_broker_restarted_empty_mid_sweep_loses_and_doubles_nothing(reliability_db, private_redis, sim,
                                                                    fleet_factory, tmp_path):
    env = service_env(reliability_db, private_redis.url, AFP_SIM_URL=sim.base_url, **FAST_TIMING)
    fleet = fleet_factory(env)
    fleet.start(queues="control", beat=True, name="beat")
    workers = [fleet.start(), fleet.start()]
    sweep_id = create_sweep(sweep_spec(sim.base_url, None, 6), env, tmp_path)
    cells = read_ledger(reliability_db, sweep_id).cells
    plan = ChaosPlan(redis_restarts=1, every_s=6.0, until_fraction=0.6)
    report = run_with_chaos(fleet, env, reliability_db, sweep_id, cells, plan, redis=private_redis, timeout_s=240)
    ledger = read_ledger(reliability_db, sweep_id)
    print(f"\nbroker loss: {report}\n{ledger}")
    assert report.redis_restarts == 1 and report.resumes == 1, report
    assert all(w.alive for w in workers), "the workers reconnected instead of dying: " + fleet.logs()[-4000:]
    assert exactly_once_problems(ledger) == [], (ledger, report, fleet.logs()[-6000:])
