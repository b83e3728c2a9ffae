"""Benchmark: Celery's own cost per task in the embedded mode, with nothing of afpbench's inside the task.

No-op tasks published in one batch onto the embedded worker (kombu's in-memory transport, the thread
pool, acks_late), `--tasks` of them, each `--rounds` times in a fresh process: wall and CPU per task. What
a cell costs beyond this is afpbench's own work (execution.py and below); see docs/PERFORMANCE.md.

    python benchmarks/bench_task_floor.py [--tasks 2000] [--threads 50] [--rounds 3] [--python OTHER] [--out DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

from harness import afp_env, emit, machine
from versions import add_version_options, probe_rounds

PROBE = """
import json, sys, threading, time
from afpbench.workers.celery_app import app, publish
from afpbench.workers.embedded import embedded_worker
tasks, threads = int(sys.argv[1]), int(sys.argv[2])
done = threading.Semaphore(0)

@app.task(name="bench.noop", acks_late=True)
def noop(i):
    done.release()

with embedded_worker(threads):
    wall, cpu = time.perf_counter(), time.process_time()
    publish([("bench.noop", [i], "control") for i in range(tasks)])
    for _ in range(tasks):
        done.acquire()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"wall_ms_per_task": wall / tasks * 1e3, "cpu_ms_per_task": cpu / tasks * 1e3}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=50)
    add_version_options(ap, rounds=3)
    args = ap.parse_args()
    before = machine()
    with tempfile.TemporaryDirectory(prefix="afp-floor-") as tmp:
        runs = list(probe_rounds(args, PROBE, [str(args.tasks), str(args.threads)],
                                 env_of=lambda name, i: afp_env(f"sqlite:///{tmp}/{name}-{i}.db")))
    medians = {name: {k: round(statistics.median(r[k] for r in runs if r["code"] == name), 3)
                      for k in ("wall_ms_per_task", "cpu_ms_per_task")}
               for name in dict.fromkeys(r["code"] for r in runs)}
    emit("task_floor", {"machine_before": before, "tasks": args.tasks, "threads": args.threads, "runs": runs,
                        "medians": medians}, args.out)


if __name__ == "__main__":
    main()
