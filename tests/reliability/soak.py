"""The reliability soak: a 5,000-cell simulated sweep on a private Redis and PostgreSQL, with ten
SIGKILLs of whole workers (each replaced) and two broker restarts (each followed by `afpbench resume`).

    python -m tests.reliability.soak            # prints the figures as JSON
    pytest -m soak tests/reliability            # the same run as a test (skipped by default)

Figures: cells, kills, restarts, lost (cells never reaching done), duplicated (cells with more than one
result in a scoring run), plus attempts and the run's duration.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.integration.workers_helper import service_env
from tests.reliability.chaos import ChaosPlan, run_with_chaos
from tests.reliability.fleet import WorkerFleet
from tests.reliability.ledger import FAST_TIMING, create_sweep, exactly_once_problems, read_ledger, sweep_spec
from tests.reliability.poison import PoisonGate, cell_matcher
from tests.reliability.services import PrivatePostgres, PrivateRedis

CELLS_PER_REPEAT = 2 * 4 * 8  # two models x A-D x P01-P08


def run_soak(work_dir: Path, cells: int = 5000, kills: int = 10, redis_restarts: int = 2,
             timeout_s: float = 3600) -> dict:
    repeats = -(-cells // CELLS_PER_REPEAT)
    with PrivatePostgres() as pg, PrivateRedis(work_dir) as redis, \
            SimServer(SimConfig(faults=FaultConfig(latency_ms=50, latency_jitter_ms=150))).start() as sim, \
            PoisonGate(sim.base_url, cell_matcher("B", "P03", 2)) as gate:
        env = service_env(pg.url, redis.url, AFP_SIM_URL=sim.base_url, **FAST_TIMING)
        with WorkerFleet(env, work_dir, concurrency=8) as fleet:
            fleet.start(queues="control", beat=True, name="beat")
            fleet.start()
            fleet.start()
            sweep_id = create_sweep(sweep_spec(sim.base_url, gate.base_url, repeats, "soak (simulated)"), env,
                                    work_dir)
            total = read_ledger(pg.url, sweep_id).cells
            plan = ChaosPlan(worker_kills=kills, redis_restarts=redis_restarts, every_s=12.0, until_fraction=0.8)
            report = run_with_chaos(fleet, env, pg.url, sweep_id, total, plan, redis=redis, timeout_s=timeout_s)
        ledger = read_ledger(pg.url, sweep_id)
    return {
        "cells": ledger.cells,
        "kills": report.worker_kills,
        "worker_restarts": report.worker_restarts,
        "redis_restarts": report.redis_restarts,
        "resumes": report.resumes,
        "lost": ledger.lost,
        "duplicated": ledger.duplicated_per_run,
        "cells_with_more_than_one_result": ledger.duplicated,
        "attempts": ledger.attempts,
        "interrupted_attempts": ledger.attempts_interrupted,
        "cells_with_extra_attempts": ledger.redelivered_cells,
        "by_state": ledger.by_state,
        "aggregate_rows": ledger.aggregate_rows,
        "seconds": report.seconds,
        "events": report.events,
        "problems": exactly_once_problems(ledger),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=5000)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--redis-restarts", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="afp-soak-") as tmp:
        figures = run_soak(Path(tmp), args.cells, args.kills, args.redis_restarts)
    print(json.dumps(figures, indent=2))
    return 0 if not figures["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
