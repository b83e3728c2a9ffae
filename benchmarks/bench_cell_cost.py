"""Benchmark: what one cell costs in CPU, by part, on each store: the message, and the cell's own work.

Explains the distributed worker's throughput beside the embedded mode's (docs/PERFORMANCE.md). Two parts,
each measured in processes of its own, `--rounds` times:

- the message: no-op tasks through Celery with afpbench's settings (acks_late, prefetch 1, no events),
  `--tasks` of them published in one batch: in the embedded worker (kombu's in-memory transport, the
  thread pool: bench_task_floor.py's probe) and in a real `celery worker` process on Redis (the threads
  pool, `--threads`), the worker's CPU a task read from /proc once the queue and kombu's unacked index
  are empty;
- the cell: `execute_cell` (workers/cells/execution.py) called for each of `--cells` cells in turn, on
  one thread, in a process that did not create the sweep (so it reads the sweep's inputs and each
  fixture's stored form as a worker does), against the mock server at 0 ms (benchmarks/mock_openai.py,
  its own process): on SQLite (the embedded store: its engine's CPU is this process's) and on
  PostgreSQL with the Redis limiter (the distributed stores: the PostgreSQL backends' CPU reported
  apart). The first 50 cells are a warm-up, not counted.

A real worker's CPU a cell beyond message + cell is what running C cells at once on threads adds.
Every answer comes from the mock and is SIMULATED.

    python benchmarks/bench_cell_cost.py [--tasks 2000] [--cells 600] [--threads 50] [--rounds 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from bench_task_floor import PROBE as EMBEDDED_FLOOR_PROBE
from harness import (
    REDIS_URL,
    REPO,
    CpuSampler,
    afp_env,
    distributed_services,
    emit,
    flush_redis,
    machine,
    make_fixtures,
    mock_process,
    pid_cpu_s,
    ready_sqlite,
    stop,
    wait_workers_ready,
    write_spec,
)

# A module the Redis worker imports (celery -A): afpbench's app with one no-op task added.
NOOP_APP = """
from afpbench.workers.celery_app import app

@app.task(name="bench.noop", acks_late=True)
def noop(i):
    return None
"""

PUBLISH = """
import sys
from afpbench.workers.celery_app import publish
publish([("bench.noop", [i], "control") for i in range(int(sys.argv[1]))])
"""

# Creates the sweep and leaves: its messages are dropped (memory://) or flushed (Redis) before the cells run.
CREATE = """
import sys
from afpbench.workers.runs import start_sweep
from afpbench.workers.sweeps.spec_loading import load_spec
print(start_sweep(load_spec(sys.argv[1])))
"""

CELLS = """
import json, sys, time
from sqlmodel import select
from afpbench.workers.cells.execution import execute_cell
from afpbench.workers.cells.decisions import Finished
from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import for_worker_process, session_scope
from afpbench.workers.store.models import Cell

if not get_settings().embedded:
    for_worker_process(1)  # as `afpbench worker` sets its engine up (no liveness ping)
with session_scope() as session:
    cells = list(session.exec(select(Cell.id).where(Cell.sweep_id == sys.argv[1]).order_by(Cell.id)))
warm, counted = cells[:50], cells[50:]
for cell_id in warm:
    execute_cell(cell_id, "bench")
print("counting", flush=True)
sys.stdin.readline()  # the parent starts sampling the database's CPU, then says go
cpu, wall = time.process_time(), time.perf_counter()
finished = sum(isinstance(execute_cell(cell_id, "bench"), Finished) for cell_id in counted)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
print(json.dumps({"cells": len(counted), "finished": finished, "cpu_ms_per_cell": cpu / len(counted) * 1e3,
                  "wall_ms_per_cell": wall / len(counted) * 1e3}))
