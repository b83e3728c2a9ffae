"""Benchmark 4: scale-out. The same latency-bound sweep (sim latency 1 s, no rate limit) on 1, 2 and
4 `afpbench worker` processes, concurrency per worker fixed (8), Redis DB 13 + a throwaway PostgreSQL
database per run. Latency-bound means the ideal rate (workers x 8 / 1 s = 32 prompts/s at 4 workers)
needs well under the machine's two cores; at 200 ms the 4-worker ideal (160/s) would measure CPU
sharing on 2 cores, not scale-out. Real providers answer in one to tens of seconds.

    .venv/bin/python benchmarks/bench_scaleout.py [--n 640] [--latency-ms 1000] [--concurrency 8]
        [--counts 1,2,4] [--out DIR]

Figures per worker count: sweep span (sweep row -> last result), prompts/s, share of the ideal
workers x concurrency / latency, and the speed-up over one worker. SIMULATED output.
"""

from __future__ import annotations

import argparse
import os
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
    sweep_span,
    workers,
    write_spec,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=640)
    ap.add_argument("--latency-ms", type=float, default=1000.0)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--counts", default="1,2,4")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    compile_bytecode()
    figures: dict = {"machine_before": machine(), "n": args.n, "latency_ms": args.latency_ms,
                     "concurrency_per_worker": args.concurrency, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="afp-bench-") as tmp:
        work = Path(tmp)
        make_fixtures(work / "fixtures", args.n)
        with sim_process(latency_ms=args.latency_ms, log=work / "sim.log") as sim_url:
            spec = write_spec(work / "spec.yaml", sim_url, work / "fixtures")
            for count in [int(c) for c in args.counts.split(",")]:
                load = os.getloadavg()[0]
                with distributed_services() as (db, env), \
                        workers(env, count, args.concurrency, work, prefix=f"so{count}x", ready=True):
                    summary, wall = run_json([*AFPBENCH, "run", str(spec), "--json"], env)
                    span = sweep_span(db, summary["sweep_id"])
                rate = args.n / span["span_s"]
                ideal = count * args.concurrency / (args.latency_ms / 1000)
                figures["runs"][count] = {
                    "span_s": round(span["span_s"], 2), "wall_s": round(wall, 2),
                    "prompts_per_s": round(rate, 2), "share_of_ideal": round(rate / ideal, 3),
                    "cells_with_result": span["cells_with_result"], "loadavg_1m_before": round(load, 2),
                    "loadavg_1m_after": round(os.getloadavg()[0], 2)}
                print(count, figures["runs"][count], flush=True)
    runs = figures["runs"]
    if 1 in runs:
        for row in runs.values():
            row["speedup_vs_1"] = round(row["prompts_per_s"] / runs[1]["prompts_per_s"], 2)
    emit("scaleout", figures, args.out)


if __name__ == "__main__":
    main()
