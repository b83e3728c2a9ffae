"""Drive a sweep while things break: SIGKILL workers (and start replacements), kill prefork pool
children, restart the broker empty (then `afpbench resume`). Disruptions are spread over the sweep and
stop once most cells are done, so the run ends with the system recovering on its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sqlalchemy import create_engine

from tests.reliability.fleet import WorkerFleet
from tests.reliability.ledger import aggregate_finished, done_count, resume
from tests.reliability.services import PrivateRedis


@dataclass
class ChaosPlan:
    worker_kills: int = 0  # SIGKILL a whole worker (main process and pool), start a replacement
    child_kills: int = 0  # SIGKILL one prefork pool child
    redis_restarts: int = 0  # kill the broker, start it empty, then `afpbench resume`
    every_s: float = 6.0  # at most one disruption per this many seconds
    until_fraction: float = 0.75  # no disruption once this share of the cells is done
    pool: str = "threads"
    workers: int = 2


@dataclass
class ChaosReport:
    cells: int
    done: int = 0
    worker_kills: int = 0
    worker_restarts: int = 0
    child_kills: int = 0
    redis_restarts: int = 0
    resumes: int = 0
    seconds: float = 0.0
    events: list[str] = field(default_factory=list)


def _events(plan: ChaosPlan) -> list[str]:
    """Interleave the disruptions evenly (broker restarts spread among the kills)."""
    kinds = ["kill"] * plan.worker_kills + ["child"] * plan.child_kills
    restarts = plan.redis_restarts
    if restarts:
        step = max(1, len(kinds) // (restarts + 1))
        for i in range(restarts):
            kinds.insert(min(len(kinds), step * (i + 1) + i), "redis")
    return kinds


def run_with_chaos(fleet: WorkerFleet, env: dict[str, str], database_url: str, sweep_id: str, cells: int,
                   plan: ChaosPlan, redis: PrivateRedis | None = None, timeout_s: float = 300) -> ChaosReport:
    report = ChaosReport(cells=cells)
    engine = create_engine(database_url, pool_pre_ping=True)
    pending = _events(plan)
    started = time.monotonic()
    last_event = started
    try:
        while time.monotonic() - started < timeout_s:
            done = done_count(engine, sweep_id)
            if done is not None:
                report.done = done
            if report.done >= cells and aggregate_finished(engine, sweep_id):
                break
            now = time.monotonic()
            if pending and report.done < plan.until_fraction * cells and now - last_event >= plan.every_s:
                if _disrupt(pending[0], fleet, plan, env, sweep_id, redis, report):
                    report.events.append(f"{now - started:.1f}s {pending.pop(0)} (done {report.done}/{cells})")
                    last_event = time.monotonic()
            time.sleep(0.5)
    finally:
        engine.dispose()
    report.seconds = round(time.monotonic() - started, 1)
    return report


def _disrupt(kind: str, fleet: WorkerFleet, plan: ChaosPlan, env: dict[str, str], sweep_id: str,
             redis: PrivateRedis | None, report: ChaosReport) -> bool:
    """One disruption; False (try again later) while no worker has proved itself busy yet."""
    # Only a worker that has already finished tasks is surely consuming (a slow-starting replacement
    # would be killed before it took any message, which tests nothing).
    busy = sorted((w for w in fleet.killable() if fleet.finished_tasks(w) >= 10), key=lambda w: w.proc.pid)
    if kind == "kill":
        if not busy:
            return False
        fleet.kill(busy[0])  # the oldest busy worker
        report.worker_kills += 1
        fleet.start(pool=plan.pool)
        report.worker_restarts += 1
    elif kind == "child":
        prefork = [w for w in busy if w.pool == "prefork"]
        if not prefork or fleet.kill_pool_child(prefork[report.child_kills % len(prefork)]) is None:
            return False
        report.child_kills += 1
    elif kind == "redis" and redis is not None:
        redis.restart(down_s=1.0)
        report.redis_restarts += 1
        time.sleep(3.0)  # let the workers notice and reconnect before re-sending
        resume(sweep_id, env)
        report.resumes += 1
    return True
