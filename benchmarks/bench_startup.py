"""Benchmark: how long the everyday CLI commands take from the shell prompt to their output.

    python benchmarks/bench_startup.py [--afpbench PATH] [--runs 5] [--db sqlite:///...] [--out DIR]

Each command runs as a fresh subprocess (as a user types it), `--runs` times; the table shows the
median and the fastest wall time. Without `--db` a throwaway SQLite database gets one demo sweep
(`afpbench run --json`, simulated) first so `status`, `sweeps`, `cells` and `show` have something to
read. A command this afpbench does not have is shown as "n/a". Not a pytest test; the machine is
shared, so read the median, not one run. The demo's output is SIMULATED.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _default_afpbench() -> str:
    beside = Path(sys.executable).with_name("afpbench")
    return str(beside) if beside.exists() else "afpbench"


def _prepare(afpbench: str, env: dict[str, str]) -> tuple[str, int]:
    """One demo sweep in the database; its id and the id of one of its cells."""
    out = subprocess.run([afpbench, "run", "--json"], env=env, capture_output=True, text=True, check=False)
    if out.returncode not in (0, 3):
        sys.exit(f"demo run failed ({out.returncode}): {out.stderr.strip()[-300:]}")
    sweep_id = json.loads(out.stdout)["sweep_id"]
    from sqlalchemy import create_engine, text  # only the benchmark reads the file directly

    with create_engine(env["AFP_DATABASE_URL"]).connect() as conn:
        cell = conn.execute(text("select min(id) from cell where sweep_id = :s"), {"s": sweep_id}).scalar_one()
    return sweep_id, int(cell)


def _time(argv: list[str], env: dict[str, str], runs: int) -> tuple[list[float], int, str]:
    times, code, err = [], 0, ""
    for _ in range(runs):
        started = time.perf_counter()
        out = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - started)
        code, err = out.returncode, out.stderr
    return times, code, err


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--afpbench", default=_default_afpbench())
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--db", default=None, help="an existing database with a sweep (default: a demo in a temp dir)")
    ap.add_argument("--out", type=Path, default=None, help="also write <out>/startup.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "AFP_DATABASE_URL": args.db or f"sqlite:///{tmp}/bench.db"}
        env.pop("AFP_BROKER_URL", None)
        sweep_id, cell_id = _prepare(args.afpbench, env)
        commands = {
            "--help": ["--help"],
            "status": ["status", sweep_id],
            "show": ["show", str(cell_id)],
            "sweeps": ["sweeps"],
            "cells": ["cells", sweep_id],
        }
        rows = {}
        for name, argv in commands.items():
            times, code, err = _time([args.afpbench, *argv], env, args.runs)
            missing = code == 2 and "No such command" in err
            rows[name] = None if missing else {"median_s": round(statistics.median(times), 3),
                                               "min_s": round(min(times), 3), "exit": code}
    print(f"{'command':<10} {'median s':>9} {'min s':>7} {'exit':>5}   ({args.runs} runs each, {os.cpu_count()} cores)")
    for name, row in rows.items():
        if row is None:
            print(f"{name:<10} {'n/a':>9}")
        else:
            print(f"{name:<10} {row['median_s']:>9.3f} {row['min_s']:>7.3f} {row['exit']:>5}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "startup.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
