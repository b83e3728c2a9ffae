"""Benchmark: four harnesses side by side, interleaved, on the same prompts and the same mock model.

    .venv/bin/python benchmarks/bench_side_by_side.py [--prompts 1000] [--concurrency 50]
        [--latencies 0,200] [--rounds 3] [--harnesses embedded,distributed,inspect,promptfoo]
        [--out benchmarks/results]

Per latency one mock server (benchmarks/mock_openai.py: uvicorn, its own process) answers every
harness; each round runs every harness once, the order rotated by one per round so none always runs
first or last on a warm machine. The harnesses:

- afpbench embedded: `afpbench run SPEC --threads C --json` (SQLite, in-process worker), with the
  prepared-fixture cache off, so every fixture is parsed and gated as on a first run;
- afpbench embedded-warm (only when named in --harnesses): the same with the cache filled by one untimed
  run beforehand, as every later run of the same fixture set finds it;
- afpbench distributed: one `afpbench worker --concurrency C` (threads) on Redis DB 13 and a throwaway
  PostgreSQL database, started and answering pings before the clock starts, and the `afpbench run` command;
- afpbench distributed-2 (only when named in --harnesses): the same with `afpbench worker --processes 2
  --concurrency C/2`, one command using both cores as the embedded mode's two processes do;
- Inspect AI: `inspect eval benchmarks/inspect_task.py` (its own venv; benchmarks/requirements.txt);
- promptfoo: `promptfoo eval` (benchmarks/promptfoo/, pinned; the prompt is a JS function returning
  the same messages), writing its results to its own SQLite database as it does by default.

Every harness sends the exact condition-A messages afpbench renders, with concurrency C, no cache, and
stores every output. Figures per run: the command's wall seconds; the mock's first -> last answer
(server-side span); CPU seconds per prompt of the command's process tree (and of the worker process
for distributed), of PostgreSQL backends of the run's database and of Redis (shared with other users
of the machine: an upper bound), and of the mock; the load average before and after. Medians per
harness over the rounds, and the ratio distributed / embedded throughput (prompts per wall second and
per span second). All answers are SIMULATED.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import yaml
from harness import (
    AFPBENCH,
    INSPECT_VENV,
    PROMPTFOO_DIR,
    REPO,
    CpuSampler,
    afp_env,
    compile_bytecode,
    distributed_services,
    emit,
    machine,
    make_fixtures,
    mock_process,
    mock_reset,
    mock_stats,
    pid_cpu_s,
    ready_sqlite,
    tree_cpu_s,
    workers,
    write_prompts,
    write_spec,
)

HERE = Path(__file__).resolve().parent
PROMPTFOO = PROMPTFOO_DIR / "node_modules" / ".bin" / "promptfoo"


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Run a command to its end: (wall s, CPU s of its process tree, stdout)."""
    cpu, started = _children_cpu_s(), time.monotonic()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    wall, cpu = time.monotonic() - started, _children_cpu_s() - cpu
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, cpu, proc.stdout


def promptfoo_config(path: Path, prompts: Path, mock_url: str) -> Path:
    tests = [{"vars": {"messages_json": json.dumps(json.loads(line)["messages"])}}
             for line in prompts.read_text().splitlines() if line.strip()]
    path.write_text(yaml.safe_dump({
        "description": "afpbench side-by-side benchmark (SIMULATED answers)",
        "prompts": [f"file://{PROMPTFOO_DIR / 'prompt.js'}"],
        "providers": [{"id": "openai:chat:sim-plain", "config": {"apiBaseUrl": mock_url,
                                                               "apiKey": "dummy-key-not-secret"}}],
        "tests": tests,
    }))
    return path


def run_promptfoo(config: Path, concurrency: int, work: Path, tag: str) -> dict:
    home = work / f"promptfoo-{tag}"
    env = {**os.environ, "PROMPTFOO_CONFIG_DIR": str(home), "PROMPTFOO_DISABLE_TELEMETRY": "1",
           "PROMPTFOO_DISABLE_UPDATE": "1", "PROMPTFOO_DISABLE_TEMPLATING": "true",
           "OPENAI_API_KEY": "dummy-key-not-secret"}
    wall, cpu, _ = _timed([str(PROMPTFOO), "eval", "-c", str(config), f"--max-concurrency={concurrency}",
                           "--no-cache", "--no-progress-bar", "--no-table"], env, work)
    return {"wall_s": wall, "cpu_s": cpu}


