"""Benchmark: the coordinator's fixed and per-cell cost and its memory at 1,000, 10,000 and 100,000 cells.

Each size runs `start_sweep` (validity gate, seal, cell rows, first release = every message enqueued,
since the default window is 1,000 cells per model) in a fresh process of its own, on a throwaway
PostgreSQL database and Redis, and reports its wall and CPU seconds and peak RSS; then the ratios to
the 1,000-cell run. `--python` runs the same script under another checkout's interpreter, so two code
versions are compared in one sitting (interleaved, load recorded per run). SIMULATED models, never called.

    python benchmarks/bench_coordinator.py [--fixtures 1000] [--models 1,10,100] [--rounds 1]
        [--python OTHER_PYTHON] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import REPO, distributed_services, emit, machine, make_fixtures, write_spec
from versions import add_version_options, interpreters

COORDINATOR = """
import json, resource, sys, time
t0, c0 = time.monotonic(), time.process_time()
from afpbench.workers.runs import start_sweep
from afpbench.workers.sweeps.spec_loading import load_spec
from afpbench.workers.store.db import get_engine
get_engine()
spec = load_spec(sys.argv[1])
t1, c1 = time.monotonic(), time.process_time()
start_sweep(spec, check_endpoints=False)
t2, c2 = time.monotonic(), time.process_time()
print(json.dumps({"import_and_schema_s": t1 - t0, "expand_and_enqueue_s": t2 - t1,
                  "expand_and_enqueue_cpu_s": c2 - c1,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_once(python: str, spec: Path, env: dict[str, str]) -> dict:
    load = os.getloadavg()[0]
    proc = subprocess.run([python, "-c", COORDINATOR, str(spec)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    return {k: round(v, 2) for k, v in figures.items()} | {"load_1m_before": round(load, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixtures", type=int, default=1000)
    ap.add_argument("--models", default="1,10,100", help="model counts; cells = fixtures x models")
    add_version_options(ap, rounds=1)
    args = ap.parse_args()
    before = machine()
    pythons = interpreters(args)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="afp-bench-") as tmp:
        work = Path(tmp)
        make_fixtures(work / "fixtures", args.fixtures)
        for _ in range(args.rounds):
            for models in [int(m) for m in args.models.split(",")]:
                spec = write_spec(work / f"spec{models}.yaml", "http://127.0.0.1:9/v1", work / "fixtures",
                                  models=models)
                for name, python in pythons.items():  # interleaved: each size, each version, in turn
                    with distributed_services() as (_db, env):
                        runs.append({"code": name, "cells": args.fixtures * models,
                                     **run_once(python, spec, env)})
                    print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    ratios = {}
    for name in pythons:
        mine = [r for r in runs if r["code"] == name]
        smallest = min(r["cells"] for r in mine)
        base_rss = min(r["peak_rss_mb"] for r in mine if r["cells"] == smallest)
        ratios[name] = {str(r["cells"]): round(r["peak_rss_mb"] / base_rss, 3) for r in mine}
    emit("coordinator", {"machine_before": before, "fixtures": args.fixtures, "runs": runs,
                         "peak_rss_ratio_to_smallest": ratios}, args.out)


if __name__ == "__main__":
    main()
