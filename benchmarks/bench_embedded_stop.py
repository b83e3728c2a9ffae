"""Benchmark: how long leaving `embedded_worker` takes once a sweep is done (the worker's stop), and its
start, each `--rounds` times in a fresh process; `--python` also runs another checkout's interpreter,
interleaved. The stop used to wait for Celery's 2-second drain cycle, once or twice.

    python benchmarks/bench_embedded_stop.py [--threads 50] [--rounds 5] [--python OTHER] [--out DIR]
"""

from __future__ import annotations

import argparse

from harness import emit, machine
from versions import add_version_options, medians_by_code, probe_rounds

PROBE = """
import json, sys, time
from afpbench.workers.embedded import embedded_worker
t0 = time.monotonic()
with embedded_worker(int(sys.argv[1])):
    t1 = time.monotonic()
    time.sleep(0.5)  # the consumer is in its drain loop, as at the end of a sweep
    t2 = time.monotonic()
print(json.dumps({"start_s": t1 - t0, "stop_s": time.monotonic() - t2}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=50)
    add_version_options(ap, rounds=5)
    args = ap.parse_args()
    before = machine()
    runs = [{**run, "start_s": round(run["start_s"], 3), "stop_s": round(run["stop_s"], 3)}
            for run in probe_rounds(args, PROBE, [str(args.threads)], timeout=120)]
    medians = medians_by_code(runs, ("start_s", "stop_s"))
    emit("embedded_stop", {"machine_before": before, "threads": args.threads, "runs": runs, "medians": medians},
         args.out)


if __name__ == "__main__":
    main()