def run_inspect(mock_url: str, prompts: Path, concurrency: int, work: Path, tag: str) -> dict:
    log_dir = work / f"inspect-{tag}"
    env = {**os.environ, "OPENAI_BASE_URL": mock_url, "OPENAI_API_KEY": "dummy-key-not-secret",
           "AFP_BENCH_PROMPTS": str(prompts), "INSPECT_LOG_DIR": str(log_dir)}
    # The task path is relative (cwd benchmarks/): Inspect refuses absolute ones.
    wall, cpu, _ = _timed([str(INSPECT_VENV / "bin" / "inspect"), "eval", "inspect_task.py",
                           "--model", "openai/sim-plain", "-M", "responses_api=false",
                           f"--max-connections={concurrency}", f"--max-samples={concurrency}",
                           "--display=none", f"--log-dir={log_dir}"], env, HERE)
    return {"wall_s": wall, "cpu_s": cpu}


def run_embedded(spec: Path, concurrency: int, work: Path, tag: str, cache: str = "off") -> dict:
    """`afpbench run`; `cache`: the prepared-fixture cache folder (harness `embedded-warm`), else none."""
    env = afp_env(ready_sqlite(work / f"embedded-{tag}.db"), AFP_CACHE_DIR=cache)
    wall, cpu, out = _timed([*AFPBENCH, "run", str(spec), "--threads", str(concurrency), "--json"], env, REPO)
    return {"wall_s": wall, "cpu_s": cpu, "done": json.loads(out)["done"]}


def run_distributed(spec: Path, concurrency: int, work: Path, tag: str, processes: int = 1) -> dict:
    """One `afpbench worker --processes P --concurrency C/P` (so C calls in flight in all, as embedded)."""
    with ExitStack() as stack:
        db, env = stack.enter_context(distributed_services())
        (worker,) = stack.enter_context(workers(env, 1, concurrency // processes, work, prefix=f"side{tag}p{processes}",
                                                ready=True, processes=processes))
        services = CpuSampler(db_name=db.rsplit("/", 1)[1])
        stack.enter_context(services)
        worker_cpu = tree_cpu_s(worker.pid)
        wall, cpu, out = _timed([*AFPBENCH, "run", str(spec), "--json"], env, REPO)
        worker_cpu = tree_cpu_s(worker.pid) - worker_cpu
    return {"wall_s": wall, "cpu_s": cpu + worker_cpu, "worker_cpu_s": worker_cpu,
            "postgres_cpu_s": services.postgres_s, "redis_cpu_s": services.redis_s,
            "done": json.loads(out)["done"]}


