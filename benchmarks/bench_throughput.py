"""Benchmark 1: afpbench beside Inspect AI on the same 1,000 prompts against the same local sim.

    .venv/bin/python benchmarks/bench_throughput.py [--prompts 1000] [--concurrency 50]
        [--latencies 0,200] [--modes inspect,embedded,distributed] [--out benchmarks/results]

Per latency one `afpbench sim --plain` process serves all three runs (stats reset between them):
Inspect AI (`inspect eval benchmarks/inspect_task.py`, benchmarks/.inspect-venv), afpbench embedded
(`afpbench run SPEC --threads N`, SQLite) and afpbench distributed (one `afpbench worker
--concurrency N`, Redis DB 13 + a throwaway PostgreSQL database). The afpbench side stores every raw
output and scores deterministically (judges: [], so cells end GRADER_DISPUTE). Figures: wall seconds of
the command and the in-run span (Inspect: eval stats; afpbench: sweep row -> last result), prompts/s on
the span, ratios afpbench/Inspect, and at latency > 0 the share of the ideal concurrency/latency rate.
All model output is SIMULATED.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from harness import (
    AFPBENCH,
    INSPECT_VENV,
    REPO,
    afp_env,
    compile_bytecode,
    distributed_services,
    emit,
    machine,
    make_fixtures,
    run_json,
    sim_process,
    sim_reset,
    sim_stats,
    sweep_span,
    workers,
    write_prompts,
    write_spec,
)

READ_SPAN = """
import sys, json
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1], header_only=True)
s = log.stats
print(json.dumps({"started_at": s.started_at, "completed_at": s.completed_at, "status": log.status,
                  "samples": log.results.total_samples if log.results else None,
                  "version": log.eval.packages.get("inspect_ai")}))
"""


def _iso_span(a: str, b: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def run_inspect(sim_url: str, prompts: Path, concurrency: int, work: Path) -> dict:
    log_dir = work / "inspect-logs"
    env = {**os.environ, "OPENAI_BASE_URL": sim_url, "OPENAI_API_KEY": "dummy-key-not-secret",
           "AFP_BENCH_PROMPTS": str(prompts), "INSPECT_LOG_DIR": str(log_dir)}
    # The task path is relative (cwd benchmarks/): Inspect refuses absolute ones.
    args = [str(INSPECT_VENV / "bin" / "inspect"), "eval", "inspect_task.py",
            "--model", "openai/sim-plain", "-M", "responses_api=false",  # the sim serves Chat Completions
            f"--max-connections={concurrency}", f"--max-samples={concurrency}",
            "--display=none", f"--log-dir={log_dir}"]
    started = time.monotonic()
    proc = subprocess.run(args, env=env, cwd=REPO / "benchmarks", capture_output=True, text=True,
                          timeout=3600)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"inspect eval failed:\n{proc.stderr[-3000:]}")
    log = max(log_dir.glob("*.eval"), key=lambda p: p.stat().st_mtime)
    info = json.loads(subprocess.run([str(INSPECT_VENV / "bin" / "python"), "-c", READ_SPAN, str(log)],
                                     capture_output=True, text=True, check=True).stdout)
    if info["status"] != "success":
        raise RuntimeError(f"inspect eval ended {info['status']}: see {log}")
    span = _iso_span(info["started_at"], info["completed_at"])
    return {"wall_s": round(wall, 2), "span_s": round(span, 2), "samples": info["samples"],
            "status": info["status"], "inspect_ai": info["version"]}


def run_embedded(spec: Path, concurrency: int, work: Path, tag: str) -> dict:
    db = f"sqlite:///{work / f'embedded-{tag}.db'}"
    summary, wall = run_json([*AFPBENCH, "run", str(spec), "--threads", str(concurrency), "--json"], afp_env(db))
    return {"wall_s": round(wall, 2), **_afp_figures(db, summary)}


def run_distributed(spec: Path, concurrency: int, work: Path) -> dict:
    with distributed_services() as (db, env):
        with workers(env, 1, concurrency, work, prefix="tput", ready=True) as procs:
            summary, wall = run_json([*AFPBENCH, "run", str(spec), "--json"], env)
            alive = procs[0].poll() is None
        figures = _afp_figures(db, summary)
    return {"wall_s": round(wall, 2), "worker_alive_at_end": alive, **figures}


def _afp_figures(db: str, summary: dict) -> dict:
    span = sweep_span(db, summary["sweep_id"])
    return {"span_s": round(span["span_s"], 2), "cells": summary["cells"], "done": summary["done"],
            "attempts": span["attempts"], "cells_with_result": span["cells_with_result"],
            "states": summary.get("by_state") or summary.get("counts")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--latencies", default="0,200")
    ap.add_argument("--modes", default="inspect,embedded,distributed")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    compile_bytecode()
    modes = args.modes.split(",")
    figures: dict = {"prompts": args.prompts, "concurrency": args.concurrency, "machine_before": machine(),
                     "runs": {}}
    with tempfile.TemporaryDirectory(prefix="afp-bench-") as tmp:
        work = Path(tmp)
        make_fixtures(work / "fixtures", args.prompts)
        prompts = work / "prompts.jsonl"
        write_prompts(work / "fixtures", prompts)
        for latency in [float(x) for x in args.latencies.split(",")]:
            row: dict = {}
            with sim_process(latency_ms=latency, log=work / f"sim-{latency:g}.log") as sim_url:
                spec = write_spec(work / f"spec-{latency:g}.yaml", sim_url, work / "fixtures")
                for mode in modes:
                    sim_reset(sim_url)
                    load = os.getloadavg()[0]
                    if mode == "inspect":
                        result = run_inspect(sim_url, prompts, args.concurrency, work)
                    elif mode == "embedded":
                        result = run_embedded(spec, args.concurrency, work, f"{latency:g}")
                    else:
                        result = run_distributed(spec, args.concurrency, work)
                    result["sim_requests_by_status"] = sim_stats(sim_url).get("by_status")
                    result["prompts_per_s_span"] = round(args.prompts / result["span_s"], 1)
                    result["prompts_per_s_wall"] = round(args.prompts / result["wall_s"], 1)
                    if latency > 0:
                        ideal = args.concurrency / (latency / 1000)
                        result["share_of_ideal_span"] = round(result["prompts_per_s_span"] / ideal, 3)
                    result["loadavg_1m_before"] = round(load, 2)
                    result["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
                    row[mode] = result
                    print(f"latency {latency:g} ms {mode}: {json.dumps(result)}", flush=True)
            if "inspect" in row:
                base = row["inspect"]
                for mode in ("embedded", "distributed"):
                    if mode in row:
                        row[f"ratio_{mode}_vs_inspect_span"] = round(
                            row[mode]["prompts_per_s_span"] / base["prompts_per_s_span"], 2)
                        row[f"ratio_{mode}_vs_inspect_wall"] = round(
                            row[mode]["prompts_per_s_wall"] / base["prompts_per_s_wall"], 2)
            figures["runs"][f"{latency:g}ms"] = row
    emit("throughput", figures, args.out)


if __name__ == "__main__":
    main()
