"""Benchmark: the whole `afpbench run` command in embedded mode, start to exit, beside its in-run span.

One 1,000-prompt sweep (benchmark copies of P01, condition A, `--threads 50`) against `afpbench sim
--plain` in its own process; per run: wall time, CPU seconds of the command's process (user + system,
from wait4), the span (sweep row -> last result) and wall - span, the fixed cost outside the calls
(imports, validity gate, seal, cell rows, the worker's start and stop, aggregation, the summary).
`--python` runs the same under a second interpreter (another checkout), interleaved, so two code versions
are compared in one sitting; the load average is recorded before each run. SIMULATED answers.

`--cache` says what the prepared-fixture cache (workers/sweeps/prepared_cache.py) holds when a run
starts: `off` (no cache, as before it existed), `cold` (an empty cache folder per run: a first run, which
also fills it) or `warm` (a folder filled by one untimed run beforehand: every later run of the same
fixture set). Several are interleaved within each round. A checkout without the cache ignores the setting.

The whole machine's CPU (/proc/stat, every 50 ms) is split at the sweep row's creation and its last result:
before the sweep (imports, parse and gate, seal), the span and after it, each as wall seconds, core-seconds
busy and core-seconds the cores left idle. The span's idle core-seconds are what an in-run gate (fixtures
gated while the calls run) could use; `--latency-ms` gives the sim's answers a delay like a real call.

`--without` runs the command without pieces of its start-up machinery, each in turn, every such run between
two runs of the full command: `cache` (AFP_CACHE_DIR=off), `pair` (AFP_EMBEDDED_PROCESSES=1) or one of
benchmarks/without/sitecustomize.py, which switches a piece off as its module is imported. The result's
"without" holds, per piece and cache setting, the median ratio of its wall, peak RSS and CPU to the mean
of its two neighbours (above 1: what the piece buys).

    python benchmarks/bench_command.py [--prompts 1000] [--models 1] [--threads 50] [--rounds 3]
                                       [--python OTHER] [--cache off,cold,warm] [--without -,PIECE,...]
                                       [--latency-ms 0] [--out DIR]
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

from harness import (
    REPO,
    MachineCpu,
    afp_env,
    emit,
    machine,
    make_fixtures,
    ready_sqlite,
    sim_process,
    sweep_span,
    write_spec,
)
from versions import add_version_options, interpreters

WITHOUT_DIR = Path(__file__).parent / "without"
# Pieces of the start-up machinery with a setting of their own; any other goes to without/sitecustomize.py.
BY_SETTING = {"cache": {"AFP_CACHE_DIR": "off"}, "pair": {"AFP_EMBEDDED_PROCESSES": "1"}}


def without_env(piece: str) -> dict[str, str]:
    """The environment that runs the command without `piece` ("-": nothing removed)."""
    if piece == "-":
        return {}
    if piece in BY_SETTING:
        return BY_SETTING[piece]
    return {"AFP_BENCH_WITHOUT": piece, "PYTHONPATH": f"{WITHOUT_DIR}{os.pathsep}{REPO}"}


def run_once(python: str, spec: Path, db: str, threads: int, cache: str = "off", without: str = "-") -> dict:
    load = os.getloadavg()[0]
    # Files, not pipes: the summary of a 100-model sweep is larger than a pipe holds, and wait4 (for the
    # command's own CPU and peak RSS) must not wait on a command blocked writing it.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, MachineCpu() as cpu:
        started, started_epoch = time.monotonic(), time.time()
        env = afp_env(db, **{"AFP_CACHE_DIR": cache, **without_env(without)})
        proc = subprocess.Popen([python, "-m", "afpbench.api.cli", "run", str(spec), "--threads", str(threads),
                                 "--json"], cwd=REPO, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall, ended_epoch = time.monotonic() - started, time.time()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode not in (0, 3):  # 3: cells excluded for configuration (none here)
        raise RuntimeError(stderr[-3000:])
    sweep_id = json.loads(stdout)["sweep_id"]
    span = sweep_span(db, sweep_id)
    created, last = span["created_epoch"], span["last_epoch"]
    phases = {name: {"wall_s": round(b - a, 2), "busy_core_s": round(cpu.busy_s(a, b), 2),
                     "idle_core_s": round(cpu.idle_s(a, b), 2)}
              for name, a, b in (("before_sweep", started_epoch, created), ("span", created, last),
                                 ("after_span", last, ended_epoch))}
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "span_s": round(span["span_s"], 2), "outside_calls_s": round(wall - span["span_s"], 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "cells_with_result": span["cells_with_result"],
            "load_1m_before": round(load, 2), "machine_cpu": phases}


def _medians(runs: list[dict]) -> dict:
    """The median of each figure of `run_once` over runs of one code version and cache setting."""
    cpu = [r["machine_cpu"] for r in runs]
    return {**{k: statistics.median(r[k] for r in runs)
               for k in ("wall_s", "cpu_s", "span_s", "outside_calls_s", "peak_rss_mb")},
            "machine_cpu": {phase: {k: statistics.median(c[phase][k] for c in cpu) for k in cpu[0][phase]}
                            for phase in cpu[0]}}


def _schedule(pieces: list[str], caches: list[str], round_: int) -> list[tuple[str, str, str]]:
    """(without, cache setting, sequence) of each run of a round. Without pieces: one run per cache setting.
    With pieces: for each cache setting (the sequence) the full command before and after each piece's run,
    the pieces rotated by one each round, so every "without" run has full runs on either side
    (`_without_ratios`). The `cache` piece runs with the cache off in each sequence."""
    if not pieces:
        return [("-", cache, cache) for cache in caches]
    turn = round_ % len(pieces)
    order = pieces[turn:] + pieces[:turn]
    runs = []
    for cache in caches:
        runs.append(("-", cache, cache))
        for piece in order:
            runs += [(piece, "off" if piece == "cache" else cache, cache), ("-", cache, cache)]
    return runs


def _without_ratios(runs: list[dict]) -> dict[str, dict]:
    """Per piece and sequence: the median over rounds of (without) / (the mean of the full runs either side
    of it), for wall and peak RSS; above 1 means the piece buys that share."""
    ratios: dict[str, dict[str, list[float]]] = {}
    for at, run in enumerate(runs):
        if run["without"] == "-":
            continue
        full = [runs[at - 1], runs[at + 1]]
        assert all(r["without"] == "-" and r["code"] == run["code"] for r in full)
        key = f"{run['code']} without {run['without']} vs {run['sequence']}"
        for figure in ("wall_s", "peak_rss_mb", "cpu_s"):
            ratios.setdefault(key, {}).setdefault(figure, []).append(
                run[figure] / statistics.mean(r[figure] for r in full))
    return {key: {"rounds": len(by["wall_s"]),
                  **{f"{figure}_ratio": round(statistics.median(values), 3) for figure, values in by.items()},
                  "wall_s_ratio_each_round": [round(v, 3) for v in by["wall_s"]]}
            for key, by in ratios.items()}


def _label(code: str, without: str, cache: str) -> str:
    return f"{code} {cache}" if without == "-" else f"{code} without {without} {cache}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--models", type=int, default=1,
                    help="models without a declared rate, each asked every prompt: cells = prompts x models")
    ap.add_argument("--latency-ms", type=float, default=0, help="the sim's delay before each answer")
    ap.add_argument("--cache", default="off", help="comma-separated: off, cold, warm (default off)")
    ap.add_argument("--without", default="-",
                    help="comma-separated pieces of start-up machinery to run without, each in turn beside the "
                         "others: - (none), cache, pair, or a piece of without/sitecustomize.py (default -)")
    add_version_options(ap, rounds=3)
    args = ap.parse_args()
    caches = args.cache.split(",")
    if not caches or not set(caches) <= {"off", "cold", "warm"}:
        ap.error(f"--cache: expected off, cold or warm (comma-separated), got {args.cache!r}")
    pieces = [w for w in args.without.split(",") if w != "-"]
    before = machine()
    pythons = interpreters(args)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="afp-bench-") as tmp:
        work = Path(tmp)
        make_fixtures(work / "fixtures", args.prompts)
        with sim_process(args.latency_ms, log=work / "sim.log") as sim_url:
            spec = write_spec(work / "spec.yaml", sim_url, work / "fixtures", models=args.models)
            if "warm" in caches:  # one untimed run per interpreter fills its warm folder
                for name, python in pythons.items():
                    run_once(python, spec, ready_sqlite(work / f"{name}-prime.db", python), args.threads,
                             str(work / f"{name}-warm"))
            for i in range(args.rounds):
                for name, python in pythons.items():
                    for n, (without, cache, sequence) in enumerate(_schedule(pieces, caches, i)):
                        folder = {"off": "off", "cold": str(work / f"{name}-{i}-{n}-cold"),
                                  "warm": str(work / f"{name}-warm")}[cache]
                        db = ready_sqlite(work / f"{name}-{i}-{n}.db", python)
                        runs.append({"code": name, "without": without, "cache": cache, "sequence": sequence,
                                     "round": i, **run_once(python, spec, db, args.threads, folder, without)})
                        print(runs[-1], file=sys.stderr, flush=True)
    configs = dict.fromkeys((r["without"], r["cache"]) for r in runs)
    medians = {_label(name, without, cache): _medians([r for r in runs if r["code"] == name
                                                         and r["without"] == without and r["cache"] == cache])
               for name in pythons for without, cache in configs}
    emit("command", {"machine_before": before, "prompts": args.prompts, "models": args.models, "threads": args.threads,
                     "latency_ms": args.latency_ms, "runs": runs, "medians": medians,
                     **({"without": _without_ratios(runs)} if pieces else {})}, args.out)


if __name__ == "__main__":
    main()
