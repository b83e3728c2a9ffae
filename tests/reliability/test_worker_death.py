"""Worker death: at-least-once delivery, exactly one final result per cell, every attempt on record.

Workers are SIGKILLed mid-sweep (no shutdown, no acks) and replaced. Their unacknowledged messages come
back after the broker's visibility timeout (acks_late); a cell whose claim died with its worker is
taken over when its lease expires; SQL decides what is left, so redelivery adds attempts, never results.
A poison cell (its endpoint always answers 500) stops after AFP_MAX_ATTEMPTS tries as INFRA_ERROR.
"""

from __future__ import annotations

import pytest

from tests.integration.workers_helper import service_env
from tests.reliability.chaos import ChaosPlan, run_with_chaos
from tests.reliability.ledger import (
    FAST_TIMING,
    create_sweep,
    exactly_once_problems,
    poison_history,
    read_ledger,
    sweep_spec,
)
from tests.reliability.poison import PoisonGate, cell_matcher

pytestmark = pytest.mark.integration

POISON = ("B", "P03", 2)  # condition, fixture, repeat of the one cell that always fails (model b)
MAX_ATTEMPTS = 4


def _run(reliability_db, private_redis, sim, fleet_factory, tmp_path, repeats, plan, timeout_s):
    with PoisonGate(sim.base_url, cell_matcher(*POISON)) as gate:
        env = service_env(reliability_db, private_redis.url, AFP_SIM_URL=sim.base_url,
                          AFP_MAX_ATTEMPTS=str(MAX_ATTEMPTS), **FAST_TIMING)
        fleet = fleet_factory(env, concurrency=8 if plan.pool == "threads" else 3)
        fleet.start(queues="control", beat=True, name="beat")  # the reconciler; never killed
        for _ in range(plan.workers):
            fleet.start(pool=plan.pool)
        sweep_id = create_sweep(sweep_spec(sim.base_url, gate.base_url, repeats), env, tmp_path)
        cells = 2 * 4 * 8 * repeats
        report = run_with_chaos(fleet, env, reliability_db, sweep_id, cells, plan, timeout_s=timeout_s)
        ledger = read_ledger(reliability_db, sweep_id)
        poison = poison_history(reliability_db, sweep_id, *POISON, "sim-b (simulated)")
        logs = fleet.logs()
        lost_jobs = fleet.count_in_logs(r"WorkerLostError\('Worker exited prematurely")
    print(f"\nworker death ({plan.pool}): {report}\n{ledger}\ntasks lost with a pool child: {lost_jobs}")
    return report, ledger, poison, logs, lost_jobs


def _assert_poison_stopped(poison) -> None:
    assert poison.state == "INFRA_ERROR", poison
    # A killed try counts too, so the budget may end one claim later when the last counted try died.
    assert MAX_ATTEMPTS <= poison.attempts <= MAX_ATTEMPTS + 1 and len(poison.outcomes) == poison.attempts, poison
    assert f"after {poison.attempts} attempts" in (poison.reason or ""), poison.reason
    answered = [s for o, s in zip(poison.outcomes, poison.statuses, strict=True) if o != "interrupted"]
    assert answered and all(s == 500 for s in answered), poison  # every try that got an answer got the 500


def test_sigkilled_workers_lose_no_cell_and_double_no_result(reliability_db, private_redis, sim, fleet_factory,
                                                           tmp_path):
    """2,048 cells, two threaded workers, six SIGKILLs of a whole worker (each replaced): every cell is
    done once with one result; killed tries stay on record as interrupted attempts (attempts > cells)."""
    plan = ChaosPlan(worker_kills=6, every_s=6.0, until_fraction=0.8, pool="threads")
    report, ledger, poison, logs, _ = _run(reliability_db, private_redis, sim, fleet_factory, tmp_path, 32, plan, 420)
    assert ledger.cells == 2048
    assert report.worker_kills == 6 and report.worker_restarts == 6, report
    assert exactly_once_problems(ledger) == [], (ledger, report, logs[-6000:])
    assert ledger.attempts_interrupted >= 1, "some SIGKILL landed while a call was in flight"
    assert ledger.attempts > ledger.cells, "redelivered work shows as extra attempts"
    _assert_poison_stopped(poison)


def test_prefork_pool_children_killed_mid_task_are_redelivered(reliability_db, private_redis, sim, fleet_factory,
                                                               tmp_path):
    """Prefork pool: SIGKILL single pool children (WorkerLostError, message rejected back to the queue)
    and once a whole worker; the same exactly-once ledger holds."""
    # 8 repeats (512 cells): with judge-less cells scored inline, 256 cells finished before the fifth
    # child kill was due (every 2.5 s until 90 % done).
    plan = ChaosPlan(worker_kills=1, child_kills=5, every_s=2.5, until_fraction=0.9, pool="prefork")
    report, ledger, poison, logs, lost_jobs = _run(reliability_db, private_redis, sim, fleet_factory, tmp_path, 8, plan,
                                                   240)
    assert report.child_kills == 5 and report.worker_kills == 1, report
    assert exactly_once_problems(ledger) == [], (ledger, report, logs[-6000:])
    # A killed child with a task in flight is reported by the pool; its message went back to the queue.
    assert lost_jobs >= 1, "at least one pool child was killed with a task in flight"
    _assert_poison_stopped(poison)
