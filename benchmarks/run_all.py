"""The benchmark suite, one command (not part of the pytest run):

    .venv/bin/python benchmarks/run_all.py --setup          # once: Inspect AI's venv and promptfoo (below)
    .venv/bin/python benchmarks/run_all.py [--only side_by_side,roundtrips,throughput,limiter,scale,scaleout,
        aggregate,startup,task_floor,task_gap,cell_cost,gate,statistics] [--out benchmarks/results]
        [--quick]

`--setup` installs the comparison harnesses apart from the project: Inspect AI (benchmarks/requirements.txt)
into benchmarks/.inspect-venv (or AFP_INSPECT_VENV), and promptfoo 0.118.13 (benchmarks/promptfoo/package.json,
`better-sqlite3` held at 12 and compiled for this Node) into benchmarks/promptfoo/node_modules. Both folders
are ignored by git. Needs Redis on 127.0.0.1:6379 (DB 13 is used and flushed) and PostgreSQL on
127.0.0.1:5432 with trust auth (throwaway databases bench_<random> are created and dropped). Each benchmark
prints its figures as JSON and writes <out>/<name>.json; docs/PERFORMANCE.md has one table per benchmark.
Everything the mock and the simulator answer is SIMULATED.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from harness import INSPECT_VENV, PROMPTFOO_DIR  # noqa: E402 - the benchmarks folder is not a package

PROMPTFOO_VERSION = "0.118.13"
PYTHON_FOR_VENV = os.environ.get("AFP_BENCH_PYTHON", "python3.11")

FULL = {
    "side_by_side": ["bench_side_by_side.py"],
    "roundtrips": ["bench_roundtrips.py"],
    "throughput": ["bench_throughput.py"],
    "limiter": ["bench_limiter.py"],
    "scale": ["bench_scale.py", "--rate-per-min", "6000"],  # every cell released at the start
    "scaleout": ["bench_scaleout.py"],
    "aggregate": ["bench_aggregate.py", "--cells", "100000", "--backend", "both"],
    "startup": ["bench_startup.py"],
    "task_floor": ["bench_task_floor.py"],
    "task_gap": ["bench_task_floor.py", "--tasks", "1000", "--sleep-ms", "100"],
    "cell_cost": ["bench_cell_cost.py"],
    "gate": ["bench_gate.py"],
    "statistics": ["bench_statistics.py"],  # the comparison and judge statistics against a known truth
}
QUICK = {  # a smoke run of the same code paths, minutes instead of tens of minutes
    "side_by_side": ["bench_side_by_side.py", "--prompts", "100", "--rounds", "1"],
    "roundtrips": ["bench_roundtrips.py", "--cells", "50"],
    "throughput": ["bench_throughput.py", "--prompts", "200"],
    "limiter": ["bench_limiter.py", "--n", "200", "--rate", "600", "--burst", "50"],
    "scale": ["bench_scale.py", "--fixtures", "100", "--models", "10", "--worker-seconds", "20"],
    "scaleout": ["bench_scaleout.py", "--n", "160"],
    "aggregate": ["bench_aggregate.py", "--cells", "10000", "--backend", "sqlite"],
    "startup": ["bench_startup.py", "--runs", "3"],
    "task_floor": ["bench_task_floor.py", "--tasks", "500", "--rounds", "1"],
    "task_gap": ["bench_task_floor.py", "--tasks", "500", "--sleep-ms", "100", "--rounds", "1"],
    "cell_cost": ["bench_cell_cost.py", "--tasks", "300", "--cells", "100", "--rounds", "1"],
    "gate": ["bench_gate.py", "--copies", "20", "--rounds", "1"],
    "statistics": ["bench_statistics.py", "--seeds", "300", "--judge-seeds", "100"],
}


def setup() -> None:
    """The comparison harnesses in folders of their own, so their dependencies never touch ours."""
    if not (INSPECT_VENV / "bin" / "python").exists():
        subprocess.run([PYTHON_FOR_VENV, "-m", "venv", str(INSPECT_VENV)], check=True)
    subprocess.run([str(INSPECT_VENV / "bin" / "pip"), "install", "-q", "-r", str(HERE / "requirements.txt")],
                   check=True)
    setup_promptfoo()


def setup_promptfoo() -> None:
    """promptfoo from the npm registry. Install scripts are skipped (one downloads a Chromium for
    promptfoo's browser provider, from a host outside the registry); then only `better-sqlite3`, which
    promptfoo stores its results with, is compiled for this Node (node-gyp; with the headers of a
    distribution's Node in /usr/include/node when present, as nothing is downloaded)."""
    env = {**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
    binary = PROMPTFOO_DIR / "node_modules" / ".bin" / "promptfoo"
    if not binary.exists():
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=PROMPTFOO_DIR,
                       env=env, check=True)
    probe = ["node", "-e", "new (require('better-sqlite3'))(':memory:')"]
    if subprocess.run(probe, cwd=PROMPTFOO_DIR, capture_output=True).returncode != 0:
        nodedir = ["--nodedir=/usr"] if Path("/usr/include/node/node.h").exists() else []
        subprocess.run(["npm", "rebuild", "better-sqlite3", *nodedir], cwd=PROMPTFOO_DIR, env=env, check=True)
        subprocess.run(probe, cwd=PROMPTFOO_DIR, check=True)
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True).stdout
    if version.strip() != PROMPTFOO_VERSION:
        sys.exit(f"promptfoo {version.strip()} installed, {PROMPTFOO_VERSION} expected: remove "
                 f"{PROMPTFOO_DIR / 'node_modules'} and run --setup again")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", action="store_true", help="install Inspect AI and promptfoo (see above) and stop")
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
