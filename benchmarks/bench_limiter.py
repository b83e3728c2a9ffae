"""Benchmark 2: limiter fidelity. The sim enforces a strict token bucket (R per minute, burst B); N
prompts run on W `afpbench worker` processes (Redis DB 13 + a throwaway PostgreSQL database) whose
global limiter is configured with the same R and B.

    .venv/bin/python benchmarks/bench_limiter.py [--n 600] [--rate 600] [--burst 50] [--workers 4]
        [--concurrency 8] [--out DIR]

Figures: makespan (first to last 200 from the sim, and sweep row -> last result) against the ideal
(N - B) / R, the share of 429 answers, cells without a result (lost; must be 0). SIMULATED output.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from harness import (
    AFPBENCH,
    compile_bytecode,
    distributed_services,
    emit,
    machine,
    make_fixtures,
    run_json,
    sim_process,
    sim_stats,
    sweep_span,
    workers,
    write_spec,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--rate", type=float, default=600.0)
    ap.add_argument("--burst", type=int, default=50)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    compile_bytecode()
    before = machine()
    with tempfile.TemporaryDirectory(prefix="afp-bench-") as tmp:
        work = Path(tmp)
        make_fixtures(work / "fixtures", args.n)
        with sim_process(rate_per_min=args.rate, burst=args.burst, log=work / "sim.log") as sim_url, \
                distributed_services() as (db, env):
            limits = {"requests_per_min": args.rate, "burst": args.burst}
            spec = write_spec(work / "spec.yaml", sim_url, work / "fixtures", limits=limits)
            with workers(env, args.workers, args.concurrency, work, prefix="lim", ready=True):
                summary, wall = run_json([*AFPBENCH, "run", str(spec), "--json"], env)
            stats = sim_stats(sim_url)
            span = sweep_span(db, summary["sweep_id"])
    ok = stats["by_status"].get("200", 0)
    limited = stats["by_status"].get("429", 0)
    ideal = (args.n - args.burst) / (args.rate / 60.0)
    sim_makespan = stats["last_ok_at"] - stats["first_ok_at"]
    emit("limiter", {
        "machine_before": before, "n": args.n, "rate_per_min": args.rate, "burst": args.burst,
        "workers": args.workers, "concurrency_per_worker": args.concurrency,
        "ideal_makespan_s": round(ideal, 2),
        "makespan_sim_first_to_last_200_s": round(sim_makespan, 2),
        "makespan_sweep_span_s": round(span["span_s"], 2), "wall_s": round(wall, 2),
        "ratio_sim_makespan_to_ideal": round(sim_makespan / ideal, 3),
        "ratio_span_to_ideal": round(span["span_s"] / ideal, 3),
        "sim_200": ok, "sim_429": limited, "share_429": round(limited / max(1, ok + limited), 4),
        "cells": summary["cells"], "cells_with_result": span["cells_with_result"],
        "lost": summary["cells"] - span["cells_with_result"],
    }, args.out)


if __name__ == "__main__":
    main()
