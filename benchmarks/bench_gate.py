"""Benchmark: the validity gate's CPU a fixture, for each pilot fixture, in a fresh process per round.

The side-by-side's fixtures are copies of P01 alone; a real suite is mixed (text facts only, quantities,
source figures, many or few assertion examples), so this gates copies of every pilot fixture (`--copies`
each, the task made unique as the side-by-side does, so no cache serves one copy's prompt to the next) and
reports CPU milliseconds a fixture (the quickest of five batches) by pilot fixture and their mean.
`--python` also runs another checkout's interpreter, interleaved, so two code versions are compared in one
sitting.

    python benchmarks/bench_gate.py [--copies 200] [--rounds 3] [--python OTHER] [--out DIR]
"""

from __future__ import annotations

import argparse
import statistics

from harness import emit, machine
from versions import add_version_options, probe_rounds

PROBE = """
import json, sys, time
from afpbench.fixtures.loader import load_fixtures
from afpbench.reference.loader import load_instructions, load_judge_prompt
from afpbench.workers.sweeps.gate_run import fixture_gate
copies = int(sys.argv[1])
gate = fixture_gate(load_instructions(), load_judge_prompt())
figures = {}
for fx in load_fixtures():
    gate(fx)  # the sweep-wide parts (instruction texts, judge prompt terms) once, as in a sweep
    unique = [fx.model_copy(update={"task": f"{fx.task}\\nInternal reference: G{i:05d}."}) for i in range(copies)]
    batches = []
    for batch in (unique[b::5] for b in range(5)):  # the quickest fifth: a hiccup of the machine is not the code
        started = time.process_time()
        for copy in batch:
            gate(copy)
        batches.append((time.process_time() - started) / len(batch) * 1000)
    figures[fx.id] = min(batches)
print(json.dumps({"ms_a_fixture": figures}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=200)
    add_version_options(ap, rounds=3)
    args = ap.parse_args()
    before = machine()
    runs = []
    for run in probe_rounds(args, PROBE, [str(args.copies)], timeout=600):
        ms = run.pop("ms_a_fixture")
        runs.append({**run, "ms_a_fixture": {k: round(v, 3) for k, v in ms.items()},
                     "mean_ms": round(statistics.mean(ms.values()), 3)})
    medians = {}
    for name in dict.fromkeys(r["code"] for r in runs):
        mine = [r for r in runs if r["code"] == name]
        by_fixture = {fid: statistics.median(r["ms_a_fixture"][fid] for r in mine) for fid in mine[0]["ms_a_fixture"]}
        medians[name] = {"mean_ms": statistics.median(r["mean_ms"] for r in mine), **by_fixture}
    emit("gate", {"machine_before": before, "copies": args.copies, "runs": runs, "medians": medians}, args.out)


if __name__ == "__main__":
    main()
