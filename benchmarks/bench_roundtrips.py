"""Benchmark: PostgreSQL round trips and statements one distributed cell costs.

    .venv/bin/python benchmarks/bench_roundtrips.py [--cells 200] [--out benchmarks/results]

A sweep of --cells judge-less cells is written to a throwaway PostgreSQL database (`afpbench run
--detach`, Redis DB 13 as broker and limiter), then this process executes every cell one after the
other through the worker's own service (`execute_cell`, what the execute task calls), with libpq's
protocol trace on each pooled connection. A round trip is one ReadyForQuery from the server (it ends
every simple query and every Sync of the extended protocol, BEGIN and COMMIT included); statements are
counted with SQLAlchemy's before_cursor_execute, also per cell for the cells whose call did not run
the release top-up (at most once a second per process: its share of the average depends on how fast
the cells go). The process's CPU time per cell is given too. Every answer comes from `afpbench sim --plain`: SIMULATED.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import (
    AFPBENCH,
    REPO,
    compile_bytecode,
    distributed_services,
    emit,
    machine,
    make_fixtures,
    sim_process,
    write_spec,
)


def count_cells(database_url: str, sweep_id: str, trace: Path) -> dict:
    """Execute every cell of the sweep here, tracing the protocol; returns the per-cell figures."""
    sys.path.insert(0, str(REPO))
    from sqlalchemy import event, text

    from afpbench.workers.cells import dispatch
    from afpbench.workers.cells.decisions import Finished
    from afpbench.workers.cells.execution import execute_cell
    from afpbench.workers.store.db import for_worker_process, get_engine

    for_worker_process(1)
    engine = get_engine(database_url)
    statements = {"n": 0, "connections": 0}
    sink = open(trace, "w")  # noqa: SIM115 - closed below, after the engine's connections

    @event.listens_for(engine, "connect")
    def _trace(dbapi_connection, _record) -> None:
        from psycopg import pq

        statements["connections"] += 1
        dbapi_connection.pgconn.trace(sink.fileno())
        dbapi_connection.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

    @event.listens_for(engine, "before_cursor_execute")
    def _count(*_args) -> None:
        statements["n"] += 1

    with engine.connect() as conn:
        ids = [r[0] for r in conn.execute(text("select id from cell where sweep_id = :s order by id"),
                                          {"s": sweep_id})]
    engine.dispose()  # from here on every connection is a traced one
    statements["n"] = statements["connections"] = 0
    cpu, wall = time.process_time(), time.monotonic()
    finished, plain = 0, []  # plain: statements of the cells whose task did not also run the release
    for cell_id in ids:
        before, released = statements["n"], dict(dispatch._last_top_up)
        finished += isinstance(execute_cell(cell_id, "roundtrips@bench"), Finished)
        if dispatch._last_top_up == released:
            plain.append(statements["n"] - before)
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    engine.dispose()
    sink.close()
    lines = trace.read_text().splitlines()
    ready = sum(1 for line in lines if line.startswith("B\t") and "\tReadyForQuery" in line)
    begins = sum(1 for line in lines if line.startswith("F\t") and '"BEGIN' in line)
    return {"cells": len(ids), "finished": finished, "round_trips_per_cell": round(ready / len(ids), 2),
            "statements_per_cell": round(statements["n"] / len(ids), 2),
            # The release top-up runs at most once a second per process, so its share depends on speed.
            "statements_per_cell_without_release": statistics.median(plain) if plain else None,
            "begin_per_cell": round(begins / len(ids), 2), "new_connections": statements["connections"],
            "cpu_ms_per_cell_this_process": round(1000 * cpu / len(ids), 2),
            "wall_ms_per_cell": round(1000 * wall / len(ids), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", type=int, default=200)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    compile_bytecode()
    figures: dict = {"machine_before": machine()}
    with tempfile.TemporaryDirectory(prefix="afp-rt-") as tmp, distributed_services() as (db, env):
        work = Path(tmp)
        make_fixtures(work / "fixtures", args.cells)
        with sim_process(latency_ms=0) as sim_url:
            spec = write_spec(work / "spec.yaml", sim_url, work / "fixtures")
            out = subprocess.run([*AFPBENCH, "run", str(spec), "--detach"], cwd=REPO, env=env, check=True,
                                 capture_output=True, text=True).stdout
            sweep_id = out.strip().splitlines()[-1]
            os.environ.update({k: v for k, v in env.items() if k.startswith("AFP_")})
            figures.update(count_cells(db, sweep_id, work / "libpq.trace"))
    emit("roundtrips", figures, args.out)


if __name__ == "__main__":
    main()
