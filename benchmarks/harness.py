"""Shared plumbing of the benchmarks: machine facts, generated fixtures, the sim and worker processes,
throwaway PostgreSQL databases and Redis DB 13. Not a pytest module; nothing here asserts.

Everything the sim answers is SIMULATED (plain mode: one short fixed text per prompt).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
AFPBENCH = [sys.executable, "-m", "afpbench.api.cli"]
REDIS_URL = os.environ.get("AFP_BENCH_REDIS", "redis://127.0.0.1:6379/13")
PG_ADMIN = os.environ.get("AFP_BENCH_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
PILOT = REPO / "fixtures" / "pilot" / "P01.yaml"
# The comparison harnesses' installs (benchmarks/run_all.py --setup), outside the project's environment.
INSPECT_VENV = Path(os.environ.get("AFP_BENCH_VENV", REPO / "benchmarks" / ".inspect-venv"))
PROMPTFOO_DIR = REPO / "benchmarks" / "promptfoo"


# Compiles the afpbench checkout that the given interpreter imports (its five source folders).
_COMPILE = ("import compileall, pathlib, afpbench.api as a; root = pathlib.Path(a.__file__).resolve().parents[1]; "
            "[compileall.compile_dir(root / d, quiet=1) "
            "for d in ('api', 'workers', 'scoring', 'fixtures', 'reference')]")


def compile_bytecode(python: str = sys.executable) -> str:
    """Compile the afpbench sources `python` imports to bytecode, as `pip install` does for an installed
    package, and return `python`. A source checkout run where PYTHONDONTWRITEBYTECODE is set (it is on
    the machine these figures come from) compiles every module again in every command, about 0.35 s a run
    that the installed Inspect AI and promptfoo never pay. Nothing else is changed."""
    subprocess.run([python, "-c", _COMPILE], check=True)
    return python


def machine() -> dict:
    """nproc and the load average now: every figure is reported next to these."""
    return {"nproc": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()],
            "python": sys.version.split()[0]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_fixtures(directory: Path, n: int) -> list[str]:
    """n copies of pilot fixture P01 under new ids, each task made unique by a reference line, so every
    prompt differs and each fixture passes the validity gate exactly as P01 does."""
    directory.mkdir(parents=True, exist_ok=True)
    base = yaml.safe_load(PILOT.read_text())
    ids = []
    for i in range(1, n + 1):
        fid = f"B{i:05d}"
        data = dict(base, id=fid, title=f"{base['title']} (benchmark copy {i})",
                    task=f"{base['task']}\nInternal reference: {fid}.")
        (directory / f"{fid}.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        ids.append(fid)
    return ids


def write_prompts(fixtures_dir: Path, out: Path, condition: str = "A") -> int:
    """The exact messages afpbench sends for each fixture under `condition`, one JSON line each: the
    Inspect task reads these, so both harnesses send the same 1,000 prompts."""
    sys.path.insert(0, str(REPO))
    from afpbench.fixtures.loader import load_fixtures
    from afpbench.reference.loader import load_instructions
    from afpbench.scoring.render import render

    instructions = load_instructions()
    lines = []
    for fx in load_fixtures(str(fixtures_dir)):
        prompt = render(condition, fx, instructions.text(condition))
        lines.append(json.dumps({"id": fx.id, "messages": prompt.messages()}))
    out.write_text("\n".join(lines) + "\n")
    return len(lines)


def write_spec(path: Path, sim_url: str, fixtures_dir: Path | None, *, conditions=("A",), repeats: int = 1,
               limits: dict | None = None, models: int = 1, lane: str = "sync") -> Path:
    spec = {
        "name": "benchmark (simulated)",
        "models": [{"provider": "sim", "model": f"sim-plain-{i}", "base_url": sim_url,
                    "label": f"sim-plain-{i} (simulated)", **({"limits": limits} if limits else {}),
                    **({"lane": lane} if lane != "sync" else {})}
                   for i in range(models)],
        "judges": [],
        "conditions": list(conditions),
        "repeats": repeats,
        "high_risk_repeats": repeats,
    }
    if fixtures_dir is not None:
        spec["fixtures"] = {"dir": str(fixtures_dir)}
    path.write_text(yaml.safe_dump(spec))
    return path


def wait_for_models(url: str, proc: subprocess.Popen, what: str, within_s: float = 60) -> None:
    """Until an OpenAI-compatible server at `url` lists its models; raise if it exits or takes too long."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            urllib.request.urlopen(f"{url}/v1/models", timeout=1).read()
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.2)


@contextmanager
def sim_process(latency_ms: float = 0, rate_per_min: float | None = None, burst: int = 1, log: Path | None = None):
    """`afpbench sim --plain` in its own process (so it never shares a GIL with what is measured)."""
    port = free_port()
    args = [*AFPBENCH, "sim", "--plain", f"--port={port}", f"--latency-ms={latency_ms}", f"--burst={burst}"]
    if rate_per_min:
        args.append(f"--rate-per-min={rate_per_min}")
    out = open(log or os.devnull, "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_models(url, proc, "the sim")
        yield f"{url}/v1"
    finally:
        stop(proc)
        out.close()


def sim_stats(sim_url: str) -> dict:
    return json.loads(urllib.request.urlopen(sim_url.removesuffix("/v1") + "/_sim/stats", timeout=5).read())


def sim_reset(sim_url: str) -> None:
    req = urllib.request.Request(sim_url.removesuffix("/v1") + "/_sim/reset", data=b"{}", method="POST")
    urllib.request.urlopen(req, timeout=5).read()


def stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def flush_redis(url: str = REDIS_URL) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


@contextmanager
def throwaway_postgres():
    """A fresh database bench_<random> on the local server, dropped afterwards."""
    from sqlalchemy import create_engine, text

    name = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def distributed_services():
    """Redis DB 13 flushed (before and after) and a throwaway PostgreSQL database brought to schema head
    before any worker starts, so none races another to create it. Yields (database URL, afpbench env)."""
    with throwaway_postgres() as db:
        flush_redis()
        env = afp_env(db, REDIS_URL)
        subprocess.run([*AFPBENCH, "db", "upgrade"], cwd=REPO, env=env, check=True, capture_output=True)
        try:
            yield db, env
        finally:
            flush_redis()


def ready_sqlite(path: Path, python: str = sys.executable) -> str:
    """A new SQLite database at `path` brought to schema head (untimed), as every run after a user's
    first finds its afpbench.db; its URL. A run in a new file creates the schema first (Alembic, about
    0.3-0.5 s), which promptfoo's and Inspect's stores, created once, never repeat in a timed round."""
    url = f"sqlite:///{path}"
    subprocess.run([python, "-m", "afpbench.api.cli", "db", "upgrade"], cwd=REPO, env=afp_env(url), check=True,
                   capture_output=True)
    return url


def afp_env(database_url: str, broker_url: str = "memory://localhost/", **extra: str) -> dict[str, str]:
    """The environment of an afpbench process. The prepared-fixture cache is off unless `extra` names a
    folder (AFP_CACHE_DIR): every figure is a cold one unless its benchmark says it is warm, and no run
    reads what an earlier benchmark left in ~/.cache."""
    env = {**os.environ, "AFP_DATABASE_URL": database_url, "AFP_BROKER_URL": broker_url,
           "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO), "AFP_CACHE_DIR": "off"}
    env.update(extra)
    return env


@contextmanager
def workers(env: dict[str, str], count: int, concurrency: int, log_dir: Path, prefix: str = "w",
            ready: bool = False, processes: int = 1):
    """`afpbench worker` commands (threads pool), stopped with SIGTERM (then SIGKILL) afterwards;
    `processes`: each command's `--processes` (its children are named `<prefix><i>-<j>`, j from 1);
    `ready`: yield only once every worker answers a ping over the broker."""
    procs = []
    names = []
    for i in range(count):
        log = open(log_dir / f"{prefix}{i}.log", "w")  # noqa: SIM115 - closed below
        args = [*AFPBENCH, "worker", f"--concurrency={concurrency}", f"--hostname={prefix}{i}@%h",
                "--pool=threads", "--loglevel=WARNING", f"--processes={processes}"]
        names += [f"{prefix}{i}"] if processes == 1 else [f"{prefix}{i}-{j}" for j in range(1, processes + 1)]
        procs.append((subprocess.Popen(args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True), log))
    try:
        if ready:
            wait_workers_ready(env["AFP_BROKER_URL"], names)
        yield [p for p, _ in procs]
    finally:
        for proc, log in procs:
            stop(proc)
            log.close()


def peak_rss_mb(pid: int) -> float:
    """VmHWM of a live process (Linux), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_json(args: list[str], env: dict[str, str], timeout: float = 1800) -> tuple[dict, float]:
    """Run an afpbench command that prints JSON; returns (parsed output, wall seconds)."""
    started = time.monotonic()
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout), wall


def emit(name: str, figures: dict, out_dir: Path | None = None) -> dict:
    record = {"benchmark": name, "machine_after": machine(), **figures}
    text = json.dumps(record, indent=2, default=str)
    print(text, flush=True)
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{name}.json").write_text(text)
    return record


def wait_workers_ready(broker_url: str, names: list[str], timeout: float = 120) -> float:
    """Ping the workers over the broker until each answers; returns the seconds it took."""
    from celery import Celery

    app = Celery(broker=broker_url)
    started = time.monotonic()
    try:
        while time.monotonic() - started < timeout:
            replies = app.control.ping(timeout=1.0)
            seen = {k.split("@")[0] for r in replies for k in r}
            if set(names) <= seen:
                return time.monotonic() - started
        raise RuntimeError(f"workers {names} did not answer a ping within {timeout} s")
    finally:
        app.close()


def sweep_span(database_url: str, sweep_id: str) -> dict:
    """Seconds from the sweep row's creation to its last result, and attempt/429 counts, from SQL."""
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url.replace("+psycopg", "+psycopg") if "postgres" in database_url
                           else database_url)
    with engine.connect() as conn:
        created = conn.execute(text("select created_at from sweep where id = :s"), {"s": sweep_id}).scalar()
        last = conn.execute(text("select max(created_at) from result where sweep_id = :s"),
                            {"s": sweep_id}).scalar()
        attempts = conn.execute(text("select count(*) from attempt a join cell c on c.id = a.cell_id "
                                     "where c.sweep_id = :s"), {"s": sweep_id}).scalar()
        limited = conn.execute(text("select count(*) from attempt a join cell c on c.id = a.cell_id "
                                    "where c.sweep_id = :s and a.http_status = 429"), {"s": sweep_id}).scalar()
        results = conn.execute(text("select count(distinct cell_id) from result where sweep_id = :s"),
                               {"s": sweep_id}).scalar()
    engine.dispose()
    if isinstance(created, str):
        from datetime import datetime

        created, last = datetime.fromisoformat(created), datetime.fromisoformat(last)
    return {"span_s": (last - created).total_seconds(), "attempts": attempts, "http_429": limited,
            "cells_with_result": results, "created_epoch": _epoch(created), "last_epoch": _epoch(last)}


def _epoch(moment) -> float:
    """Seconds since the epoch of a stored UTC moment (SQLite hands it back without a zone)."""
    from datetime import UTC

    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


@contextmanager
def mock_process(latency_ms: float = 0):
    """benchmarks/mock_openai.py in its own process; yields (its /v1 URL, its pid)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "mock_openai.py"), f"--port={port}",
                             f"--latency-ms={latency_ms}"], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_models(url, proc, "the mock server")
        yield f"{url}/v1", proc.pid
    finally:
        stop(proc)


def mock_stats(mock_url: str) -> dict:
    return json.loads(urllib.request.urlopen(mock_url.removesuffix("/v1") + "/_mock/stats", timeout=5).read())


def mock_reset(mock_url: str) -> None:
    req = urllib.request.Request(mock_url.removesuffix("/v1") + "/_mock/reset", data=b"{}", method="POST")
    urllib.request.urlopen(req, timeout=5).read()


_TICK = os.sysconf("SC_CLK_TCK")


def pid_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def tree_cpu_s(pid: int) -> float:
    """pid_cpu_s of a live process and of its live descendants (`afpbench worker --processes N`'s children)."""
    total = pid_cpu_s(pid)
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            total += tree_cpu_s(int(child))
    return total


class _Sampler:
    """Calls `_sample()` once on entry, every `every_s` on a thread while the block runs, and once on exit."""

    every_s: float

    def _sample(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        import threading

        self._stop = False
        self._sample()
        self._started()

        def loop() -> None:
            while not self._stop:
                time.sleep(self.every_s)
                self._sample()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def _started(self) -> None:
        """After the first sample."""

    def __exit__(self, *_exc: object) -> None:
        self._stop = True
        self._thread.join()
        self._sample()


class CpuSampler(_Sampler):
    """CPU seconds the PostgreSQL backends of one database and the Redis server spend while it runs,
    sampled from /proc every 0.2 s (a backend is recognised by the database name in its title; one
    that starts and ends between two samples is missed). Redis is one server for every user of the
    machine, so its figure is an upper bound."""

    def __init__(self, db_name: str, every_s: float = 0.2):
        self.db_name, self.every_s = db_name, every_s
        self.postgres_s = self.redis_s = 0.0
        self._first: dict[int, float] = {}
        self._last: dict[int, tuple[str, float]] = {}

    def _sample(self) -> None:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                kind = ("postgres" if title.startswith("postgres:") and f" {self.db_name} " in title
                        else "redis" if title.startswith("redis-server") else None)
                if kind:
                    self._last[int(entry.name)] = (kind, pid_cpu_s(int(entry.name)))
            except OSError:
                continue

    def _started(self) -> None:
        # Backends alive at the start count from there; later ones from their start (0 s).
        self._first = {pid: cpu for pid, (_kind, cpu) in self._last.items()}

    def __exit__(self, *_exc: object) -> None:
        super().__exit__()
        for pid, (kind, cpu) in self._last.items():
            spent = cpu - self._first.get(pid, 0.0)
            if kind == "postgres":
                self.postgres_s += spent
            else:
                self.redis_s += spent


class MachineCpu(_Sampler):
    """The whole machine's CPU in use (every process, every core), from /proc/stat every `every_s`
    while it runs: `busy_s(a, b)` is the core-seconds spent between two wall-clock moments (time.time()),
    `idle_s(a, b)` what the machine's cores left unused then."""

    def __init__(self, every_s: float = 0.05):
        self.every_s = every_s
        self.samples: list[tuple[float, float, float]] = []  # (wall clock, busy s, idle s) since boot

    def _sample(self) -> None:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        self.samples.append((time.time(), (sum(fields[:8]) - idle) / _TICK, idle / _TICK))

    def _at(self, moment: float, column: int) -> float:
        """The counter at `moment`, interpolated between the samples around it."""
        import bisect

        i = bisect.bisect_left([s[0] for s in self.samples], moment)
        if i == 0:
            return self.samples[0][column]
        if i == len(self.samples):
            return self.samples[-1][column]
        (t0, *c0), (t1, *c1) = self.samples[i - 1], self.samples[i]
        share = (moment - t0) / (t1 - t0) if t1 > t0 else 1.0
        return c0[column - 1] + share * (c1[column - 1] - c0[column - 1])

    def busy_s(self, start: float, end: float) -> float:
        return self._at(end, 1) - self._at(start, 1)

    def idle_s(self, start: float, end: float) -> float:
        return self._at(end, 2) - self._at(start, 2)
