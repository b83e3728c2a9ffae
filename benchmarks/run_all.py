"""The benchmark suite, one command (not part of the pytest run):

    /work/venv/bin/python benchmarks/run_all.py --setup          # once: /work/bench-venv with Inspect AI
    /work/venv/bin/python benchmarks/run_all.py [--only throughput,limiter,scale,scaleout,aggregate,startup]
        [--out benchmarks/results] [--quick]

Needs Redis on 127.0.0.1:6379 (DB 13 is used and flushed) and PostgreSQL on 127.0.0.1:5432 with trust
auth (throwaway databases bench_<random> are created and dropped). Each benchmark prints its figures
as JSON and writes <out>/<name>.json; docs/PERFORMANCE.md holds the latest table. Everything the
simulator answers is SIMULATED.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH_VENV = Path(os.environ.get("AFP_BENCH_VENV", "/work/bench-venv"))
PYTHON_FOR_VENV = os.environ.get("AFP_BENCH_PYTHON", "python3.11")

FULL = {
    "throughput": ["bench_throughput.py"],
    "limiter": ["bench_limiter.py"],
    "scale": ["bench_scale.py"],
    "scaleout": ["bench_scaleout.py"],
    "aggregate": ["bench_aggregate.py", "--cells", "100000", "--backend", "both"],
    "startup": ["bench_startup.py"],
}
QUICK = {  # a smoke run of the same code paths, minutes instead of tens of minutes
    "throughput": ["bench_throughput.py", "--prompts", "200"],
    "limiter": ["bench_limiter.py", "--n", "200", "--rate", "600", "--burst", "50"],
    "scale": ["bench_scale.py", "--fixtures", "100", "--models", "10", "--worker-seconds", "20"],
    "scaleout": ["bench_scaleout.py", "--n", "160"],
    "aggregate": ["bench_aggregate.py", "--cells", "10000", "--backend", "sqlite"],
    "startup": ["bench_startup.py", "--runs", "3"],
}


def setup() -> None:
    """The comparison harness in a venv of its own, so Inspect's dependencies never touch ours."""
    if not (BENCH_VENV / "bin" / "python").exists():
        subprocess.run([PYTHON_FOR_VENV, "-m", "venv", str(BENCH_VENV)], check=True)
    subprocess.run([str(BENCH_VENV / "bin" / "pip"), "install", "-q", "-r", str(HERE / "requirements.txt")],
                   check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", action="store_true", help="create /work/bench-venv with Inspect AI and stop")
    ap.add_argument("--only", default=",".join(FULL))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    if args.setup:
        setup()
        return
    table = QUICK if args.quick else FULL
    failed = []
    for name in args.only.split(","):
        cmd = [sys.executable, str(HERE / table[name][0]), *table[name][1:]]
        if name != "aggregate":
            cmd += ["--out", str(args.out)]
        print(f"== {name}: {' '.join(cmd)} (load {os.getloadavg()})", flush=True)
        started = time.monotonic()
        if subprocess.run(cmd, cwd=HERE).returncode != 0:
            failed.append(name)
        print(f"== {name} took {time.monotonic() - started:.0f} s", flush=True)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
