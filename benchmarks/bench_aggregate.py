"""Benchmark: aggregate a sweep of 100,000 synthetic cells (SQLite, and PostgreSQL when reachable).

    .venv/bin/python benchmarks/bench_aggregate.py [--cells 100000] [--backend sqlite|postgres|both]

Builds the rows with bulk inserts (cells, one result per finished cell, one attempt per cell plus a
retry for some), then times `aggregate_sweep` in a fresh child process so its peak RSS is its own
(resource.getrusage). Not a pytest test; figures are printed, not asserted. All data is SYNTHETIC.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PG_ADMIN = os.environ.get("AFP_BENCH_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
FIXTURES = [(f"P0{i}", i in (5, 6, 7)) for i in range(1, 9)]
SWEEP_ID = "bench"
# Real result details carry assertion outcomes and provenance (about 800 bytes on the demo sweep);
# the JSON the aggregation reads attempt_id from is padded to that size so parsing costs are honest.
DETAILS_PADDING = {"assertions": [{"id": f"a{i}", "kind": "invariant", "passed": True,
                                   "detail": "synthetic assertion outcome " * 3} for i in range(6)]}


def _spec(models: int) -> dict:
    from afpbench.workers.sweeps.spec_loading import parse_spec

    return parse_spec({"name": "bench (synthetic)", "judges": [], "models": [
        {"provider": "sim", "model": f"sim-{i}", "label": f"sim-{i} (simulated)",
         "prices": {"input_per_mtok": 1.0, "output_per_mtok": 4.0}} for i in range(models)]}).resolved()


def build(url: str, n_cells: int, models: int = 5) -> dict[str, float]:
    """Insert the synthetic sweep with Core bulk inserts; returns timings."""
    from sqlalchemy import insert

    from afpbench.workers.store.db import get_engine
    from afpbench.workers.store.models import Attempt, Cell, Result, Sweep
    from afpbench.workers.sweeps.spec_loading import parse_spec

    rng = random.Random(7)
    started = time.perf_counter()
    engine = get_engine(url)
    spec = _spec(models)
    parsed = parse_spec(spec).models
    per_group = max(1, n_cells // (models * 4 * len(FIXTURES)))
    cells, results, attempts = [], [], []
    cell_id = attempt_id = 0
    for m in parsed:
        for condition in "ABCD":
            for fixture, high_risk in FIXTURES:
                for repeat in range(1, per_group + 1):
                    cell_id += 1
                    u = rng.random()
                    state = ("MODEL_PASS" if u < 0.6 else "MODEL_FAIL" if u < 0.9 else
                             rng.choice(["PROVIDER_BLOCK", "INFRA_ERROR", "INVALID_TEST", "GRADER_DISPUTE"]))
                    unfinished = rng.random() < 0.002
                    cells.append({"id": cell_id, "sweep_id": SWEEP_ID, "model_label": m.display,
                                  "model_hash": m.model_hash, "provider": m.provider, "condition": condition,
                                  "fixture_id": fixture, "fixture_version": "1", "repeat": repeat,
                                  "high_risk": high_risk, "phase": "queued" if unfinished else "done",
                                  "state": None if unfinished else state, "attempts": 1})
                    for number in range(1, 3 if rng.random() < 0.1 else 2):
                        attempt_id += 1
                        attempts.append({"id": attempt_id, "cell_id": cell_id, "number": number,
                                         "outcome": "answer", "input_tokens": 900, "output_tokens":
                                         rng.randint(150, 900), "tool_calls": [], "reasoning_params": {},
                                         "rounds": [], "simulated": True})
                    if unfinished:
                        continue
                    scored = state in ("MODEL_PASS", "MODEL_FAIL")
                    dims = [rng.randint(0, 2) for _ in range(4)] if scored else [None] * 4
                    results.append({"cell_id": cell_id, "sweep_id": SWEEP_ID, "scoring_run": 1 if scored else 0,
                                    "state": state, "task_correctness": dims[0], "evidence_discipline": dims[1],
                                    "uncertainty_handling": dims[2], "failure_control": dims[3],
                                    "total": sum(dims) if scored else None,
                                    "fatal_criterion": "fabricated_fact" if state == "MODEL_FAIL" and u > 0.85
                                    else None, "details": {"attempt_id": attempt_id, **DETAILS_PADDING},
                                    "scorer_version": "bench"})
    prepared = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(insert(Sweep), [{"id": SWEEP_ID, "name": "bench (synthetic)", "status": "complete",
                                      "simulated": True, "spec": spec, "seal_hash": "bench",
                                      "seal_components": {}, "afpbench_version": "bench", "notices": [],
                                      "inputs": {}, "validity": {}}])
        for table, rows in ((Cell, cells), (Attempt, attempts), (Result, results)):
            for i in range(0, len(rows), 20_000):
                conn.execute(insert(table), rows[i:i + 20_000])
    return {"cells": len(cells), "attempts": len(attempts), "results": len(results),
            "prepare_s": prepared - started, "insert_s": time.perf_counter() - prepared}


def measure(url: str) -> dict[str, float]:
    """In this (fresh) process: time aggregate_sweep twice (cold, then warm) against a baseline of one
    plain fetch of every cell's (id, state) measured in the same process, and report peak RSS."""
    os.environ["AFP_DATABASE_URL"] = url
    from sqlmodel import select

    from afpbench.workers.results.aggregation import aggregate_sweep
    from afpbench.workers.store.db import session_scope
    from afpbench.workers.store.models import Cell

    with session_scope() as session:  # connect and warm the page cache before timing anything
        session.execute(select(Cell.id, Cell.state).where(Cell.sweep_id == SWEEP_ID)).all()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    with session_scope() as session:
        session.execute(select(Cell.id, Cell.state).where(Cell.sweep_id == SWEEP_ID)).all()
    baseline = time.perf_counter() - t0
    t1, c1 = time.perf_counter(), time.process_time()
    summary = aggregate_sweep(SWEEP_ID)
    t2, c2 = time.perf_counter(), time.process_time()
    aggregate_sweep(SWEEP_ID)
    t3 = time.perf_counter()
    return {"first_s": t2 - t1, "first_cpu_s": c2 - c1, "second_s": t3 - t2, "baseline_s": baseline,
            "cells": summary.cells, "n_scored": summary.totals.n, "comparisons": len(summary.comparisons),
            "rss_before_mib": rss_before / 1024,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "load_1min": os.getloadavg()[0]}