"""


def embedded_floor(tasks: int, threads: int, work: Path, i: int) -> dict:
    out = subprocess.run([sys.executable, "-c", EMBEDDED_FLOOR_PROBE, str(tasks), str(threads)], cwd=REPO,
                         env=afp_env(f"sqlite:///{work}/floor-{i}.db"), capture_output=True, text=True,
                         check=True).stdout
    return {"cpu_ms_per_task": json.loads(out.strip().splitlines()[-1])["cpu_ms_per_task"]}


def redis_floor(tasks: int, threads: int, work: Path, i: int) -> dict:
    import redis

    (work / "noop_app.py").write_text(NOOP_APP)
    env = afp_env(f"sqlite:///{work}/floor-redis-{i}.db", REDIS_URL)
    env["PYTHONPATH"] = f"{work}{os.pathsep}{env['PYTHONPATH']}"
    flush_redis()
    name = f"floor{i}"
    log = open(work / f"{name}.log", "w")  # noqa: SIM115 - closed below
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "noop_app", "worker", "--pool=threads",
                               f"--concurrency={threads}", "--queues=control", "--without-gossip",
                               f"--hostname={name}@%h", "--loglevel=WARNING"], cwd=work, env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_workers_ready(REDIS_URL, [name])
        client = redis.Redis.from_url(REDIS_URL)
        cpu = pid_cpu_s(worker.pid)
        subprocess.run([sys.executable, "-c", PUBLISH, str(tasks)], cwd=REPO, env=env, check=True)
        # kombu's Redis transport: the queue is a list named after it; a delivered, unacked message
        # waits in the "unacked_index" sorted set until its ack.
        while client.llen("control") or client.zcard("unacked_index"):
            time.sleep(0.02)
        return {"cpu_ms_per_task": (pid_cpu_s(worker.pid) - cpu) / tasks * 1e3}
    finally:
        stop(worker)
        log.close()
        flush_redis()


def cell_cost(spec: Path, env: dict[str, str], database: str | None) -> dict:
    """Create the sweep in one process, then time its cells in another (see the docstring)."""
    sweep_id = subprocess.run([sys.executable, "-c", CREATE, str(spec)], cwd=REPO, env=env, capture_output=True,
                              text=True, check=True).stdout.strip().splitlines()[-1]
    if not env["AFP_BROKER_URL"].startswith("memory://"):
        flush_redis()  # the sweep's messages: nobody consumes them here
    probe = subprocess.Popen([sys.executable, "-c", CELLS, sweep_id], cwd=REPO, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert probe.stdin is not None and probe.stdout is not None
    if probe.stdout.readline().strip() != "counting":
        raise RuntimeError("the cell probe failed before its warm-up ended")
    with CpuSampler(database) if database else nullcontext() as sampler:
        probe.stdin.write("go\n")
        probe.stdin.flush()
        figures = json.loads(probe.stdout.read().strip().splitlines()[-1])
    if sampler is not None:
        figures["postgres_cpu_ms_per_cell"] = sampler.postgres_s / figures["cells"] * 1e3
    if probe.wait() != 0:
        raise RuntimeError("the cell probe failed")
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--cells", type=int, default=600)
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    before = machine()
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="afp-cellcost-") as tmp:
        work = Path(tmp)
        make_fixtures(work / "fixtures", args.cells + 50)
        with mock_process(latency_ms=0) as (mock_url, _):
            spec = write_spec(work / "spec.yaml", mock_url, work / "fixtures")
            for i in range(args.rounds):
                for part, floor in (("message, embedded", embedded_floor), ("message, redis", redis_floor)):
                    load = os.getloadavg()[0]
                    runs.append({"part": part, "round": i, "load_1m_before": load,
                                 **floor(args.tasks, args.threads, work, i)})
                    print(runs[-1], file=sys.stderr, flush=True)
                load = os.getloadavg()[0]
                sqlite_env = afp_env(ready_sqlite(work / f"cells-{i}.db"))
                runs.append({"part": "cell, sqlite", "round": i, "load_1m_before": load,
                             **cell_cost(spec, sqlite_env, None)})
                print(runs[-1], file=sys.stderr, flush=True)
                load = os.getloadavg()[0]
                with distributed_services() as (database_url, env):
                    runs.append({"part": "cell, postgresql + redis limiter", "round": i, "load_1m_before": load,
                                 **cell_cost(spec, env, database_url.rsplit("/", 1)[1])})
                print(runs[-1], file=sys.stderr, flush=True)
    medians = {part: {k: round(statistics.median(r[k] for r in runs if r["part"] == part), 3)
                      for k in ("cpu_ms_per_task", "cpu_ms_per_cell", "wall_ms_per_cell", "postgres_cpu_ms_per_cell")
                      if any(k in r for r in runs if r["part"] == part)}
               for part in dict.fromkeys(r["part"] for r in runs)}
    emit("cell_cost", {"machine_before": before, "tasks": args.tasks, "cells": args.cells, "threads": args.threads,
                       "runs": runs, "medians": medians}, args.out)


if __name__ == "__main__":
    main()
