"""Benchmark 3: a 100,000-cell sweep (or 1,000,000: `--fixtures 1250 --models 50 --conditions A,B,C,D
--repeats 4`). Expansion (validity gate, seal, one transaction with every cell row) and enqueue (one
message per released cell, to Redis DB 13), timed in a coordinator process of its own so its peak RSS is
its own; then one worker drains messages for a while and its peak RSS is
read at intervals (flat memory = the same peak late as early).

    .venv/bin/python benchmarks/bench_scale.py [--fixtures 1000] [--models 100] [--conditions A]
        [--repeats 1] [--rate-per-min R] [--worker-seconds 60] [--lane sync|batch] [--workers 1] [--out DIR]

`--lane batch` puts every model on the batch lane: `start_sweep` then forms the provider batches, and the
workers submit them to the simulator; `all_batches_at_provider_s` is when none is left unsent (sampled
every 2 s, within `--worker-seconds`).

Default shape: 1,000 fixtures x 100 simulated models x condition A = 100,000 cells. Release is
windowed (workers/cells/dispatch.py:window_for): models without a declared rate share one window of
1,000 cells, so by default the first release enqueues 1,000 messages. `--rate-per-min 6000` declares
that rate for every model, whose window is then about ten seconds of it (1,001 cells each), so all
100,000 are enqueued by `start_sweep`: the expansion-and-enqueue figure of issue 14. Aggregation of
100,000 cells is timed by benchmarks/bench_aggregate.py. SIMULATED.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import (
    REDIS_URL,
    REPO,
    compile_bytecode,
    distributed_services,
    emit,
    machine,
    make_fixtures,
    peak_rss_mb,
    sim_process,
    workers,
    write_spec,
)

COORDINATOR = """
import json, resource, sys, time
t0 = time.monotonic()
from afpbench.workers.runs import start_sweep
from afpbench.workers.sweeps.spec_loading import load_spec
from afpbench.workers.store.db import get_engine
get_engine()
spec = load_spec(sys.argv[1])
t1 = time.monotonic()
sweep_id = start_sweep(spec, check_endpoints=False)
t2 = time.monotonic()
print(json.dumps({"sweep_id": sweep_id, "import_and_schema_s": t1 - t0, "expand_and_enqueue_s": t2 - t1,
                  "coordinator_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def queue_depth() -> int:
    import redis

    r = redis.Redis.from_url(REDIS_URL)
    return sum(r.llen(k) for k in r.keys("exec.*") + r.keys("score"))


def batch_counts(database_url: str) -> dict[str, int]:
    """The sweep's batches by status, and how many cells they carry (the batch lane)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(database_url)
    with engine.connect() as conn:
        rows = conn.execute(sqlalchemy.text("SELECT status, count(*), coalesce(sum(entries), 0) FROM batch "
                                            "GROUP BY status")).all()
    engine.dispose()
    return {**{status: n for status, n, _ in rows}, "cells": sum(int(e) for _, _, e in rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixtures", type=int, default=1000)
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--conditions", default="A")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--rate-per-min", type=float, default=None,
                    help="a declared rate for every model (its release window follows it)")
    ap.add_argument("--worker-seconds", type=float, default=60.0)
    ap.add_argument("--lane", choices=["sync", "batch"], default="sync",
                    help="batch: every model on the batch lane; the workers submit the batches to the sim, and "
                         "the figure is the time until every batch is at the provider")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    compile_bytecode()
    before = machine()
    conditions = args.conditions.split(",")
    with tempfile.TemporaryDirectory(prefix="afp-bench-") as tmp:
        work = Path(tmp)
        make_fixtures(work / "fixtures", args.fixtures)
        with sim_process(log=work / "sim.log") as sim_url, distributed_services() as (db, env):
            spec = write_spec(work / "spec.yaml", sim_url, work / "fixtures", conditions=conditions,
                              repeats=args.repeats, models=args.models,
                              limits={"requests_per_min": args.rate_per_min} if args.rate_per_min else None,
                              lane=args.lane)
            started = time.monotonic()
            proc = subprocess.run([sys.executable, "-c", COORDINATOR, str(spec)], cwd=REPO, env=env,
                                  capture_output=True, text=True, timeout=1800)
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr[-3000:])
            coordinator = json.loads(proc.stdout.strip().splitlines()[-1])
            coordinator["process_wall_s"] = time.monotonic() - started
            depth = queue_depth()
            samples = []
            batches_at_start = batch_counts(db)
            with workers(env, args.workers, 8, work, prefix="scale") as procs:
                t0 = time.monotonic()
                while time.monotonic() - t0 < args.worker_seconds:
                    time.sleep(2.0 if args.lane == "batch" else min(10.0, args.worker_seconds / 6))
                    sample = {"t_s": round(time.monotonic() - t0, 1),
                              "worker_peak_rss_mb": round(peak_rss_mb(procs[0].pid), 1),
                              "queue_depth": queue_depth()}
                    if args.lane == "batch":
                        sample["batches"] = counts = batch_counts(db)
                        if not counts.get("created"):
                            coordinator["all_batches_at_provider_s"] = round(
                                coordinator["process_wall_s"] + sample["t_s"], 1)
                            samples.append(sample)
                            break
                    samples.append(sample)
    cells = args.fixtures * args.models * len(conditions) * args.repeats
    emit("scale", {
        "machine_before": before, "cells": cells, "shape": f"{args.fixtures} fixtures x {args.models} models x "
        f"{len(conditions)} conditions x {args.repeats} repeats", "rate_per_min": args.rate_per_min,
        "lane": args.lane, "workers": args.workers, "batches_at_start": batches_at_start,
        **{k: round(v, 2) if isinstance(v, float) else v for k, v in coordinator.items()},
        "queued_messages_after_start": depth, "worker_rss_samples": samples,
        "aggregation": "see benchmarks/bench_aggregate.py",
    }, args.out)


if __name__ == "__main__":
    main()