def _summary(runs: list[dict], prompts: int, latency_ms: float, concurrency: int) -> dict:
    def med(key: str) -> float | None:
        values = [r[key] for r in runs if r.get(key) is not None]
        return round(statistics.median(values), 3) if values else None

    out = {"rounds": len(runs), "wall_s": med("wall_s"), "span_s": med("span_s"),
           "cpu_ms_per_prompt": med("cpu_ms_per_prompt"), "postgres_cpu_ms_per_prompt": med("postgres_ms_per_prompt"),
           "redis_cpu_ms_per_prompt": med("redis_ms_per_prompt"), "mock_cpu_ms_per_prompt": med("mock_ms_per_prompt"),
           "answers": [r["answers"] for r in runs], "loadavg_1m": [r["loadavg_1m_before"] for r in runs]}
    if latency_ms and out["span_s"]:
        out["share_of_ideal_span"] = round(prompts / out["span_s"] / (concurrency / (latency_ms / 1000)), 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--latencies", default="0,200")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--harnesses", default="embedded,distributed,inspect,promptfoo")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    compile_bytecode()
    harnesses = args.harnesses.split(",")
    c = args.concurrency
    figures: dict = {"prompts": args.prompts, "concurrency": c, "rounds": args.rounds,
                     "machine_before": machine(), "by_latency": {}}
    with tempfile.TemporaryDirectory(prefix="afp-side-") as tmp:
        work = Path(tmp)
        make_fixtures(work / "fixtures", args.prompts)
        prompts = work / "prompts.jsonl"
        write_prompts(work / "fixtures", prompts)
        for latency in [float(x) for x in args.latencies.split(",")]:
            runs: dict[str, list[dict]] = {h: [] for h in harnesses}
            with mock_process(latency_ms=latency) as (mock_url, mock_pid):
                spec = write_spec(work / f"spec-{latency:g}.yaml", mock_url, work / "fixtures")
                config = promptfoo_config(work / f"promptfoo-{latency:g}.yaml", prompts, mock_url)
                warm_cache = work / "warm-cache"
                if "embedded-warm" in harnesses and not warm_cache.exists():  # one untimed run fills it
                    run_embedded(spec, c, work, "prime", str(warm_cache))
                for rnd in range(args.rounds):
                    order = harnesses[rnd % len(harnesses):] + harnesses[:rnd % len(harnesses)]
                    for name in order:
                        tag = f"{latency:g}-{rnd}"
                        mock_reset(mock_url)
                        load, mock_cpu = os.getloadavg()[0], pid_cpu_s(mock_pid)
                        if name == "embedded":
                            r = run_embedded(spec, c, work, tag)
                        elif name == "embedded-warm":
                            r = run_embedded(spec, c, work, f"warm-{tag}", str(warm_cache))
                        elif name == "distributed":
                            r = run_distributed(spec, c, work, tag)
                        elif name == "distributed-2":
                            r = run_distributed(spec, c, work, tag, processes=2)
                        elif name == "inspect":
                            r = run_inspect(mock_url, prompts, c, work, tag)
                        else:
                            r = run_promptfoo(config, c, work, tag)
                        stats = mock_stats(mock_url)
                        r.update(span_s=stats["first_to_last_s"], answers=stats["answers"],
                                 mock_ms_per_prompt=1000 * (pid_cpu_s(mock_pid) - mock_cpu) / args.prompts,
                                 cpu_ms_per_prompt=1000 * r["cpu_s"] / args.prompts,
                                 loadavg_1m_before=round(load, 2), loadavg_1m_after=round(os.getloadavg()[0], 2))
                        for svc in ("postgres", "redis"):
                            if f"{svc}_cpu_s" in r:
                                r[f"{svc}_ms_per_prompt"] = 1000 * r[f"{svc}_cpu_s"] / args.prompts
                        runs[name].append(r)
                        print(f"latency {latency:g} ms, round {rnd + 1}, {name}: "
                              f"{json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()})}",
                              flush=True)
                        figures["by_latency"][f"{latency:g}ms"] = _row(runs, args.prompts, latency, c)
                        if args.out:  # so far, after every run: a long sitting cut short keeps its figures
                            args.out.mkdir(parents=True, exist_ok=True)
                            (args.out / "side_by_side.json").write_text(
                                json.dumps({**figures, "complete": False}, indent=2))
    emit("side_by_side", {**figures, "complete": True}, args.out)


def _row(runs: dict[str, list[dict]], prompts: int, latency: float, concurrency: int) -> dict:
    row: dict = {h: {**_summary(rs, prompts, latency, concurrency), "runs": rs} for h, rs in runs.items() if rs}
    for name in ("distributed", "distributed-2"):
        if "embedded" in row and name in row:
            emb, dist, key = row["embedded"], row[name], name.replace("-", "_")
            row[f"{key}_vs_embedded_throughput_wall"] = round(emb["wall_s"] / dist["wall_s"], 3)
            if emb["span_s"] and dist["span_s"]:
                row[f"{key}_vs_embedded_throughput_span"] = round(emb["span_s"] / dist["span_s"], 3)
    return row


if __name__ == "__main__":
    main()