def run_backend(name: str, url: str, n_cells: int) -> None:
    built = build(url, n_cells)
    from afpbench.workers.store.db import dispose_engines

    dispose_engines()
    child = subprocess.run([sys.executable, __file__, "--measure", url], capture_output=True, text=True,
                           cwd=REPO, check=False)
    if child.returncode != 0:
        print(f"{name}: measurement failed:\n{child.stderr[-3000:]}", flush=True)
        return
    m = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"{name}: {built['cells']} cells, {built['attempts']} attempts, {built['results']} results "
          f"(built in {built['prepare_s']:.1f}s + inserted in {built['insert_s']:.1f}s)")
    print(f"  aggregate_sweep: {m['first_s']:.2f}s first ({m['first_cpu_s']:.2f}s CPU in this process), "
          f"{m['second_s']:.2f}s again; {m['n_scored']} scored, {m['comparisons']} comparisons")
    print(f"  ratio to one plain fetch of every cell's (id, state) ({m['baseline_s']:.3f}s): "
          f"{m['first_s'] / m['baseline_s']:.1f}x; 1-minute load average {m['load_1min']:.1f}")
    print(f"  peak RSS of the aggregating process: {m['peak_rss_mib']:.0f} MiB "
          f"(after imports and connect: {m['rss_before_mib']:.0f} MiB)", flush=True)


def _postgres_database() -> tuple[str, str] | None:
    try:
        import psycopg

        name = f"afpbench_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except Exception as exc:  # noqa: BLE001 - any failure means: no PostgreSQL for this run
        print(f"PostgreSQL: skipped ({type(exc).__name__}: {exc})")
        return None
    base = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    return name, f"{base}/{name}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=100_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            run_backend("SQLite", f"sqlite:///{tmp}/bench.db", args.cells)
    if args.backend == "sqlite":
        return
    pg = _postgres_database()
    if pg is None:
        return
    name, url = pg
    try:
        run_backend("PostgreSQL", url, args.cells)
    finally:
        import psycopg

        from afpbench.workers.store.db import dispose_engines

        dispose_engines()
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
