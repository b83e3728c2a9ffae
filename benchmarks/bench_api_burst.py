"""Benchmark: 1,000 concurrent authorised GETs over every read route of `afpbench serve` on PostgreSQL.

    .venv/bin/python benchmarks/bench_api_burst.py [--requests 1000] [--timeout 120] [--out DIR]

A throwaway PostgreSQL database gets two finished simulated sweeps (`afpbench run`, embedded); then
`afpbench serve` (distributed mode on Redis DB 13, so no worker shares the process; a token) takes the
burst (benchmarks/api_burst.py): every request on its own connection at once, /healthz probed every 0.2 s
throughout, every route asked once more afterwards. Figures: answers by status (0 HTTP 500 and every
refusal a 503 with Retry-After are the targets), latency percentiles, /healthz during the burst, the
slowest route after it, the server's RSS before / at its peak / 5 s after, the transactions PostgreSQL
still holds open afterwards, and the load. docs/RELIABILITY.md ("The API under a burst") has the figures.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from api_burst import figures, populate, read_routes, run_burst
from harness import AFPBENCH, REPO, distributed_services, emit, free_port, machine, stop

TOKEN = "burst-bench-token-not-a-secret"


def _open_transactions(database_url: str) -> int:
    from sqlalchemy import create_engine, text

    name = database_url.rsplit("/", 1)[1]
    engine = create_engine(database_url.rsplit("/", 1)[0] + "/postgres")
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE datname = :d AND state LIKE "
                                     "'idle in transaction%'"), {"d": name}).scalar_one()
    finally:
        engine.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=120.0, help="per request (s)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    before = machine()
    with tempfile.TemporaryDirectory(prefix="afp-burst-") as tmp, distributed_services() as (db, env):
        work = Path(tmp)
        env = {**env, "AFP_API_TOKEN": TOKEN}
        ids = populate(env, work)
        port = free_port()
        log = open(work / "serve.log", "w")  # noqa: SIM115 - closed below
        proc = subprocess.Popen([*AFPBENCH, "serve", "--port", str(port), "--log-level", "warning"], cwd=REPO,
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_up(base, proc)
            import httpx

            from afpbench.api.viewer.auth import COOKIE, session_value

            readyz = httpx.get(f"{base}/readyz", timeout=30).status_code != 404
            result = run_burst(base, read_routes(ids, readyz=readyz), headers={"Authorization": f"Bearer {TOKEN}"},
                               cookies={COOKIE: session_value(TOKEN.encode())}, pid=proc.pid, n=args.requests,
                               timeout_s=args.timeout)
            open_tx = _open_transactions(db)
        finally:
            stop(proc)
            log.close()
            tail = (work / "serve.log").read_text(errors="replace")[-1500:]
    emit("api_burst", {"machine_before": before, "command": "bench_api_burst.py", **figures(result),
                       "idle_in_transaction_after": open_tx, "server_log_tail": tail}, args.out)


def _wait_up(base: str, proc: subprocess.Popen, within_s: float = 120) -> None:
    import time

    import httpx

    deadline = time.monotonic() + within_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"afpbench serve exited {proc.returncode}")
        try:
            if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("afpbench serve did not come up")
        time.sleep(0.3)


if __name__ == "__main__":
    main()
