"""Benchmark: does one distributed worker hold the requests in flight it is told to?

    .venv/bin/python benchmarks/bench_worker_inflight.py [--prompts 1000] [--concurrency 50]
        [--latency-ms 200] [--rounds 2] [--baseline PATH] [--out benchmarks/results]

One `afpbench worker --concurrency C` (threads pool) on Redis (AFP_BENCH_REDIS, default DB 13, flushed)
and a throwaway PostgreSQL database, answering pings before the clock starts; then `afpbench run` of a
sweep of P prompts (condition A, no judges) against benchmarks/mock_openai.py at the given latency. The
mock counts the requests in flight at each moment (in its own process): the peak, the time-weighted
mean and median from the first arrival to the last answer, and the share of that time spent at C or
more. Rule read: what the worker is told to hold in flight (C), it holds. All answers are SIMULATED.

--baseline PATH: a folder holding an `afpbench` package of another version (its api, workers, scoring,
fixtures and reference folders, e.g. symlinks into `git archive` of an older commit): each round then runs
that version's worker first and this one's second (same mock, same sweep), so both are read in one
sitting on the same machine load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from harness import (
    AFPBENCH,
    REPO,
    compile_bytecode,
    distributed_services,
    emit,
    machine,
    make_fixtures,
    mock_process,
    mock_reset,
    mock_stats,
    run_json,
    tree_cpu_s,
    workers,
    write_spec,
)


def _weighted_quantile(seconds_at: dict[str, float], q: float) -> int:
    """The in-flight count below which a share `q` of the time was spent."""
    total = sum(seconds_at.values())
    running = 0.0
    for count, seconds in sorted(((int(n), s) for n, s in seconds_at.items())):
        running += seconds
        if running >= q * total:
            return count
    return max(int(n) for n in seconds_at)


def one_run(spec: Path, concurrency: int, work: Path, tag: str, mock_url: str, processes: int = 1,
            code: Path | None = None) -> dict:
    """One worker and one `afpbench run`; `code`: the worker's afpbench from that folder instead."""
    with ExitStack() as stack:
        _, env = stack.enter_context(distributed_services())
        if code is not None:
            env = {**env, "PYTHONPATH": str(code)}
        (worker,) = stack.enter_context(workers(env, 1, concurrency // processes, work, prefix=f"inflight{tag}",
                                                ready=True, processes=processes))
        mock_reset(mock_url)
        cpu_before = tree_cpu_s(worker.pid)
        started = time.monotonic()
        summary, _ = run_json([*AFPBENCH, "run", str(spec), "--json"], env)
        wall = time.monotonic() - started
        worker_cpu = tree_cpu_s(worker.pid) - cpu_before
    stats = mock_stats(mock_url)
    at = stats["seconds_at_in_flight"]
    measured = sum(at.values())
    at_target = sum(s for n, s in at.items() if int(n) >= concurrency)
    return {"done": summary["done"], "answers": stats["answers"], "wall_s": round(wall, 3),
            "span_s": round(stats["first_to_last_s"], 3), "peak_in_flight": stats["peak_in_flight"],
            "mean_in_flight": round(stats["mean_in_flight"], 2),
            "median_in_flight": _weighted_quantile(at, 0.5), "p10_in_flight": _weighted_quantile(at, 0.1),
            "share_of_time_at_concurrency": round(at_target / measured, 3) if measured else None,
            "worker_cpu_s": round(worker_cpu, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--latency-ms", type=float, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--processes", type=int, default=1, help="the worker's --processes (concurrency shared out)")
    ap.add_argument("--baseline", type=Path, default=None, help="another version's afpbench, run beside this one")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    compile_bytecode()
    figures: dict = {"prompts": args.prompts, "concurrency": args.concurrency, "latency_ms": args.latency_ms,
                     "machine_before": machine(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="afp-inflight-") as tmp:
        work = Path(tmp)
        make_fixtures(work / "fixtures", args.prompts)
        with mock_process(latency_ms=args.latency_ms) as (mock_url, _):
            spec = write_spec(work / "spec.yaml", mock_url, work / "fixtures")
            for rnd in range(args.rounds):
                for code in ([args.baseline] if args.baseline else []) + [None]:
                    run = one_run(spec, args.concurrency, work, f"{rnd}{'b' if code else ''}", mock_url,
                                  args.processes, code)
                    run["code"] = "baseline" if code else "this"
                    print(f"round {rnd + 1}: {json.dumps(run)}", flush=True)
                    figures["runs"].append(run)
    keys = ("peak_in_flight", "mean_in_flight", "median_in_flight", "p10_in_flight", "share_of_time_at_concurrency",
            "span_s", "wall_s", "worker_cpu_s")
    for code in ("baseline", "this"):
        runs = [r for r in figures["runs"] if r["code"] == code]
        if runs:
            figures[f"median_{code}"] = {k: statistics.median(r[k] for r in runs) for k in keys}
    figures["ideal_span_s"] = round(args.prompts / args.concurrency * args.latency_ms / 1000, 3)
    emit(f"worker_inflight_{args.latency_ms:g}ms", figures, args.out)


if __name__ == "__main__":
    _ = REPO  # the harness puts the repository on the path for the commands it runs
    main()
