"""A burst of concurrent GETs against a running `afpbench serve`, and what it answered: the driver that
benchmarks/bench_api_burst.py measures with and tests/integration/test_api_burst.py asserts with.

Every request is sent at once on its own connection (httpx, asyncio); a second client asks /healthz every
0.2 s while the burst lasts; afterwards every route is asked once more. Nothing here asserts. The sweeps
it reads are made by `afpbench run` on the simulator (SIMULATED output).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
# A judged sweep (three pilot fixtures x A-D, the simulated model and judge) and one nobody can judge
# (`judges: []`: its cells end GRADER_DISPUTE), so every read route has rows to read.
NO_JUDGES_SPEC = """name: no judges (simulated)
models: [{provider: sim, model: sim-1, label: "sim (simulated)"}]
judges: []
conditions: [A, B]
fixtures: {only: [P01]}
"""


@dataclass(frozen=True)
class Answer:
    path: str
    status: int | None  # None: no HTTP answer (timeout or connection error, named in `error`)
    seconds: float
    retry_after: str | None = None
    error: str | None = None
    at: float = 0.0  # seconds since the burst began


@dataclass
class BurstResult:
    burst: list[Answer]
    health: list[Answer]
    after: list[Answer]
    burst_s: float
    rss_mb: dict[str, float] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for a in self.burst:
            key = str(a.status) if a.status is not None else f"no answer ({a.error})"
            out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items()))

    def refusals_without_retry_after(self) -> list[Answer]:
        return [a for a in self.burst if a.status == 503 and not a.retry_after]


def populate(env: dict[str, str], work: Path) -> dict[str, object]:
    """Two finished sweeps in the database of `env` (embedded `afpbench run`, simulated); the ids the
    routes need: a sweep, one of its cells and fixtures, and a disputed cell."""
    def run(*args: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "run", "--json", *args], cwd=work,
                             env={**env, "AFP_BROKER_URL": "memory://"}, capture_output=True, text=True,
                             timeout=900)
        if out.returncode not in (0, 3):
            raise RuntimeError(f"afpbench run {' '.join(args)} exited {out.returncode}: {out.stderr[-2000:]}")
        return json.loads(out.stdout)

    spec = work / "no-judges.yaml"
    spec.write_text(NO_JUDGES_SPEC)
    judged = run("--fixtures", "P01,P06,P08")["sweep_id"]
    disputed = run(str(spec))["sweep_id"]
    from sqlalchemy import create_engine, text  # read directly: the ids are facts of the database

    engine = create_engine(env["AFP_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            cell = conn.execute(text("SELECT min(id) FROM cell WHERE sweep_id = :s"), {"s": judged}).scalar_one()
            dispute = conn.execute(text("SELECT min(id) FROM cell WHERE sweep_id = :s"), {"s": disputed}).scalar_one()
    finally:
        engine.dispose()
    return {"sweep": judged, "cell": cell, "fixture": "P01", "disputed_sweep": disputed, "disputed_cell": dispute}


def read_routes(ids: dict[str, object], *, readyz: bool = True) -> list[str]:
    """Every read route of the API and the viewer, with real ids."""
    s, c, f = ids["sweep"], ids["cell"], ids["fixture"]
    routes = [
        "/sweeps", "/sweeps?status=complete", f"/sweeps/{s}", f"/sweeps/{s}/cells",
        f"/sweeps/{ids['disputed_sweep']}/cells?state=GRADER_DISPUTE", f"/cells/{c}",
        f"/sweeps/{s}/report", f"/sweeps/{s}/report?format=md", f"/sweeps/{s}/report?format=html",
        "/adjudications", f"/adjudications?sweep={ids['disputed_sweep']}", "/metrics", "/openapi.json", "/docs",
        "/view/", f"/view/sweeps/{s}", f"/view/sweeps/{s}/report", f"/view/sweeps/{s}/progress.json",
        f"/view/cells/{c}", f"/view/sweeps/{s}/fixtures/{f}",
    ]
    return [*routes, "/readyz"] if readyz else routes


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class _RssSampler:
    """The highest VmRSS of `pid` seen every 50 ms while running."""

    def __init__(self, pid: int):
        self.pid, self.peak = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except OSError:
                return

    def __enter__(self) -> _RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def _get(client: httpx.AsyncClient, path: str, started: float) -> Answer:
    t0 = time.monotonic()
    try:
        r = await client.get(path)
        await r.aread()
        return Answer(path, r.status_code, time.monotonic() - t0, r.headers.get("retry-after"),
                      at=t0 - started)
    except httpx.HTTPError as exc:
        return Answer(path, None, time.monotonic() - t0, error=type(exc).__name__, at=t0 - started)


async def _probe_health(base: str, done: asyncio.Event, started: float, timeout_s: float) -> list[Answer]:
    out = []
    async with httpx.AsyncClient(base_url=base, timeout=timeout_s) as client:
        while not done.is_set():
            out.append(await _get(client, "/healthz", started))
            try:
                await asyncio.wait_for(done.wait(), 0.2)
            except TimeoutError:
                pass
    return out


async def _burst(base: str, paths: list[str], headers: dict[str, str], cookies: dict[str, str], n: int,
                 timeout_s: float) -> tuple[list[Answer], list[Answer], float]:
    started = time.monotonic()
    done = asyncio.Event()
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=0)  # one connection per request
    health = asyncio.create_task(_probe_health(base, done, started, timeout_s))
    async with httpx.AsyncClient(base_url=base, headers=headers, cookies=cookies, limits=limits,
                                 timeout=timeout_s) as client:
        answers = await asyncio.gather(*(_get(client, paths[i % len(paths)], started) for i in range(n)))
    elapsed = time.monotonic() - started
    done.set()
    return list(answers), await health, elapsed


async def _each_once(base: str, paths: list[str], headers: dict[str, str], cookies: dict[str, str],
                     timeout_s: float) -> list[Answer]:
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=base, headers=headers, cookies=cookies, timeout=timeout_s) as client:
        return [await _get(client, p, started) for p in paths]


def run_burst(base: str, paths: list[str], *, headers: dict[str, str], cookies: dict[str, str], pid: int,
              n: int = 1000, timeout_s: float = 120.0, settle_s: float = 5.0) -> BurstResult:
    """Warm every route once, then `n` concurrent GETs round-robin over `paths` with /healthz probed
    throughout, then every route once more; RSS of `pid` before, at its peak, and `settle_s` after."""
    asyncio.run(_each_once(base, paths, headers, cookies, timeout_s))  # imports and caches: the start state
    start = rss_mb(pid)
    with _RssSampler(pid) as sampler:
        burst, health, elapsed = asyncio.run(_burst(base, paths, headers, cookies, n, timeout_s))
        after = asyncio.run(_each_once(base, paths, headers, cookies, timeout_s))
    time.sleep(settle_s)
    return BurstResult(burst, health, after, elapsed,
                       {"start": round(start, 1), "peak": round(max(sampler.peak, start), 1),
                        "after": round(rss_mb(pid), 1)})


def percentiles(seconds: list[float]) -> dict[str, float]:
    if not seconds:
        return {}
    ordered = sorted(seconds)
    q = statistics.quantiles(ordered, n=100, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 99
    return {"p50": round(q[49], 3), "p90": round(q[89], 3), "p99": round(q[98], 3), "max": round(ordered[-1], 3)}


def figures(result: BurstResult) -> dict[str, object]:
    """The benchmark's numbers: answers by status, latencies by kind, /healthz during the burst, each route
    after it, RSS."""
    ok = [a.seconds for a in result.burst if a.status == 200]
    refused = [a.seconds for a in result.burst if a.status == 503]
    return {
        "requests": len(result.burst), "burst_s": round(result.burst_s, 2), "answers": result.counts(),
        "server_errors_5xx_not_503": sum(1 for a in result.burst if a.status and a.status >= 500 and a.status != 503),
        "refused_503_without_retry_after": len(result.refusals_without_retry_after()),
        "latency_200_s": percentiles(ok), "latency_503_s": percentiles(refused),
        "latency_all_answered_s": percentiles([a.seconds for a in result.burst if a.status is not None]),
        "healthz_during": {"probes": len(result.health),
                           "answered_200": sum(1 for a in result.health if a.status == 200),
                           "latency_s": percentiles([a.seconds for a in result.health if a.status is not None])},
        "after_burst": {"routes": len(result.after),
                        "answered_200": sum(1 for a in result.after if a.status == 200),
                        "slowest_s": round(max((a.seconds for a in result.after), default=0.0), 3),
                        "not_200": [(a.path, a.status, a.error) for a in result.after if a.status != 200]},
        "rss_mb": result.rss_mb,
        "rss_after_vs_start": round(result.rss_mb["after"] / result.rss_mb["start"], 3),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }
