"""Benchmark: what gating the fixtures while the calls run (an "in-run gate") would give the whole command.

afpbench gates every fixture before the sweep exists, so a first run's parse and gate come before the
first call. This measures, in one sitting and without building it, what moving the gate beside the calls
could save: per round, a cold `afpbench run` (cache off: parse and gate before the sweep), a warm one (the
prepared-fixture cache holds every parse and report: neither is done), and a warm one beside one more
process that gates the same fixtures (already parsed), started when the warm run alone had its sweep
written (the earliest an in-run gate could start). An in-run gate still parses before the sweep (a cell
row needs its fixture's id, version and risk), so its whole command is about the parse (on two
processes) plus the longer of the warm run beside the gate and the gate's own end. SIMULATED answers
(`afpbench sim --plain`).

    python benchmarks/bench_gate_overlap.py [--prompts 1000] [--latency-ms 0] [--rounds 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from bench_command import run_once
from harness import REPO, compile_bytecode, emit, machine, make_fixtures, ready_sqlite, sim_process, write_spec

# Parses the fixtures, says so, waits for "go", gates every one on this process, prints its times.
GATE_PROBE = r"""
import json, sys, time
from afpbench.fixtures.loader import load_fixtures
from afpbench.reference.loader import load_instructions, load_judge_prompt
from afpbench.workers.sweeps.gate_run import fixture_gate
started = time.process_time()
fixtures = load_fixtures(sys.argv[1])
parse_cpu_s = time.process_time() - started
gate = fixture_gate(load_instructions(), load_judge_prompt())
print("parsed", flush=True)
sys.stdin.readline()
wall, cpu = time.monotonic(), time.process_time()
for fx in fixtures:
    gate(fx)
print(json.dumps({"gate_wall_s": time.monotonic() - wall, "gate_cpu_s": time.process_time() - cpu,
                  "parse_cpu_s": parse_cpu_s}), flush=True)
"""


def warm_run_beside_gate(python: str, spec: Path, db: str, threads: int, cache: str, fixtures: Path,
                         gate_after_s: float) -> dict:
    """A warm run, and the gate of every fixture in another process from `gate_after_s` into it."""
    gate = subprocess.Popen([python, "-c", GATE_PROBE, str(fixtures)], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert gate.stdin and gate.stdout
    if gate.stdout.readline().strip() != "parsed":
        raise RuntimeError("the gate process did not parse the fixtures")

    def go() -> None:
        gate.stdin.write("go\n")
        gate.stdin.flush()

    timer = threading.Timer(gate_after_s, go)
    timer.start()
    run = run_once(python, spec, db, threads, cache)
    timer.join()
    figures = json.loads(gate.stdout.readline())
    gate.wait(timeout=600)
    return {"run": run, "gate_after_s": gate_after_s, **{k: round(v, 2) for k, v in figures.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--latency-ms", type=float, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    before = machine()
    python = compile_bytecode(sys.executable)
    runs = []
    with tempfile.TemporaryDirectory(prefix="afp-bench-") as tmp:
        work = Path(tmp)
        make_fixtures(work / "fixtures", args.prompts)
        with sim_process(args.latency_ms, log=work / "sim.log") as sim_url:
            spec = write_spec(work / "spec.yaml", sim_url, work / "fixtures")
            warm = str(work / "warm")
            run_once(python, spec, ready_sqlite(work / "prime.db"), args.threads, warm)  # fills the cache
            for i in range(args.rounds):
                cold = run_once(python, spec, ready_sqlite(work / f"cold-{i}.db"), args.threads, "off")
                alone = run_once(python, spec, ready_sqlite(work / f"warm-{i}.db"), args.threads, warm)
                sweep_written = alone["machine_cpu"]["before_sweep"]["wall_s"]
                beside = warm_run_beside_gate(python, spec, ready_sqlite(work / f"beside-{i}.db"), args.threads,
                                              warm, work / "fixtures", sweep_written)
                # The parse an in-run gate keeps before the sweep, on the two processes gate_run.py uses.
                parse_s = beside["parse_cpu_s"] / 2
                figures = {
                    "cold_wall_s": cold["wall_s"], "cold_outside_calls_s": cold["outside_calls_s"],
                    "warm_wall_s": alone["wall_s"], "warm_beside_gate_wall_s": beside["run"]["wall_s"],
                    "gate_beside_wall_s": beside["gate_wall_s"], "gate_cpu_s": beside["gate_cpu_s"],
                    "parse_cpu_s": beside["parse_cpu_s"],
                    "in_run_gate_wall_estimate_s": round(parse_s + max(beside["run"]["wall_s"],
                                                                       sweep_written + beside["gate_wall_s"]), 2),
                    "in_run_gate_outside_calls_estimate_s": round(parse_s + beside["run"]["outside_calls_s"], 2),
                }
                runs.append({"round": i, "cold": cold, "warm": alone, "warm_beside_gate": beside, "figures": figures})
                print(figures, file=sys.stderr, flush=True)
    medians = {k: statistics.median(r["figures"][k] for r in runs) for k in runs[0]["figures"]}
    emit("gate_overlap", {"machine_before": before, "prompts": args.prompts, "latency_ms": args.latency_ms,
                          "threads": args.threads, "runs": runs, "medians": medians}, args.out)


if __name__ == "__main__":
    main()
