"""Benchmark: Celery's own cost per task in the embedded mode, with nothing of afpbench's inside the task.

No-op tasks published in one batch onto the embedded worker (kombu's in-memory transport, the thread
pool, acks_late), `--tasks` of them, each `--rounds` times in a fresh process: wall and CPU per task. What
a cell costs beyond this is afpbench's own work (execution.py and below); see docs/PERFORMANCE.md.

`--sleep-ms S` makes each task sleep S ms (a model call's wait, no CPU): the ideal is then threads / S tasks
a second, and `share_of_ideal` shows what a thread loses between its tasks (taking the next message).

    python benchmarks/bench_task_floor.py [--tasks 2000] [--threads 50] [--sleep-ms 0] [--rounds 3]
                                          [--python OTHER] [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile

from harness import afp_env, emit, machine
from versions import add_version_options, medians_by_code, probe_rounds

PROBE = """
import json, sys, threading, time
from afpbench.workers.celery_app import app, publish
from afpbench.workers.embedded import embedded_worker
tasks, threads, sleep_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000
done = threading.Semaphore(0)

@app.task(name="bench.noop", acks_late=True)
def noop(i):
    if sleep_s:
        time.sleep(sleep_s)
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
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    add_version_options(ap, rounds=3)
    args = ap.parse_args()
    before = machine()
    with tempfile.TemporaryDirectory(prefix="afp-floor-") as tmp:
        runs = list(probe_rounds(args, PROBE, [str(args.tasks), str(args.threads), str(args.sleep_ms)],
                                 env_of=lambda name, i: afp_env(f"sqlite:///{tmp}/{name}-{i}.db")))
    if args.sleep_ms:
        ideal_ms = args.sleep_ms / args.threads  # wall a task with every thread sleeping all the time
        for run in runs:
            run["share_of_ideal"] = round(ideal_ms / run["wall_ms_per_task"], 3)
    keys = ("wall_ms_per_task", "cpu_ms_per_task", *(("share_of_ideal",) if args.sleep_ms else ()))
    medians = medians_by_code(runs, keys, digits=3)
    emit("task_gap" if args.sleep_ms else "task_floor",
         {"machine_before": before, "tasks": args.tasks, "threads": args.threads, "sleep_ms": args.sleep_ms,
          "runs": runs, "medians": medians}, args.out)


if __name__ == "__main__":
    main()
